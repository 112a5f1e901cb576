package admit

import "testing"

func TestNormalizeScope(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"", "", true}, {"/a/b", "a/b", true}, {"a", "a", true},
		{"..", "", false}, {"a/../b", "", false}, {"/../x", "", false},
	} {
		if got, ok := NormalizeScope(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("NormalizeScope(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

package previews

import "testing"

func TestTargetAndParsePort(t *testing.T) {
	for _, tc := range []struct {
		host string
		port uint32
		ok   bool
	}{
		{"localhost", 8080, true}, {"LOCALHOST", 1, true}, {"127.0.0.1", 65535, true}, {"::1", 80, true}, {"[::1]", 80, true},
		{"127.0.0.2", 80, false}, {"0.0.0.0", 80, false}, {"10.0.0.1", 80, false}, {"example.com", 80, false},
		{"localhost.", 80, false}, {"", 80, false}, {"::1%lo", 80, false}, {"::ffff:127.0.0.1", 80, false},
		{"localhost", 0, false}, {"localhost", 65536, false}, {"localhost", 1 << 31, false},
	} {
		n, err := Target(tc.host, tc.port)
		if (err == nil) != tc.ok || (tc.ok && n != int(tc.port)) {
			t.Errorf("Target(%q, %d) = %d, %v; ok want %v", tc.host, tc.port, n, err, tc.ok)
		}
	}
	for in, want := range map[string]int{"1": 1, "80": 80, "65535": 65535, "0": 0, "65536": 0, "080": 0, "+80": 0, "8o": 0, "": 0, "123456": 0, "-1": 0} {
		n, err := ParsePort(in)
		if n != want || (want == 0) != (err != nil) {
			t.Errorf("ParsePort(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
}

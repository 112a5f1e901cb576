package extensions

import "testing"

// TestJSONScanners: the depth and the longest integer of JSON text count
// what lies outside strings only, with escaped quotes and backslashes
// inside strings skipped, floats not counted as integers.
func TestJSONScanners(t *testing.T) {
	for _, tc := range []struct {
		s            string
		depth, digit int
	}{
		{`{"a":[1,2,{"b":"[x\"]"}]}`, 3, 1},
		{`["\\", [12345]]`, 2, 5},
		{`["\\\"[[[", 7]`, 1, 1},
		{`{"123456789":"987654321"}`, 1, 0},
		{`[1.5e300, -1234, 12e3, 0]`, 1, 4},
		{`"unterminated [[[ 99999`, 0, 0},
		{`[[[]]]`, 3, 0},
		{``, 0, 0},
	} {
		if got := jsonDepth(tc.s); got != tc.depth {
			t.Errorf("jsonDepth(%s) = %d, want %d", tc.s, got, tc.depth)
		}
		if got := jsonLongestInt(tc.s); got != tc.digit {
			t.Errorf("jsonLongestInt(%s) = %d, want %d", tc.s, got, tc.digit)
		}
	}
}

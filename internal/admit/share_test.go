package admit

import (
	"strings"
	"testing"
)

// TestCallerShare: one token may hold the whole pool; with --tokens each
// holds at most half, rounded up, and a pool of one stays usable.
func TestCallerShare(t *testing.T) {
	for _, c := range []struct {
		total  int
		tokens bool
		want   int
	}{
		{4, false, 4}, {100, false, 100}, {1, true, 1}, {2, true, 1}, {3, true, 2}, {4, true, 2}, {100, true, 50}, {101, true, 51},
	} {
		if got := CallerShare(c.total, c.tokens); got != c.want {
			t.Errorf("CallerShare(%d, %v) = %d, want %d", c.total, c.tokens, got, c.want)
		}
	}
	for caller, who := range map[string]string{"": "the daemon's token", "ci": `token "ci"`} {
		msg := ShareRefusal(caller, 2, 4, "browser sessions", "--browser-max-sessions")
		for _, want := range []string{who, "holds 2 of the 4 browser sessions", "--browser-max-sessions", "--tokens"} {
			if !strings.Contains(msg, want) {
				t.Errorf("ShareRefusal(%q): %q lacks %q", caller, msg, want)
			}
		}
	}
}

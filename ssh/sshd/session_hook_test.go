package sshd

import (
	"strings"
	"sync"
	"testing"

	"github.com/pkg/sftp"
)

// TestSessionEndedHook: every exec, shell-less refusal and SFTP session
// is reported once when it ends, with its outcome and byte counts.
func TestSessionEndedHook(t *testing.T) {
	var mu sync.Mutex
	got := map[string]SessionRecord{}
	e := newEnv(t, withOpts(func(o *testOptions) {
		o.SessionEnded = func(r SessionRecord) {
			mu.Lock()
			defer mu.Unlock()
			got[r.Kind+":"+r.Command] = r
		}
	}))
	c := e.dial(t, "")
	run := func(cmd, stdin string) {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.Stdin = strings.NewReader(stdin)
		_, _ = s.CombinedOutput(cmd)
	}
	run("cat", "hello")
	run("exit 3", "")
	run("", "") // refused: empty command
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.ReadDir("."); err != nil {
		t.Fatal(err)
	}
	sc.Close()
	c.Close()
	e.srv.Close()

	mu.Lock()
	defer mu.Unlock()
	for _, tt := range []struct {
		key, outcome string
		code         int
		in, out      int64 // exact, or -1 for "more than zero"
	}{
		{"exec:cat", "ok", 0, 5, 5},
		{"exec:exit 3", "error", 3, 0, 0},
		{"exec:", "refused", ExitCannotExecute, 0, 0},
		{"sftp:", "ok", 0, -1, -1},
	} {
		r, ok := got[tt.key]
		if !ok {
			t.Errorf("%s: not reported (got %v)", tt.key, got)
			continue
		}
		if r.Outcome != tt.outcome || r.ExitCode != tt.code || r.Remote == "" || r.Start.IsZero() || r.Duration <= 0 {
			t.Errorf("%s: %+v", tt.key, r)
		}
		if (tt.in >= 0 && r.BytesIn != tt.in) || (tt.in < 0 && r.BytesIn <= 0) ||
			(tt.out >= 0 && r.BytesOut != tt.out) || (tt.out < 0 && r.BytesOut <= 0) {
			t.Errorf("%s: bytes in %d out %d, want %d %d", tt.key, r.BytesIn, r.BytesOut, tt.in, tt.out)
		}
	}
}

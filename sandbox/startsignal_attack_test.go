//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

// TestStartSignalWhileWaiting: a signal reaches a started command while
// its Wait already runs, as every caller has it (an SSH session waits from
// the start), on pipes and on a pty, in every mode that allows it. The
// command's trap runs and picks the exit status.
func TestStartSignalWhileWaiting(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
		for _, pty := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/pty=%v", mode, pty), func(t *testing.T) {
				e, _ := newExec(t, mode)
				var out syncbuf.Buffer
				req := Request{Command: `trap 'echo got-term; exit 5' TERM; echo ready; while :; do sleep 0.05; done`}
				stdio := Stdio{Stdout: &out, Stderr: &out}
				if pty {
					inR, inW := io.Pipe()
					defer inW.Close()
					req.Pty, stdio.Stdin = &Pty{Cols: 80, Rows: 24}, inR
				}
				p, err := e.Start(context.Background(), req, stdio)
				if err != nil {
					t.Fatal(err)
				}
				type result struct {
					st  ExitStatus
					err error
				}
				done := make(chan result, 1)
				go func() { st, err := p.Wait(); done <- result{st, err} }()
				waitFor(t, &out, "ready")
				if err := p.Signal("TERM"); err != nil {
					t.Errorf("TERM while Wait runs: %v", err)
				}
				select {
				case r := <-done:
					if r.err != nil || r.st.Code != 5 || !strings.Contains(out.String(), "got-term") {
						t.Errorf("status %+v err %v out %q; want exit 5 after got-term", r.st, r.err, out.String())
					}
				case <-time.After(20 * time.Second): // a hang guard: the loop never ends by itself
					_ = p.Signal("KILL")
					e.Close()
					<-done
					t.Fatal("TERM did not reach the command while Wait ran")
				}
			})
		}
	}
}

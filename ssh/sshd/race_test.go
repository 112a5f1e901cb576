package sshd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/sandbox"
)

// doneExecutor starts "processes" that have already ended when Start
// returns: the fastest command there can be.
type doneExecutor struct{ sandbox.Executor }

func (doneExecutor) Start(_ context.Context, req sandbox.Request, stdio sandbox.Stdio) (sandbox.Process, error) {
	if req.Command == "fail" {
		return nil, errors.New("cannot start")
	}
	fmt.Fprint(stdio.Stdout, "out")
	return doneProcess{}, nil
}

type doneProcess struct{}

func (doneProcess) Wait() (sandbox.ExitStatus, error) { return sandbox.ExitStatus{Code: 3}, nil }
func (doneProcess) Signal(string) error               { return nil }
func (doneProcess) Resize(uint16, uint16) error       { return nil }
func (doneProcess) CloseStdin() error                 { return nil }

// TestExecEndsBeforeReply: a command that ends (exit-status sent, channel
// closed) before the request loop gets any further must still find its exec
// request answered first; a client that sees the close before the reply
// reports the request itself as failed (x/crypto's Run returns io.EOF, ssh2
// "Unable to exec"). The hook holds the request loop until the command's
// end has been sent, which makes the other order (the reply sent after
// the command started) fail every time.
func TestExecEndsBeforeReply(t *testing.T) {
	e := newEnv(t, withOpts(func(o *testOptions) { o.Executor = doneExecutor{} }), withMode(""))
	e.srv.afterStart = func(ss *session) { <-ss.done }
	c := e.dial(t, "")
	for i := 0; i < 20; i++ {
		for _, tc := range []struct {
			cmd, out, errOut string
			code             int
		}{
			{"true", "out", "", 3},
			{"fail", "", "agentbe: cannot start\n", exitCannotExecute},
			{"", "", "agentbe: empty command\n", exitCannotExecute},
		} {
			s, err := c.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			var o, eo strings.Builder
			s.Stdout, s.Stderr = &o, &eo
			err = s.Run(tc.cmd)
			s.Close()
			var ee *gossh.ExitError
			if !errors.As(err, &ee) || ee.ExitStatus() != tc.code || o.String() != tc.out || eo.String() != tc.errOut {
				t.Fatalf("run %q: %v, stdout %q stderr %q; want exit %d, %q, %q",
					tc.cmd, err, o.String(), eo.String(), tc.code, tc.out, tc.errOut)
			}
		}
	}
	// A shell too.
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Shell(); err != nil {
		t.Fatalf("shell: %v", err)
	}
	var ee *gossh.ExitError
	if err := s.Wait(); !errors.As(err, &ee) || ee.ExitStatus() != 3 {
		t.Fatalf("shell Wait = %v", err)
	}
}

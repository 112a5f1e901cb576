package sshws

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/ssh/sshd"
)

const exitCannotExecute = sshd.ExitCannotExecute

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

//go:build linux

package sandbox

import (
	"fmt"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// acquire takes one of the executor's slots for a command, or refuses it at
// once when all are taken: a request over the bound gets a clear error
// instead of waiting behind commands that may run for minutes.
func (e *executor) acquire(command string) error {
	select {
	case e.slots <- struct{}{}:
		return nil
	default:
		return &errcode.Error{Code: errcode.ExecError, Op: "exec", Command: command,
			Msg: fmt.Sprintf("%d commands are already running, the most --exec-max-concurrent allows; try again when one has finished", cap(e.slots))}
	}
}

// release gives back the slot acquire took.
func (e *executor) release() { <-e.slots }

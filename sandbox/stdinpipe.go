//go:build linux

package sandbox

import (
	"io"
	"os"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// StdinPipe, given as Stdio.Stdin to Start (pipes, no Pty), asks for the
// write end of the command's stdin pipe instead of a reader to copy from:
// Start hands it back through File, and no goroutine of the sandbox stands
// between the caller's writes and the command. A caller that writes
// messages (an upstream MCP server's requests) saves a goroutine hand-off
// and a copy per message that way (docs/performance.md, "The routed
// upstream call"), and learns at once, from its write's error, that the
// command closed its stdin or exited.
//
// The file is the process's own stdin pipe: the kernel bounds it (a write
// blocks while the pipe is full and the command does not read), it is
// non-blocking underneath, so Close (by the caller, Process.CloseStdin or
// Wait) ends a write blocked on it with os.ErrClosed, and a write after the
// command closed its end fails with EPIPE. Closing it is the command's EOF;
// Wait closes it too, so a caller that does not is not left holding it.
type StdinPipe struct {
	f *os.File
}

// Read makes a StdinPipe an io.Reader, as Stdio.Stdin is; nothing reads
// it (Start hands out the pipe instead), and a read ends at once.
func (*StdinPipe) Read([]byte) (int, error) { return 0, io.EOF }

// File is the write end of the command's stdin, set once Start has
// returned without an error; nil before.
func (s *StdinPipe) File() *os.File { return s.f }

// stdinPipe is the StdinPipe of stdio, if it has one; a Pty has no pipe to
// hand out, so that pair is refused.
func stdinPipe(req Request, stdio Stdio) (*StdinPipe, error) {
	sp, ok := stdio.Stdin.(*StdinPipe)
	if !ok {
		return nil, nil
	}
	if req.Pty != nil {
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: "exec", Command: req.Command, Msg: "a StdinPipe is a pipe's write end; with a pty, give a reader as Stdin"}
	}
	return sp, nil
}

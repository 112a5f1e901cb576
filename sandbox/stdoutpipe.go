//go:build linux

package sandbox

import (
	"errors"
	"os"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// StdoutPipe, given as Stdio.Stdout to Start (pipes, no Pty), asks for the
// read end of the command's stdout pipe instead of a writer to copy to:
// Start hands it back through File, and the caller reads the command's
// output on its own goroutine. A caller that reads messages (an upstream
// MCP server's answers) saves a goroutine hand-off per message that way
// (docs/performance.md, "The routed upstream call"): the sandbox's copier
// no longer stands between the process and the reader.
//
// The file is the pipe itself, non-blocking underneath and in Go's poller,
// close-on-exec, so no other command inherits it:
//
//   - the end of the stream is told by Read returning io.EOF, once every
//     process holding the write end has closed it (the command closed its
//     stdout, or exited and what it left in its group or cgroup was
//     killed); no OutputEnder is told, the reader sees the end itself.
//     Stderr is copied to Stdio.Stderr as without a StdoutPipe.
//   - Wait waits for the exit, the kill of what the command left behind
//     and the copy of stderr, not for stdout, and neither reads nor closes
//     it: what the command wrote before it exited is still there to read
//     after Wait. The caller closes the file; Close, or a read deadline,
//     ends a Read blocked on it (os.ErrClosed, os.ErrDeadlineExceeded).
//     A process that escaped the kill may hold the write end open, so a
//     caller that waits for io.EOF after Wait bounds that wait itself.
type StdoutPipe struct {
	f *os.File
}

// errStdoutPipeWrite is what Write says: nothing writes a StdoutPipe.
var errStdoutPipeWrite = errors.New("sandbox: a StdoutPipe is read through its File, not written")

// Write makes a StdoutPipe an io.Writer, as Stdio.Stdout is; nothing
// writes it (Start hands out the pipe instead), and a write fails.
func (*StdoutPipe) Write([]byte) (int, error) { return 0, errStdoutPipeWrite }

// File is the read end of the command's stdout, set once Start has
// returned without an error; nil before.
func (s *StdoutPipe) File() *os.File { return s.f }

// stdoutPipe is the StdoutPipe of stdio, if it has one; a Pty has no pipe
// to hand out, so that pair is refused.
func stdoutPipe(req Request, stdio Stdio) (*StdoutPipe, error) {
	op, ok := stdio.Stdout.(*StdoutPipe)
	if !ok {
		return nil, nil
	}
	if req.Pty != nil {
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: "exec", Command: req.Command, Msg: "a StdoutPipe is a pipe's read end; with a pty, give a writer as Stdout"}
	}
	return op, nil
}

// stdoutFile is our read end of the stdout pipe (rawPipe's bare
// descriptor, non-blocking and close-on-exec) as a file in Go's poller,
// for a StdoutPipe.
func stdoutFile(fd int) *os.File {
	return os.NewFile(uintptr(fd), "|0")
}

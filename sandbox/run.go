//go:build linux

package sandbox

import (
	"context"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// launched is a started command: the launch and finish steps Run and Start (with
// process.Wait) share, so that a fix to the lifecycle lands once.
type launched struct {
	c       *child
	readers []*os.File // our ends of stdout/stderr (or the pty master)
	copies  sync.WaitGroup
	exited  atomic.Bool // the shell exited: output reads may now time out
	timer   *time.Timer
	stopCtx func() bool

	// sigMu orders Signal before the wait that reaps the process: once
	// reaped is set its pid (and process group id) may be another
	// process's, and Signal sends nothing.
	sigMu  sync.Mutex
	reaped bool
}

// launchSpec is what launch needs besides the command in r.c.cmd.
type launchSpec struct {
	direct    bool   // the command takes the direct path (startCmd's retry)
	script    string // req.Command
	wd        *workdir
	env       []string
	pty       bool
	childEnds []*os.File    // handed to the child; closed here once it started (or failed to)
	outs      []io.Writer   // where r.readers[i] is copied (Start; Run collects its own)
	timeout   time.Duration // 0: none
	// spawn starts the command (nil: the executor's spawner); an in-place
	// overlay's is a thread of its own, in a private mount namespace.
	spawn *spawner
}

// launch tracks the command (Close kills it), starts it in its cgroup
// (falling back to the shell when a direct start fails), closes the
// workdir and the child's ends, copies its output out, and arms the
// timeout and ctx's cancellation. On error nothing runs, the readers and
// child's ends are closed and the command is untracked; the error is the
// one Run and Start return.
func (e *executor) launch(ctx context.Context, r *launched, s launchSpec) error {
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			if f != nil {
				f.Close()
			}
		}
	}
	r.c.boundary = s.wd.boundary
	if !e.track(r.c) {
		closeAll(s.childEnds)
		closeAll(r.readers)
		return errClosed()
	}
	sp := s.spawn
	if sp == nil {
		sp = e.spawn
	}
	cmd, err := e.startIn(sp, r.c, func(sp *spawner) (*exec.Cmd, error) {
		return e.startCmd(sp, r.c.cmd, s.direct, s.script, s.wd, s.env, s.pty)
	})
	r.c.cmd = cmd
	e.starts.Done()
	s.wd.close()
	closeAll(s.childEnds)
	if err != nil {
		e.untrack(r.c)
		closeAll(r.readers)
		return execError(s.script, err)
	}
	r.c.started()
	r.copies.Add(len(r.readers))
	for i, rd := range r.readers {
		go pump(s.outs[i], rd, &r.exited, &r.copies)
	}
	if s.timeout > 0 {
		r.timer = time.AfterFunc(s.timeout, func() { r.c.timedOut.Store(true); r.c.kill() })
	}
	r.stopCtx = context.AfterFunc(ctx, r.c.kill)
	return nil
}

// killLeftovers kills what the exited shell left in its process group (or
// session, for a pty outside a sandbox that owns its tree).
func (r *launched) killLeftovers() {
	pid := r.c.cmd.Process.Pid
	if r.c.session && !r.c.ownsTree {
		killSession(pid)
	} else {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// reaping marks the process as about to be reaped (sigMu).
func (r *launched) reaping() {
	r.sigMu.Lock()
	r.reaped = true
	r.sigMu.Unlock()
}

// finish waits for the shell to exit, ends what it left behind in its
// process group (or session, for a pty outside a sandbox that owns its
// tree) and its cgroup, then gives the pipes a moment to deliver what is
// buffered before cutting them. It returns cmd.Wait's error. The caller
// untracks the command.
func (r *launched) finish() error {
	cmd := r.c.cmd
	// Wait for the exit without reaping first: until the wait that reaps
	// it, the pid (and its group) cannot be another process's, so Signal
	// may still reach the command while it runs. Marking it reaped before
	// a Wait that blocks for the command's whole life would refuse every
	// signal to a running pty command (SSH's signal request).
	waitExited(cmd.Process.Pid)
	r.reaping()
	werr := cmd.Wait()
	if r.timer != nil {
		r.timer.Stop()
	}
	r.stopCtx()
	r.killLeftovers()
	r.c.ended()
	r.exited.Store(true)
	deadline := time.Now().Add(ioGrace)
	for _, rd := range r.readers {
		_ = rd.SetReadDeadline(deadline)
	}
	r.copies.Wait()
	for _, rd := range r.readers {
		rd.Close()
	}
	return werr
}

// waitExited blocks until pid has exited, leaving it to be reaped
// (WNOWAIT). An error (the process is not our child any more) returns at
// once: cmd.Wait then says what happened.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

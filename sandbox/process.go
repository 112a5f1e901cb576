//go:build linux

package sandbox

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// Start runs req with streaming stdio (SSH exec and shells). An empty
// Command starts the shell itself: interactive (-i) with a Pty, reading
// commands from stdin without one; the policy cannot judge what will be
// typed, so software mode refuses that and bwrap (or none) mode is needed.
// Start applies req.Timeout only when set: shells have no default timeout.
// The process is tracked until Wait returns; Close kills it.
func (e *executor) Start(ctx context.Context, req Request, stdio Stdio) (Process, error) {
	if req.Overlay != nil {
		return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: "exec", Command: req.Command, Msg: "an overlay (transaction) runs with Run only"}
	}
	sp, err := stdinPipe(req, stdio)
	if err != nil {
		return nil, err
	}
	op, err := stdoutPipe(req, stdio)
	if err != nil {
		return nil, err
	}
	wd, parsed, err := e.prepare(&req, true)
	if err != nil {
		return nil, withCommand(err, req.Command)
	}
	defer wd.close()
	term := ""
	if req.Pty != nil {
		if term = req.Pty.Term; term == "" {
			term = "xterm"
		}
	}
	env, err := e.env(wd.dir, req.Env, term)
	if err != nil {
		return nil, withCommand(err, req.Command)
	}
	if _, set := req.Env["HISTFILE"]; req.Command == "" && !set {
		// HOME is the workspace: an interactive bash would save its
		// history there, as .bash_history, at exit. An empty HISTFILE
		// keeps it in memory.
		env = append(env, "HISTFILE=")
	}
	if err := e.acquire(req.Command); err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			e.release() // Wait releases it once the process started
		}
	}()
	cmd, direct := e.command(req.Command, parsed, wd, env, req.Pty != nil)
	p := &process{launched: launched{c: &child{cmd: cmd, ownsTree: e.iso.ownsTree(), session: req.Pty != nil}}, e: e}
	if stdio.Stdout == nil {
		stdio.Stdout = io.Discard
	}
	if stdio.Stderr == nil {
		stdio.Stderr = io.Discard
	}

	// Files handed to the child; closed in the parent once it started.
	var childEnds []*os.File
	var raw []int        // our read ends of the pipes, for collect
	var stdoutR *os.File // a StdoutPipe's read end (stdoutpipe.go)
	closeRaw := func() {
		for _, fd := range raw {
			unix.Close(fd)
		}
	}
	closeAll := func(fs ...*os.File) {
		for _, f := range fs {
			if f != nil {
				f.Close()
			}
		}
	}
	if req.Pty != nil {
		ptmx, tty, err := pty.Open()
		if err != nil {
			return nil, execError(req.Command, err)
		}
		p.ptmx = ptmx
		if err := p.Resize(req.Pty.Cols, req.Pty.Rows); err != nil {
			closeAll(ptmx, tty)
			return nil, execError(req.Command, err)
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		cmd.SysProcAttr.Setsid = true
		cmd.SysProcAttr.Setctty = true
		cmd.SysProcAttr.Ctty = 0 // the child's fd 0
		childEnds = append(childEnds, tty)
		p.readers = append(p.readers, ptmx)
	} else {
		// Our read ends stay bare descriptors: collect polls them.
		outR, outW, err := rawPipe()
		if err != nil {
			return nil, execError(req.Command, err)
		}
		errR, errW, err := rawPipe()
		if err != nil {
			unix.Close(outR)
			closeAll(outW)
			return nil, execError(req.Command, err)
		}
		cmd.Stdout, cmd.Stderr = outW, errW
		childEnds = append(childEnds, outW, errW)
		raw = []int{outR, errR}
		if op != nil {
			// The caller reads stdout itself; collect copies stderr.
			stdoutR, raw = stdoutFile(outR), raw[1:]
		}
		if stdio.Stdin != nil {
			inW, inR, err := pipe(false)
			if err != nil {
				closeRaw()
				closeAll(outW, errW, stdoutR)
				return nil, execError(req.Command, err)
			}
			cmd.Stdin = inR
			childEnds = append(childEnds, inR)
			p.stdin = inW
		} else {
			cmd.Stdin = e.devNull
		}
	}

	outs := []io.Writer{stdio.Stdout, stdio.Stderr}
	if stdoutR != nil {
		outs = outs[1:] // as raw
	}
	if err := e.launch(ctx, &p.launched, launchSpec{direct: direct, script: req.Command, wd: wd, env: env, pty: req.Pty != nil,
		childEnds: childEnds, outs: outs, timeout: req.Timeout}); err != nil {
		closeAll(p.stdin, stdoutR)
		closeRaw()
		return nil, err
	}
	if raw != nil {
		// One goroutine waits for the process and copies both streams
		// (collect.go), where two pumps and Wait's own wait would each
		// be woken when it ends. A write that blocks (an SSH client that
		// does not read) holds up the other stream until it goes on, as
		// the client's window allows; nothing is lost.
		p.collected = make(chan error, 1)
		go func() { p.collected <- p.collect(raw, outs) }()
	}
	if req.Pty != nil {
		if stdio.Stdin != nil {
			go copyIn(p.ptmx, stdio.Stdin, nil)
		}
	} else if sp != nil {
		sp.f = p.stdin // the caller writes to the pipe itself (stdinpipe.go)
	} else if p.stdin != nil {
		go copyIn(p.stdin, stdio.Stdin, p)
	}
	if op != nil {
		op.f = stdoutR // the caller reads the pipe itself (stdoutpipe.go)
	}
	started = true
	return p, nil
}

func withCommand(err error, command string) error {
	if ee, ok := errorsAs(err); ok && ee.Command == "" && ee.Code != errcode.EmptyCommand {
		ee.Command = command
	}
	return err
}

// process is a started command.
type process struct {
	launched
	e    *executor
	ptmx *os.File // the pty master, nil for pipes (also launched's one reader)

	inMu   sync.Mutex
	stdin  *os.File // write end of the stdin pipe; nil once closed
	eofIn  bool     // CloseStdin was called on a pty
	once   sync.Once
	status ExitStatus
	err    error

	collected chan error // with pipes: collect's result, once the process ended and its output was copied
}

// copyIn feeds stdin until the reader ends or the child stops reading; with
// pipes the write end is then closed so the child sees EOF.
func copyIn(w io.Writer, r io.Reader, p *process) {
	bp := copyBufs.Get().(*[]byte)
	_, _ = io.CopyBuffer(w, struct{ io.Reader }{r}, *bp)
	copyBufs.Put(bp)
	if p != nil {
		_ = p.CloseStdin()
	}
}

// Wait waits for the shell to exit, ends what it left behind in its process
// group (or session, for a pty), and waits for the output to be copied out.
func (p *process) Wait() (ExitStatus, error) {
	p.once.Do(func() {
		var werr error
		if p.collected != nil {
			werr = <-p.collected
		} else {
			werr = p.finish() // a pty: its master has a pump
		}
		cmd := p.c.cmd
		p.inMu.Lock()
		p.eofIn = true
		if p.stdin != nil {
			p.stdin.Close()
			p.stdin = nil
		}
		p.inMu.Unlock()
		p.e.untrack(p.c)
		p.e.release()
		p.status.Code, p.status.Signal = p.e.exitStatus(cmd.ProcessState)
		p.status.TimedOut = p.c.timedOut.Load()
		if werr != nil && cmd.ProcessState == nil {
			p.err = execError("", werr)
		}
	})
	return p.status, p.err
}

// Signal delivers a signal the way a terminal would: to the foreground
// process group of a pty, to the process group of a piped command, and under
// bwrap (where bwrap does not forward signals) to every process inside (on
// a pty, those of the foreground group). A foreground group that has ended
// is not signalled, since its number may be another's by now: the command
// is.
func (p *process) Signal(name string) error {
	sig, ok := ParseSignal(name)
	if !ok {
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "signal", Msg: "unknown signal " + name}
	}
	p.sigMu.Lock()
	defer p.sigMu.Unlock()
	if p.reaped {
		// It has exited and is (being) waited for: its pid may name
		// another process by now.
		return syscall.ESRCH
	}
	pid := p.c.cmd.Process.Pid
	group := 0 // under bwrap on a pty: signal only the processes inside in this group
	if p.ptmx != nil {
		var pgrp int
		var ierr error
		if sc, err := p.ptmx.SyscallConn(); err == nil {
			_ = sc.Control(func(fd uintptr) { pgrp, ierr = unix.IoctlGetInt(int(fd), unix.TIOCGPGRP) })
		}
		switch {
		case ierr != nil || pgrp <= 0:
		case p.c.ownsTree && pgrp == pid:
			// Under bwrap the pty's foreground group is bwrap's own (it
			// leads the session) until a shell inside makes one of its
			// own for a job. bwrap, outside the sandbox, has no handler:
			// the signal would end it, and the sandbox with it (SIGKILL
			// for everything, --die-with-parent), before the command
			// could act on it (a trap, Python's KeyboardInterrupt). The
			// processes inside in that group get it instead.
			group = pgrp
		case !groupInSession(pgrp, pid):
			// The foreground group is gone: the terminal keeps its
			// number, which the kernel may since have given to another
			// process group, anyone's (the command can get there by
			// forking through the pid space). The command itself gets
			// the signal instead (below).
		default:
			return syscall.Kill(-pgrp, sig)
		}
	}
	if p.c.ownsTree {
		ds, started := bwrapTree(pid)
		if !started {
			return &errcode.Error{Code: errcode.ExecError, Op: "signal",
				Msg: "the command has not started inside the sandbox (bwrap is still setting it up); nothing was signalled"}
		}
		if group != 0 {
			ds = inGroup(ds, group)
		}
		// Killing one may end others first (the sandbox's pid 1 takes its
		// namespace with it): a process already gone is not a failure.
		var last error
		for _, d := range ds {
			if err := syscall.Kill(d, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
				last = err
			}
		}
		return last
	}
	if p.ptmx != nil {
		return syscall.Kill(pid, sig)
	}
	return syscall.Kill(-pid, sig)
}

// bwrapStartWait bounds how long Signal waits for a command that bwrap
// is still setting up.
const bwrapStartWait = 5 * time.Second

// bwrapTree returns the processes below bwrap (pid) once the command runs
// there. bwrap runs it below a pid 1 of its own in the sandbox's pid
// namespace, which takes no signal from outside that it has no handler for
// and forwards none, so a signal sent just after Start, before the command
// is there, would reach nobody: bwrapTree waits (at most bwrapStartWait)
// until its pid 1 has a child, or bwrap has ended. started is false when
// neither happened in time.
func bwrapTree(pid int) (ds []int, started bool) {
	deadline := time.Now().Add(bwrapStartWait)
	for {
		ps := scanProc()
		ds = descendants(ps, pid)
		if len(ds) >= 2 || !liveIn(ps, pid) {
			return ds, true
		}
		if time.Now().After(deadline) {
			return ds, false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// groupInSession reports whether a live process of process group pgid is
// in the session sid: the terminal's foreground group is always in its
// session (tcsetpgrp admits no other), so one that is not there is gone.
// What is left is the microseconds between this look and the kill, in
// which the group would have to end and its number go to another.
func groupInSession(pgid, sid int) bool {
	for _, e := range scanProc() {
		if e.pgid == pgid && e.sid == sid && e.state != 'Z' {
			return true
		}
	}
	return false
}

// inGroup returns the pids of ds in process group pgid.
func inGroup(ds []int, pgid int) []int {
	in := make(map[int]bool, len(ds))
	for _, d := range ds {
		in[d] = true
	}
	var out []int
	for _, e := range scanProc() {
		if in[e.pid] && e.pgid == pgid {
			out = append(out, e.pid)
		}
	}
	return out
}

// liveIn reports whether pid is in ps and not a zombie.
func liveIn(ps []procEntry, pid int) bool {
	for _, e := range ps {
		if e.pid == pid {
			return e.state != 'Z'
		}
	}
	return false
}

// Pid is the started process's id on the host (under bwrap, bwrap's), for
// reports such as /health; signal it only through Signal, which knows the
// tree.
func (p *process) Pid() int { return p.c.cmd.Process.Pid }

// Resize sets the pty window size; without a pty it does nothing.
func (p *process) Resize(cols, rows uint16) error {
	if p.ptmx == nil {
		return nil
	}
	sc, err := p.ptmx.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := sc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	}); err != nil {
		return err
	}
	return ierr
}

// CloseStdin signals end of input: the pipe is closed, or on a pty the EOF
// character (^D) is sent once, as a terminal would.
func (p *process) CloseStdin() error {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if p.ptmx != nil {
		if p.eofIn {
			return nil
		}
		p.eofIn = true
		if _, err := p.ptmx.Write([]byte{4}); err != nil && !errors.Is(err, os.ErrClosed) {
			return err
		}
		return nil
	}
	if p.stdin == nil {
		return nil
	}
	err := p.stdin.Close()
	p.stdin = nil
	return err
}

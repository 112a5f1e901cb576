//go:build linux

package sandbox

import (
	"bytes"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Without a cgroup per command (cgroup.go), a process that leaves its
// command's process group (setsid) and whose parent exits would be
// re-parented to init, out of reach of the /proc walk that kills a
// command's tree. As the fallback, the daemon makes itself a child
// subreaper (PR_SET_CHILD_SUBREAPER): such orphans are re-parented to the
// daemon instead. Every child of the daemon that is not the main process
// of a running command is therefore an escaped process; when any command
// ends (or is killed) those and their descendants are stopped and killed,
// and their zombies are reaped on SIGCHLD.
//
// The reaper must never take the exit status of a command's main process,
// which os/exec waits for: main processes are registered while the
// reaper's lock is held across their start, and unregistered once waited
// for, and only children that are not registered are reaped.

// reaper is the process-wide subreaper state; users counts the executors
// that rely on it, and its goroutine runs while there is one.
var reaper = struct {
	sync.Mutex
	users int
	set   bool         // PR_SET_CHILD_SUBREAPER done
	live  map[int]bool // main processes of commands, not yet waited for
	stop  chan struct{}
	done  chan struct{}
}{live: map[int]bool{}}

// useReaper makes the daemon a subreaper and starts reaping, for one
// executor; it returns an error when the kernel refuses.
func useReaper() error {
	reaper.Lock()
	defer reaper.Unlock()
	if !reaper.set {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return err
		}
		reaper.set = true
	}
	reaper.users++
	if reaper.users == 1 {
		reaper.stop, reaper.done = make(chan struct{}), make(chan struct{})
		go reapLoop(reaper.stop, reaper.done)
	}
	return nil
}

// releaseReaper undoes useReaper for one executor. The daemon stays a
// subreaper (an orphan adopted later is still better off with us than with
// init), but with no executor left nobody reaps; the last one out sweeps.
func releaseReaper() {
	reaper.Lock()
	reaper.users--
	last := reaper.users == 0
	stop, done := reaper.stop, reaper.done
	reaper.Unlock()
	if last {
		sweepOrphans()
		close(stop)
		<-done
	}
}

func reapLoop(stop, done chan struct{}) {
	defer close(done)
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGCHLD)
	defer signal.Stop(sigc)
	for {
		select {
		case <-stop:
			reapOrphans()
			return
		case <-sigc:
			reapOrphans()
		}
	}
}

// startRegistered runs start (which forks a command's main process) with
// the reaper's lock held, and registers the process it started, so that
// the reaper never sees it unregistered.
func startRegistered(start func() (pid int, err error)) error {
	reaper.Lock()
	defer reaper.Unlock()
	pid, err := start()
	if err == nil {
		reaper.live[pid] = true
	}
	return err
}

// waited unregisters a main process once os/exec has waited for it.
func waited(pid int) {
	reaper.Lock()
	delete(reaper.live, pid)
	reaper.Unlock()
}

// orphans are the children of the daemon that are not main processes of
// running commands (reaper's lock held).
func orphans(ps []procEntry, self int) []int {
	var out []int
	for _, p := range ps {
		if p.ppid == self && !reaper.live[p.pid] {
			out = append(out, p.pid)
		}
	}
	return out
}

// reapOrphans collects the exit status of every orphan that has exited.
func reapOrphans() {
	reaper.Lock()
	defer reaper.Unlock()
	kids, ok := children()
	if !ok {
		self := os.Getpid()
		for _, p := range scanProc() {
			if p.ppid == self {
				kids = append(kids, p.pid)
			}
		}
	}
	for _, pid := range kids {
		if reaper.live[pid] || !zombie(pid) {
			continue
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// children lists the daemon's children from /proc/self/task/*/children
// (an adopted orphan is listed under one of the daemon's threads); ok is
// false when that cannot be read (a kernel without CONFIG_PROC_CHILDREN).
func children() (pids []int, ok bool) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, false
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			if os.IsNotExist(err) {
				if _, serr := os.Stat("/proc/self/task/" + t.Name()); serr == nil {
					return nil, false // the file is missing, not the thread
				}
				continue // the thread ended
			}
			return nil, false
		}
		for f := range strings.FieldsSeq(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids, true
}

// sweepOrphans stops and kills every orphan and its descendants: processes
// that escaped the command they belonged to.
func sweepOrphans() {
	reaper.Lock()
	self := os.Getpid()
	seen := stopTrees(func(ps []procEntry) []int { return orphans(ps, self) })
	reaper.Unlock()
	for p := range seen {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	if len(seen) > 0 {
		reapOrphans()
	}
}

// hasOrphans tells cheaply whether the daemon has a child that is not a
// registered main process; when it cannot tell, it says yes and the caller
// does the full sweep.
func hasOrphans() bool {
	reaper.Lock()
	defer reaper.Unlock()
	kids, ok := children()
	if !ok {
		return true
	}
	for _, pid := range kids {
		if !reaper.live[pid] {
			return true
		}
	}
	return false
}

// ended is called once a command's main process was waited for: its
// cgroup is killed and removed, or, without one, it is unregistered from
// the reaper and any orphan is swept.
func (c *child) ended() {
	if c.cg != nil {
		c.cg.drop()
	}
	if c.registered {
		waited(c.cmd.Process.Pid)
		if hasOrphans() {
			sweepOrphans()
		}
	}
}

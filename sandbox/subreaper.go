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
// which os/exec waits for, nor take any other child of the daemon for an
// escaped process: the main process of every command of every executor
// (with a cgroup or without, whichever isolation mode) and every other
// child the daemon starts (StartOutside: the browser) is registered from
// its start until it was waited for, and only children that are not
// registered are reaped or swept. A daemon can hold executors of both
// kinds at once (one without a cgroup runs the reaper for the whole
// process), so registering only the reaper's own executor's commands would
// let it reap or kill the others'. Starts hold startMu shared, so they run
// in parallel with each other; the reaper and the sweep hold it exclusive,
// so they never see a child between its fork and its registration.

// reaper is the process-wide subreaper state; users counts the executors
// that rely on it, and its goroutine runs while there is one.
var reaper = struct {
	sync.Mutex
	startMu sync.RWMutex // shared by starts, exclusive for reaping and sweeping
	users   int
	set     bool         // PR_SET_CHILD_SUBREAPER done
	live    map[int]bool // registered children (commands' main processes, StartOutside's), not yet waited for
	stop    chan struct{}
	done    chan struct{}
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

// startRegistered runs start (which forks a child of the daemon) with
// startMu held shared, and registers the process it started before the
// reaper can look, so that the reaper never sees it unregistered.
func startRegistered(start func() (pid int, err error)) error {
	reaper.startMu.RLock()
	defer reaper.startMu.RUnlock()
	pid, err := start()
	if err == nil {
		reaper.Lock()
		reaper.live[pid] = true
		reaper.Unlock()
	}
	return err
}

// StartOutside runs start, which starts a child of the daemon that is not
// a command (the browser), so that the subreaper of an executor without a
// cgroup never reaps it or kills it as a process escaped from a command:
// no reap or sweep runs while start does, and the pid start returns stays
// registered until forget is called, once the process was waited for.
// start should return as soon as the pid is known: with an executor
// without a cgroup, a reap waiting for it also holds back new command
// starts (the browser's start, about half a second, is the longest).
func StartOutside(start func() (pid int, err error)) (forget func(), err error) {
	var pid int
	err = startRegistered(func() (int, error) {
		var err error
		pid, err = start()
		return pid, err
	})
	if err != nil {
		return func() {}, err
	}
	var once sync.Once
	return func() { once.Do(func() { waited(pid) }) }, nil
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
	reaper.startMu.Lock()
	defer reaper.startMu.Unlock()
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
	reaper.startMu.Lock()
	reaper.Lock()
	self := os.Getpid()
	seen := stopTrees(func(ps []procEntry) []int { return orphans(ps, self) })
	reaper.Unlock()
	reaper.startMu.Unlock()
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
	reaper.startMu.Lock()
	defer reaper.startMu.Unlock()
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
// cgroup is killed and removed, it is unregistered from the reaper, and
// an executor without a cgroup (the reaper's) sweeps any orphan.
func (c *child) ended() {
	if c.cg != nil {
		c.cg.drop()
	}
	if c.registered {
		waited(c.cmd.Process.Pid)
	}
	if c.sweeps && hasOrphans() {
		sweepOrphans()
	}
}

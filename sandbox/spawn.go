//go:build linux

package sandbox

import (
	"os/exec"
	"runtime"
)

// spawner starts every command from one OS thread that lives as long as
// the executor. Linux delivers a parent-death signal (bwrap's
// --die-with-parent, our Pdeathsig) when the forking *thread* exits, not
// the process, and a Go thread exits whenever a goroutine that locked it
// ends (go.dev/issue/27505). Forking from a goroutine locked to its own
// thread for the executor's lifetime makes "parent" mean the daemon.
type spawner struct {
	reqs chan spawnReq
	done chan struct{}
	// cg, when set (by cgroup.start, which holds the cgroups' enterMu
	// around every start while it is set), is a v1 cgroup the thread
	// enters for each fork and leaves after it.
	cg *cgroup
}

type spawnReq struct {
	cmd *exec.Cmd
	fn  func() error // instead of cmd: runs on the thread (onThread)
	err chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *spawner) loop() {
	// Never unlocked: when the loop ends (Close), the goroutine exits while
	// locked and Go ends the thread, which kills whatever is left.
	runtime.LockOSThread()
	defer close(s.done)
	for r := range s.reqs {
		if r.fn != nil {
			r.err <- r.fn()
			continue
		}
		if s.cg == nil {
			r.err <- r.cmd.Start()
			continue
		}
		r.err <- s.cg.startOnThread(r.cmd)
	}
}

// start runs cmd.Start on the spawner's thread.
func (s *spawner) start(cmd *exec.Cmd) error {
	r := spawnReq{cmd: cmd, err: make(chan error, 1)}
	s.reqs <- r
	return <-r.err
}

// onThread runs fn on the spawner's thread: what it sets there (the
// seccomp filter of software mode) every later command inherits.
func (s *spawner) onThread(fn func() error) error {
	r := spawnReq{fn: fn, err: make(chan error, 1)}
	s.reqs <- r
	return <-r.err
}

// stop ends the spawner once no start is in flight.
func (s *spawner) stop() {
	close(s.reqs)
	<-s.done
}

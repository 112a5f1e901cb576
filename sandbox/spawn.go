//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// A spawner starts commands from OS threads that live as long as the
// spawner. Linux delivers a parent-death signal (bwrap's --die-with-parent,
// our Pdeathsig) when the forking *thread* exits, not the process, and a Go
// thread exits whenever a goroutine that locked it ends
// (go.dev/issue/27505). Forking from goroutines locked to their threads
// until the spawner stops makes "parent" mean the daemon.
//
// os/exec.(*Cmd).Start returns only once the child has exec'ed, so one
// thread starts one command at a time (≈ 0.3 ms each: the plateau of
// docs/performance.md). An executor's spawner is a pool of up to
// spawnerThreads threads: it starts with one, and adds one when a start
// finds every thread busy, up to the cap; past it, starts queue for the
// first thread that frees. A thread, once started, serves until stop: its
// children may outlive any one start. The in-place overlay's spawner
// (newSpawner) is a single thread, the one in the private mount namespace.
type spawner struct {
	p *spawnPool
	// cg, when set (cgroup.start's view of the spawner, via in), is the v1
	// cgroup the thread that takes the start enters for the fork and
	// leaves after it.
	cg *cgroup
}

// spawnPool is the threads behind a spawner and its views.
type spawnPool struct {
	reqs chan spawnReq // unbuffered: taken by a free thread

	one bool // newSpawner's: never more than its one thread (onThread)

	mu      sync.Mutex
	max     int            // the cap on threads
	threads int            // threads started (never fewer while the pool runs)
	free    int            // threads not serving a start, less the starts waiting for one
	every   []func() error // run by each thread before its first start (onEveryThread)
	done    sync.WaitGroup // the threads' loops, awaited by stop
}

type spawnReq struct {
	cmd *exec.Cmd
	cg  *cgroup      // v1: the cgroup to fork in (enterAndStart, then leave)
	fn  func() error // instead of cmd: runs on the thread (onThread)
	err chan error
}

// maxSpawnerThreads caps an executor's spawner threads: each is an OS
// thread the daemon holds for good once a burst made it, and the kernel
// serializes part of every fork and exec (the mm copy, the v1 cgroup
// attach) whatever the threads. Where more stop paying on many cores is
// to be measured there (docs/performance.md, the spawner plateau).
const maxSpawnerThreads = 8

// spawnerThreads is the cap of an executor's spawner: one thread per
// GOMAXPROCS, at most maxSpawnerThreads.
func spawnerThreads() int {
	return max(1, min(runtime.GOMAXPROCS(0), maxSpawnerThreads))
}

// newSpawner is a spawner of exactly one thread (what onThread sets up
// there, every command it starts inherits).
func newSpawner() *spawner {
	s := newSpawnerPool(1)
	s.p.one = true
	return s
}

// newSpawnerPool is a spawner of up to max threads; the first is started
// now, the others when starts find every thread busy.
func newSpawnerPool(max int) *spawner {
	p := &spawnPool{reqs: make(chan spawnReq), max: max, threads: 1, free: 1}
	ready := make(chan error, 1)
	p.done.Add(1)
	go p.loop(nil, ready)
	<-ready
	return &spawner{p: p}
}

// loop is one thread of the pool: it runs every (the onEveryThread
// functions registered so far), reports on ready, and if they all
// succeeded, serves starts until stop.
func (p *spawnPool) loop(every []func() error, ready chan<- error) {
	p.loopOn(every, ready, nil)
}

// loopOn is loop; moved, when set, is closed once the loop has a thread
// of its own that is not the process's main thread.
func (p *spawnPool) loopOn(every []func() error, ready chan<- error, moved chan<- struct{}) {
	// Never unlocked: when the loop ends (stop, or a failed setup), the
	// goroutine exits while locked and Go ends the thread, which sends
	// the parent-death signal to whatever it forked that is left.
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// The main thread, which Go never ends (runtime.mexit wedges it
		// instead): it would keep the seccomp filter or the mount
		// namespace set up here, and its children would get no
		// parent-death signal at stop. The loop starts again on a
		// goroutine of its own while this one holds the main thread, so
		// that one cannot be scheduled here; then this one leaves it as
		// it found it.
		next := make(chan struct{})
		go p.loopOn(every, ready, next)
		<-next
		runtime.UnlockOSThread()
		return
	}
	if moved != nil {
		close(moved)
	}
	defer p.done.Done()
	for _, fn := range every {
		if err := fn(); err != nil {
			ready <- err
			return
		}
	}
	ready <- nil
	for r := range p.reqs {
		var err error
		switch {
		case r.fn != nil:
			err = r.fn()
		case r.cg != nil:
			// The caller hears back as soon as the child is forked
			// inside r.cg; the thread's way back to the daemon's cgroup
			// (a write to tasks, ≈ 30 µs) is then off the command's
			// path, and done before this thread takes another start.
			err = r.cg.enterAndStart(r.cmd)
			r.err <- err
			r.cg.leave()
			p.mu.Lock()
			p.free++
			p.mu.Unlock()
			continue
		default:
			err = r.cmd.Start()
		}
		// Free before the caller hears back: a caller that starts again
		// at once finds this thread free and does not grow the pool.
		p.mu.Lock()
		p.free++
		p.mu.Unlock()
		r.err <- err
	}
}

// take claims a thread for one request: a free one, else a new one when
// the pool is under its cap, else the caller waits in the send for the
// first thread that frees (free goes below zero by the waiting starts).
func (p *spawnPool) take() {
	p.mu.Lock()
	p.free--
	if p.free >= 0 || p.threads >= p.max {
		p.mu.Unlock()
		return
	}
	p.threads++
	p.free++ // the new thread, claimed by this request
	every := p.every
	p.mu.Unlock()
	ready := make(chan error, 1)
	p.done.Add(1)
	go p.loop(every, ready)
	if err := <-ready; err != nil {
		// The thread could not be set up as the others are (the seccomp
		// filter of software mode): it ended without forking anything.
		// The pool keeps the threads it has and grows no more.
		p.mu.Lock()
		p.threads--
		p.free--
		p.max = p.threads
		p.mu.Unlock()
	}
}

// do runs r on a thread of the pool.
func (p *spawnPool) do(r spawnReq) error {
	r.err = make(chan error, 1)
	p.take()
	p.reqs <- r
	return <-r.err
}

// start runs cmd.Start on a thread of the spawner (under v1, inside the
// view's cgroup).
func (s *spawner) start(cmd *exec.Cmd) error {
	return s.p.do(spawnReq{cmd: cmd, cg: s.cg})
}

// in is the view of s whose starts fork inside the v1 cgroup c: the thread
// that takes a start moves into c for the fork and back after it.
func (s *spawner) in(c *cgroup) *spawner { return &spawner{p: s.p, cg: c} }

// onThread runs fn on the thread of a one-thread spawner (newSpawner): what
// it sets there (a mount namespace) every later command inherits.
func (s *spawner) onThread(fn func() error) error {
	if !s.p.one {
		return errors.New("sandbox: onThread on a spawner of several threads (onEveryThread sets up every thread)")
	}
	return s.p.do(spawnReq{fn: fn})
}

// onEveryThread runs fn on every thread of the spawner, now and on each
// thread it starts later, before that thread forks anything: what fn sets
// there (the seccomp filter of software mode, the Landlock domain that
// scopes abstract unix sockets in bwrap mode) every command inherits. It
// is called before the spawner's first concurrent starts, while it has the
// one thread newSpawnerPool made. On an error, fn is dropped again: the
// pool goes on without it.
func (s *spawner) onEveryThread(fn func() error) error {
	p := s.p
	p.mu.Lock()
	if p.threads != 1 {
		n := p.threads
		p.mu.Unlock()
		return fmt.Errorf("sandbox: the spawner has %d threads already; what every thread must have is set up while it has one", n)
	}
	// Registered first: a thread the pool adds from here on runs fn
	// itself, so none can start without it.
	p.every = append(p.every, fn)
	p.mu.Unlock()
	err := p.do(spawnReq{fn: fn})
	if err != nil {
		p.mu.Lock()
		p.every = p.every[:len(p.every)-1]
		p.mu.Unlock()
	}
	return err
}

// threadCount is how many threads the spawner has started.
func (s *spawner) threadCount() int {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	return s.p.threads
}

// stop ends the spawner's threads once no start is in flight.
func (s *spawner) stop() {
	close(s.p.reqs)
	s.p.done.Wait()
}

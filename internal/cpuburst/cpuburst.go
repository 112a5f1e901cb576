// Package cpuburst lends short work that is mostly system calls the CPUs
// the daemon holds back from its own Go code.
//
// `--max-procs auto` runs the daemon's goroutines on half the CPUs the
// process may use (config.Config.Procs: request and response work gains
// nothing from more, and the rest is for the commands the daemon runs). A
// checkpoint's walk of the workspace is a different kind of work: tens of
// thousands of fstatat calls, each a few microseconds of kernel time, too
// short for the runtime to hand a P stuck in one to another thread. With
// one P those calls run one at a time on one thread whatever the machine;
// with more they run side by side. Hold raises GOMAXPROCS to the ceiling
// set at start for as long as such work runs, and the last release puts it
// back.
//
// GOMAXPROCS belongs to the whole process, so the state here does too:
// cmd/agent-backend sets the ceiling once, after choosing GOMAXPROCS, and
// only where it chose by "auto" (an operator's number, or GOMAXPROCS in
// the environment, is a bound that no burst goes past). Without a ceiling,
// Hold does nothing.
package cpuburst

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// burst is the process's state, a type so tests can run one with a fake
// GOMAXPROCS.
type burst struct {
	set func(int) int // runtime.GOMAXPROCS

	mu      sync.Mutex
	ceiling int // 0: bursts do nothing
	held    int // holds not yet released
	base    int // GOMAXPROCS before the first hold raised it; 0 when not raised
	// raised counts the holds that raised GOMAXPROCS; an atomic, so that
	// /metrics never waits on mu behind a hold waiting for a collection.
	raised atomic.Uint64
}

var process = &burst{set: runtime.GOMAXPROCS}

// SetCeiling sets how many Ps a burst runs the process on: the CPUs the
// process may use (Go's default GOMAXPROCS, cgroup limits included). A
// value at or below GOMAXPROCS when a hold begins makes that hold do
// nothing; 0 turns bursts off. Call it before any Hold.
func SetCeiling(n int) { process.setCeiling(n) }

// Ceiling is the value SetCeiling set (0: none), for the start-up log.
func Ceiling() int {
	process.mu.Lock()
	defer process.mu.Unlock()
	return process.ceiling
}

// Raised is how many times a hold raised GOMAXPROCS since the process
// started (overlapping holds raise it once), for /metrics.
func Raised() uint64 { return process.raised.Load() }

// Hold raises GOMAXPROCS to the ceiling until release is called; holds may
// overlap, and the last release restores the value before the first. Each
// change stops the world for as long as the runtime takes to resize its
// Ps (microseconds), so Hold is for work that lasts milliseconds, not for
// each request; first it waits for a garbage collection under way to end
// (runtime.GOMAXPROCS takes the collector's semaphore), with the state's
// mutex held, so overlapping holds and releases wait with it. Nothing
// that holds the mutex waits on anything else: no lock is taken under it
// but the runtime's, and the collector finishes without it. release may
// be called more than once.
func Hold() (release func()) { return process.hold() }

func (b *burst) setCeiling(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ceiling = max(0, n)
}

func (b *burst) hold() (release func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held++
	if b.held == 1 && b.ceiling > 0 {
		if cur := b.set(0); b.ceiling > cur {
			b.set(b.ceiling)
			b.base = cur
			b.raised.Add(1)
		}
	}
	var once sync.Once
	return func() { once.Do(b.release) }
}

func (b *burst) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held--
	if b.held == 0 && b.base > 0 {
		b.set(b.base)
		b.base = 0
	}
}

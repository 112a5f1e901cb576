// Package tick runs a function on a timer that re-arms itself after each
// run: the shape of a keepalive. Between runs nothing but a runtime timer
// exists (no goroutine parked on a channel), so a connection's keepalive
// costs no stack while the connection is idle.
package tick

import (
	"sync"
	"time"
)

// Every calls f every d, each time on the timer's own goroutine, until f
// returns false or stop is called; d must be positive. After stop returns,
// f is not started again (a run already under way finishes). stop may be
// called more than once.
func Every(d time.Duration, f func() bool) (stop func()) {
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	run := func() {
		if !f() {
			return
		}
		mu.Lock()
		if !stopped {
			t.Reset(d)
		}
		mu.Unlock()
	}
	mu.Lock()
	t = time.AfterFunc(d, run)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}

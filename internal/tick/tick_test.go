package tick

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestEveryRunsUntilFalse(t *testing.T) {
	var n atomic.Int32
	done := make(chan struct{})
	stop := Every(time.Millisecond, func() bool {
		if n.Add(1) == 3 {
			close(done)
			return false
		}
		return true
	})
	defer stop()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("f ran %d times in 10s, want 3", n.Load())
	}
	time.Sleep(20 * time.Millisecond)
	if got := n.Load(); got != 3 {
		t.Fatalf("f ran %d times after returning false, want it to stop at 3", got)
	}
}

func TestStopEndsTheRuns(t *testing.T) {
	var n atomic.Int32
	ran := make(chan struct{}, 1)
	stop := Every(time.Millisecond, func() bool {
		n.Add(1)
		select {
		case ran <- struct{}{}:
		default:
		}
		return true
	})
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("f never ran")
	}
	stop()
	stop() // idempotent
	// A run may have been under way when stop was called; after it, none.
	time.Sleep(5 * time.Millisecond)
	after := n.Load()
	time.Sleep(30 * time.Millisecond)
	if got := n.Load(); got != after {
		t.Fatalf("f ran %d more times after stop", got-after)
	}
}

package admit

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestInflightCountsAndSweeps drives the per-address counter directly from
// many goroutines: no address ever holds more than the limit, a request
// beyond it waits and gets the slot a release hands on (not a 429), one
// that waits past f.wait is refused, every slot comes back, and entries of
// addresses with nothing in flight are swept, so that many addresses one
// after another leave the map bounded.
func TestInflightCountsAndSweeps(t *testing.T) {
	const limit, workers, rounds = 3, 16, 200
	f := NewInflight(limit, 0)
	f.wait = time.Minute // a waiter always gets a slot handed on
	var peak [2]atomic.Int64
	var cur [2]atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := [2]string{"10.0.0.1:1", "[::1]:2"}[w%2]
			for range rounds {
				s, ok := f.Acquire(context.Background(), addr)
				if !ok {
					t.Error("refused within a one-minute wait")
					return
				}
				n := cur[w%2].Add(1)
				for p := peak[w%2].Load(); n > p && !peak[w%2].CompareAndSwap(p, n); p = peak[w%2].Load() {
				}
				cur[w%2].Add(-1)
				f.Release(s)
			}
		}()
	}
	wg.Wait()
	for i, addr := range []string{"10.0.0.1", "::1"} {
		if p := peak[i].Load(); p > limit || p == 0 {
			t.Errorf("%s: %d requests at once, want 1 to %d", addr, p, limit)
		}
		if n := f.Held(addr); n != 0 {
			t.Errorf("%s holds %d slots after every request ended", addr, n)
		}
	}

	// Full: one more waits f.wait and is refused; ctx ends a wait too.
	f.wait = 20 * time.Millisecond
	var held []Slot
	for range limit {
		s, ok := f.Acquire(context.Background(), "10.0.0.9:5")
		if !ok {
			t.Fatal("refused under the limit")
		}
		held = append(held, s)
	}
	if _, ok := f.Acquire(context.Background(), "10.0.0.9:6"); ok {
		t.Fatal("a slot beyond the limit")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.wait = time.Minute
	if _, ok := f.Acquire(ctx, "10.0.0.9:7"); ok {
		t.Fatal("a slot beyond the limit after ctx ended")
	}
	// A waiter gets the slot a release hands on.
	got := make(chan bool)
	go func() {
		s, ok := f.Acquire(context.Background(), "10.0.0.9:8")
		if ok {
			f.Release(s)
		}
		got <- ok
	}()
	for {
		v, _ := f.addrs.Load(netip.MustParseAddr("10.0.0.9"))
		if v.(*addrSlots).waiters.Load() == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	f.Release(held[0])
	if !<-got {
		t.Fatal("the waiter was refused although a slot was released")
	}
	for _, s := range held[1:] {
		f.Release(s)
	}
	if n := f.Held("10.0.0.9"); n != 0 {
		t.Fatalf("10.0.0.9 holds %d slots after every request ended", n)
	}

	// Many addresses one after another: the map stays bounded.
	for i := range 10 * inflightSweepMin {
		s, ok := f.Acquire(context.Background(), fmt.Sprintf("10.1.%d.%d:9", i/256, i%256))
		if !ok {
			t.Fatal("refused")
		}
		f.Release(s)
	}
	if n := f.entries.Load(); n > inflightSweepMin+1 {
		t.Errorf("%d entries after %d addresses one at a time, want at most %d", n, 10*inflightSweepMin, inflightSweepMin+1)
	}
	f.sweep()
	if n := f.entries.Load(); n != 0 {
		t.Errorf("%d entries after a sweep with nothing in flight", n)
	}
}

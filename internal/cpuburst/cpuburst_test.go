package cpuburst

import (
	"runtime"
	"sync"
	"testing"
)

// fakeProcs stands for runtime.GOMAXPROCS and records each change.
type fakeProcs struct {
	mu      sync.Mutex
	n       int
	changes []int
}

func (f *fakeProcs) set(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.n
	if n > 0 {
		f.n = n
		f.changes = append(f.changes, n)
	}
	return old
}

func TestHoldRaisesAndRestores(t *testing.T) {
	f := &fakeProcs{n: 1}
	b := &burst{set: f.set}
	b.setCeiling(4)
	release := b.hold()
	if f.n != 4 {
		t.Fatalf("GOMAXPROCS during a hold = %d, want the ceiling 4", f.n)
	}
	release()
	release() // a second call changes nothing
	if f.n != 1 {
		t.Fatalf("GOMAXPROCS after the release = %d, want 1 back", f.n)
	}
	if len(f.changes) != 2 {
		t.Fatalf("changes = %v, want one raise and one restore", f.changes)
	}
}

func TestOverlappingHoldsChangeOnce(t *testing.T) {
	f := &fakeProcs{n: 2}
	b := &burst{set: f.set}
	b.setCeiling(8)
	r1 := b.hold()
	r2 := b.hold()
	r1()
	if f.n != 8 {
		t.Fatalf("GOMAXPROCS with one hold left = %d, want 8", f.n)
	}
	r2()
	if f.n != 2 {
		t.Fatalf("GOMAXPROCS after the last release = %d, want 2", f.n)
	}
	if len(f.changes) != 2 || b.raised.Load() != 1 {
		t.Fatalf("changes = %v, raised %d times: want one raise and one restore for two overlapping holds", f.changes, b.raised.Load())
	}
	// A new hold after the last release raises again.
	b.hold()()
	if len(f.changes) != 4 || f.n != 2 || b.raised.Load() != 2 {
		t.Fatalf("changes = %v, GOMAXPROCS %d: a later hold must raise and restore again", f.changes, f.n)
	}
}

func TestNoCeilingOrLowCeilingDoesNothing(t *testing.T) {
	for _, c := range []struct {
		name         string
		ceiling, cur int
	}{
		{"no ceiling", 0, 1},
		{"negative ceiling", -3, 1},
		{"ceiling at GOMAXPROCS", 2, 2},
		{"ceiling below GOMAXPROCS (raised by the operator)", 2, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeProcs{n: c.cur}
			b := &burst{set: f.set}
			b.setCeiling(c.ceiling)
			r := b.hold()
			if f.n != c.cur {
				t.Fatalf("GOMAXPROCS during the hold = %d, want %d unchanged", f.n, c.cur)
			}
			r()
			if f.n != c.cur || len(f.changes) != 0 || b.raised.Load() != 0 {
				t.Fatalf("GOMAXPROCS %d, changes %v: want %d and none", f.n, f.changes, c.cur)
			}
		})
	}
}

func TestConcurrentHolds(t *testing.T) {
	f := &fakeProcs{n: 1}
	b := &burst{set: f.set}
	b.setCeiling(3)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			r := b.hold()
			f.mu.Lock()
			n := f.n
			f.mu.Unlock()
			if n != 3 {
				t.Errorf("GOMAXPROCS inside a hold = %d, want 3", n)
			}
			r()
		})
	}
	wg.Wait()
	if f.n != 1 {
		t.Fatalf("GOMAXPROCS after every release = %d, want 1", f.n)
	}
}

// TestProcessHold runs the real thing: the process's GOMAXPROCS is raised
// and restored.
func TestProcessHold(t *testing.T) {
	before := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(before)
	SetCeiling(2)
	defer SetCeiling(0)
	if Ceiling() != 2 {
		t.Fatalf("Ceiling() = %d after SetCeiling(2)", Ceiling())
	}
	raised := Raised()
	r := Hold()
	if Raised() != raised+1 {
		t.Errorf("Raised() = %d after a hold that raised, want %d", Raised(), raised+1)
	}
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("GOMAXPROCS during Hold = %d, want 2", got)
	}
	r()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS after release = %d, want 1", got)
	}
}

// BenchmarkHoldRelease is the price of one burst for a walk: GOMAXPROCS
// raised by one and put back, two stops of the world.
func BenchmarkHoldRelease(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	SetCeiling(procs + 1)
	defer SetCeiling(0)
	for b.Loop() {
		Hold()()
	}
	if got := runtime.GOMAXPROCS(0); got != procs {
		b.Fatalf("GOMAXPROCS after the loop = %d, want %d", got, procs)
	}
}

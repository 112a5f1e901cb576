package extensions

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"

	"go.starlark.net/starlark"
)

// DefaultMaxHeapBytes is Options.MaxHeapBytes when it is 0.
const DefaultMaxHeapBytes = 1 << 30

// heapTick is how often the watch samples the heap while threads run.
const heapTick = 10 * time.Millisecond

// heapWatch bounds the memory Starlark threads can take: the step limit
// does not (one step of "x" * n makes up to 1 GiB, and a loop appending
// small strings made 5 GB well within 100,000,000 steps), and the daemon's
// memory is shared by every call. While threads are registered it samples
// the Go heap every heapTick; past the limit it collects garbage (at most
// every 100 ms) to see what is really held, and if the heap (with the
// goroutines' stacks) is still past
// it, cancels every registered thread (they stop at their next step).
// Which thread allocated cannot be told, so all of them end, with an error
// that says why; the daemon goes on.
type heapWatch struct {
	limit uint64

	mu      sync.Mutex
	threads map[*starlark.Thread]struct{}
	stop    chan struct{} // closed when the last thread leaves; nil while no watch runs
	lastGC  time.Time
}

func newHeapWatch(limit int64) *heapWatch {
	if limit == 0 {
		limit = DefaultMaxHeapBytes
	}
	if limit < 0 {
		return nil
	}
	return &heapWatch{limit: uint64(limit), threads: map[*starlark.Thread]struct{}{}}
}

// watch registers th until the returned function is called.
func (w *heapWatch) watch(th *starlark.Thread) (unwatch func()) {
	if w == nil {
		return func() {}
	}
	w.mu.Lock()
	w.threads[th] = struct{}{}
	if w.stop == nil {
		w.stop = make(chan struct{})
		go w.run(w.stop)
	}
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.threads, th)
		if len(w.threads) == 0 && w.stop != nil {
			close(w.stop)
			w.stop = nil
		}
		w.mu.Unlock()
	}
}

func (w *heapWatch) run(stop chan struct{}) {
	tick := time.NewTicker(heapTick)
	defer tick.Stop()
	// Objects and goroutine stacks: a call recursing to Starlark's depth
	// bound (100,000 frames) holds about 256 MiB of stack.
	// The objects' bytes count garbage not yet collected, and the stacks'
	// count what the runtime keeps reserved for stacks, in use or not (a
	// goroutine that once recursed deep keeps most of its stack until
	// collections shrink it, half at a time): both only say when to look
	// closer.
	// The judgement is what the last collection found held: the live
	// objects and the stack it scanned, which is the part of each
	// goroutine's stack in use.
	const objects, live, stacks, scanned = 0, 1, 2, 3
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"}, {Name: "/gc/scan/stack:bytes"}}
	read := func(i int) uint64 {
		if sample[i].Value.Kind() == metrics.KindUint64 {
			return sample[i].Value.Uint64()
		}
		return 0
	}
	heap := func() uint64 {
		metrics.Read(sample)
		return read(objects) + read(stacks)
	}
	held := func() uint64 {
		metrics.Read(sample)
		return read(live) + read(scanned)
	}
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if heap() <= w.limit {
			continue
		}
		w.mu.Lock()
		collect := time.Since(w.lastGC) >= 100*time.Millisecond
		if collect {
			w.lastGC = time.Now()
		}
		w.mu.Unlock()
		if collect {
			runtime.GC() // garbage is not held: judge what is live
		}
		// Without a collection (one ran less than 100 ms ago), what it
		// found is still the judgement, never the garbage made since (a
		// daemon whose live heap is half the limit passes it with garbage
		// between two collections, and its calls would be cancelled for
		// nothing).
		h := held()
		if h <= w.limit {
			continue
		}
		reason := fmt.Sprintf("the daemon's heap and stacks hold %d MiB, past the %d MiB extension calls may run with (MaxHeapBytes)", h>>20, w.limit>>20)
		w.mu.Lock()
		for th := range w.threads {
			th.Cancel(reason)
		}
		w.mu.Unlock()
	}
}

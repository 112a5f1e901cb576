package extensions

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// heapSink keeps the garbage allocations of TestHeapWatchJudgesLiveNotGarbage
// from being optimized away.
var heapSink []byte

// TestHeapWatchJudgesLiveNotGarbage: between two of its collections (at
// most one every 100 ms) the watch judges what the last collection found
// live, not the garbage made since, so a daemon whose live heap is half
// the limit does not have its calls cancelled when garbage takes the heap
// past it; what is really live past the limit still cancels them.
func TestHeapWatchJudgesLiveNotGarbage(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection but the watch's and ours
	// The limit is 256 MiB over what the test binary holds already (the
	// package's other tests leave some of their own).
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(sample)
	const room = 256 << 20
	limit := int64(sample[0].Value.Uint64()+sample[1].Value.Uint64()) + room
	keep := make([]byte, room/2)
	runtime.GC() // what is live now: half the room under the limit

	w := newHeapWatch(limit)
	w.lastGC = time.Now() // as if the watch had just collected
	th := &starlark.Thread{Name: "probe"}
	unwatch := w.watch(th)
	defer unwatch()
	cancelled := func() bool {
		_, err := starlark.ExecFileOptions(&syntax.FileOptions{}, th, "probe.star", "x = 1\n", nil)
		return err != nil && strings.Contains(err.Error(), "cancelled")
	}
	for range room >> 20 { // garbage: the heap's objects pass the limit
		heapSink = make([]byte, 1<<20)
	}
	heapSink = nil
	time.Sleep(60 * time.Millisecond) // ticks of the watch within the 100 ms it does not collect
	if cancelled() {
		t.Fatal("the watch cancelled a call for garbage: the live heap was 128 MiB under its limit")
	}
	runtime.KeepAlive(keep)

	more := make([]byte, room) // now live past the limit
	for deadline := time.Now().Add(10 * time.Second); !cancelled(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) { // a hang guard
			t.Fatal("a live heap past the limit did not cancel the call")
		}
	}
	runtime.KeepAlive(more)
	runtime.KeepAlive(keep)
}

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

// heldNow is what the watch judges, measured after a collection: the live
// objects and the stacks in use, which the package's earlier tests leave
// some of (and reserve more stack than they use).
func heldNow() int64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}}
	metrics.Read(sample)
	return int64(sample[0].Value.Uint64() + sample[1].Value.Uint64())
}

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
	const room = 256 << 20
	limit := heldNow() + room
	keep := make([]byte, room/2)
	runtime.GC() // what is live now: half the room under the limit

	w := newHeapWatch(limit)
	w.lastGC = time.Now() // as if the watch had just collected
	cancelled, unwatch := watchedProbe(w)
	defer unwatch()
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

// deepSink keeps deep's frames from being optimized away.
var deepSink byte

// deep recurses n frames of about 8 KiB each, then waits at the bottom
// until release is closed (parked there, its whole stack is in use).
func deep(n int, atBottom chan<- struct{}, release <-chan struct{}) byte {
	var frame [8192]byte
	frame[n%8192] = byte(n)
	if n == 0 {
		atBottom <- struct{}{}
		<-release
		return frame[0]
	}
	return deep(n-1, atBottom, release) + frame[n%8192]
}

// TestHeapWatchJudgesStacksInUse: a goroutine that recursed deep and came
// back keeps its stack reserved until collections shrink it (half at a
// time); the watch judges the stack in use, which the last collection
// scanned, so calls are not cancelled for stack memory nothing uses. A
// goroutine deep in its recursion now still cancels them.
func TestHeapWatchJudgesStacksInUse(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection but the watch's and ours
	const room = 64 << 20
	limit := heldNow() + room

	// About 128 MiB of frames, returned from: the goroutine lives on,
	// parked, its stack reserved (256 MiB, shrunk to 128 MiB, then 64
	// MiB by the next two collections: past the limit until the second).
	atBottom, release, parked := make(chan struct{}), make(chan struct{}), make(chan struct{})
	back := make(chan struct{})
	go func() {
		deepSink = deep(16<<10, atBottom, release)
		close(back)
		<-parked
	}()
	<-atBottom
	close(release)
	<-back
	defer close(parked)
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(sample)
	if got := sample[0].Value.Uint64() + sample[1].Value.Uint64(); got < uint64(limit) {
		t.Fatalf("the objects and stacks reserved are %d MiB, under the limit of %d MiB: the test shows nothing", got>>20, limit>>20)
	}

	w := newHeapWatch(limit)
	cancelled, unwatch := watchedProbe(w)
	defer unwatch()
	time.Sleep(250 * time.Millisecond) // ticks of the watch, and its collections
	if cancelled() {
		t.Fatal("the watch cancelled a call for stack memory reserved but not in use")
	}

	// Now a goroutine deep in its recursion: the stack is in use.
	atBottom2, release2 := make(chan struct{}), make(chan struct{})
	go func() { deepSink = deep(16<<10, atBottom2, release2) }()
	<-atBottom2
	defer close(release2)
	for deadline := time.Now().Add(10 * time.Second); !cancelled(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) { // a hang guard
			t.Fatal("a stack in use past the limit did not cancel the call")
		}
	}
}

// watchedProbe starts w watching a fresh thread; cancelled runs a line on
// it and reports that the watch cancelled it.
func watchedProbe(w *heapWatch) (cancelled func() bool, unwatch func()) {
	th := &starlark.Thread{Name: "probe"}
	unwatch = w.watch(th)
	return func() bool {
		_, err := starlark.ExecFileOptions(&syntax.FileOptions{}, th, "probe.star", "x = 1\n", nil)
		return err != nil && strings.Contains(err.Error(), "cancelled")
	}, unwatch
}

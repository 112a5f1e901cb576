package procs

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestForgottenProcessesOverALongLife: 300 processes, in 300 scopes and
// under 300 caller names, started and never read, waited for or killed
// by their callers, each writing some output. The manager keeps at most
// maxExitedRemembered of them once they have exited, the per-scope
// output counts and the starts per caller go back to empty, and the
// descriptors and goroutines come back to where they were.
func TestForgottenProcessesOverALongLife(t *testing.T) {
	f := setup(t, nil)
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	const n = 150
	start := func(i int) string {
		scope := fmt.Sprintf("s%d", i)
		ws, err := f.ws.Scope(scope)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		if err := f.ws.Mkdir(scope, true); err != nil {
			t.Fatal(err)
		}
		info, err := f.m.Start(StartRequest{Command: "echo forgotten", Workspace: ws, Scope: scope, Caller: fmt.Sprintf("token-%d", i)})
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		return info.ID
	}
	// One first, so that what the first start makes once is counted.
	id := start(-1)
	if _, err := f.m.Wait(context.Background(), id, "s-1", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	settled := func() (procs, running, held, startingBy int) {
		f.m.mu.Lock()
		defer f.m.mu.Unlock()
		for _, p := range f.m.procs {
			select {
			case <-p.done:
			default:
				running++
			}
		}
		return len(f.m.procs), running, len(f.m.held), len(f.m.startingBy)
	}
	fds0, g0 := fds(), runtime.NumGoroutine()
	var last string
	for i := range n {
		last = start(i)
		if i%DefaultMaxProcs == DefaultMaxProcs-1 {
			// Within the cap of running ones: the last of each batch is
			// waited for, as a caller that comes back now and then, and
			// the batch's others are let end (on a loaded machine an
			// echo may still run when the last has exited).
			if _, err := f.m.Wait(context.Background(), last, fmt.Sprintf("s%d", i), 30*time.Second); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if _, running, _, _ := settled(); running == 0 {
					break
				}
			}
		}
	}
	procs, running, held, starting := settled()
	for deadline := time.Now().Add(30 * time.Second); running > 0 && time.Now().Before(deadline); procs, running, held, starting = settled() {
		time.Sleep(20 * time.Millisecond)
	}
	// forgetOld runs after each exit; one more start and exit settles it.
	id = start(n)
	if _, err := f.m.Wait(context.Background(), id, fmt.Sprintf("s%d", n), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if procs, running, held, starting = settled(); procs <= maxExitedRemembered && running == 0 {
			break
		}
	}
	fd, g := fds(), runtime.NumGoroutine()
	for deadline := time.Now().Add(10 * time.Second); (fd > fds0 || g > g0+2) && time.Now().Before(deadline); fd, g = fds(), runtime.NumGoroutine() {
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d forgotten processes: %d kept (%d running), %d scopes with output held, %d callers starting; descriptors %d → %d, goroutines %d → %d",
		n+2, procs, running, held, starting, fds0, fd, g0, g)
	if procs > maxExitedRemembered || running != 0 {
		t.Errorf("%d processes kept, %d running; want at most %d, none running", procs, running, maxExitedRemembered)
	}
	if held > maxExitedRemembered || starting != 0 {
		t.Errorf("%d scopes hold output, %d callers starting; want at most %d (the kept ones') and none", held, starting, maxExitedRemembered)
	}
	// A goroutine or two of the runtime's and the executor's come and go.
	if fd > fds0 || g > g0+2 {
		t.Errorf("descriptors %d → %d, goroutines %d → %d after %d processes", fds0, fd, g0, g, n)
	}
}

//go:build linux

package sandbox

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestReaperSparesOtherChildren: an executor without a cgroup makes the
// daemon a subreaper that reaps and sweeps the daemon's unregistered
// children. Beside it, the commands of an executor with a cgroup must end
// with their own exit status (not "waitid: no child processes", their
// zombie taken by the reaper) and must not be killed by its sweeps, and a
// child the daemon starts outside any executor (StartOutside, as the
// browser starts Chromium) must outlive every sweep.
func TestReaperSparesOtherChildren(t *testing.T) {
	var reaping, cgrouped Executor
	withCgroupKind(cgroupOff, func() { reaping, _ = newExec(t, ModeSoftware) })
	if !reaping.(*executor).reaper {
		t.Fatal("the executor without a cgroup did not become the subreaper")
	}
	cgrouped, _ = newExec(t, ModeSoftware)
	if cgrouped.(*executor).cgroups == nil {
		t.Log("no cgroup on this host: the second executor is a subreaper user too, which the test covers as well")
	}

	var outside *exec.Cmd
	forget, err := StartOutside(func() (int, error) {
		outside = exec.Command("sleep", "60")
		if err := outside.Start(); err != nil {
			return 0, err
		}
		return outside.Process.Pid, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = outside.Process.Kill()
		_ = outside.Wait()
		forget()
	})

	ctx := context.Background()
	var wg sync.WaitGroup
	// The reaping executor's commands end all the time: each end sweeps.
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := reaping.Run(ctx, Request{Command: "true"}); err != nil {
				t.Errorf("reaping executor: %v", err)
				return
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 10 {
				res, err := cgrouped.Run(ctx, Request{Command: "sleep 0.05; echo alive; exit 3"})
				if err != nil {
					t.Errorf("a command beside the reaper: %v", err)
					return
				}
				if res.ExitCode != 3 || strings.TrimSpace(string(res.Stdout)) != "alive" {
					t.Errorf("a command beside the reaper ended with %d, %q (signal %q), want 3, \"alive\"", res.ExitCode, res.Stdout, res.Signal)
					return
				}
			}
		})
	}
	// The sweeping loop goes on for a while after the other commands.
	go func() { time.Sleep(1500 * time.Millisecond); close(stop) }()
	wg.Wait()
	if err := outside.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the child started outside the executors was killed or reaped by a sweep: %v", err)
	}
	var ws syscall.WaitStatus
	if pid, err := syscall.Wait4(outside.Process.Pid, &ws, syscall.WNOHANG, nil); err != nil || pid != 0 {
		t.Fatalf("the child started outside the executors is no longer running (wait4: %d, %v)", pid, err)
	}
}

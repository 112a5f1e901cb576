//go:build linux

package sandbox

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

// TestStaleCommandsKilled: a daemon killed with SIGKILL leaves its
// commands' processes in its command cgroups (in landlock, software and
// none modes its kill reaches each command's first process only: a job in
// the background, a server a command started, keep the workspace, their
// ports and their files). The next daemon kills them before it removes the
// cgroups, but keeps a live daemon that ran as one of the dead daemon's
// commands (a process P with its own agentbe-P-<n> cgroup there), as
// TestNestedStaleCgroupsRemoved keeps its cgroups.
func TestStaleCommandsKilled(t *testing.T) {
	var e Executor
	withCgroupKind(cgroupV1Pids, func() { e, _ = newExec(t, ModeSoftware) })
	x := e.(*executor)
	if x.cgroups == nil {
		t.Skip("no cgroup v1 pids hierarchy here")
	}
	gone := exec.Command("/bin/true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(x.cgroups.home, fmt.Sprintf("agentbe-%d-1", gone.Process.Pid))
	cmdCg := filepath.Join(stale, "c1")
	left, nested := exec.Command("sleep", "1000"), exec.Command("sleep", "1001")
	for _, c := range []*exec.Cmd{left, nested} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	nestedCg := filepath.Join(cmdCg, fmt.Sprintf("agentbe-%d-1", nested.Process.Pid))
	t.Cleanup(func() {
		left.Process.Kill()
		nested.Process.Kill()
		left.Wait()
		nested.Wait()
		for _, d := range []string{nestedCg, cmdCg, stale} {
			for range 1000 {
				if err := os.Remove(d); err == nil || os.IsNotExist(err) {
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
	})
	for _, d := range []string{stale, cmdCg, nestedCg} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []int{left.Process.Pid, nested.Process.Pid} {
		if err := writeCgroupFile(filepath.Join(cmdCg, "cgroup.procs"), strconv.Itoa(p)); err != nil {
			t.Fatal(err)
		}
	}

	var logged syncbuf.Buffer
	withCgroupKind(cgroupV1Pids, func() { // the next daemon starts
		newExec(t, ModeSoftware, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logged, nil)) })
	})

	done := make(chan error, 1)
	go func() { done <- left.Wait() }()
	select {
	case err := <-done:
		if ws, ok := left.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Errorf("the dead daemon's command ended, but not by SIGKILL: %v", err)
		}
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("the dead daemon's command still runs after the next daemon started")
	}
	var ws syscall.WaitStatus
	if pid, err := syscall.Wait4(nested.Process.Pid, &ws, syscall.WNOHANG, nil); pid != 0 || err != nil {
		t.Fatalf("the live daemon nested in the dead one's command was killed (wait4: %d, %v, %v)", pid, ws, err)
	}
	if _, err := os.Stat(nestedCg); err != nil {
		t.Errorf("the live nested daemon's cgroup was removed: %v", err)
	}
	// The log says so (at least this one: a test process beside this
	// one, starting an executor at the same moment, may kill it first).
	if out := logged.String(); !strings.Contains(out, "killed the commands that daemons killed before left running") {
		t.Logf("no kill logged (another process's executor got there first?):\n%s", out)
	}
}

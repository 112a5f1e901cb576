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

// TestStaleCgroupOfADaemonInAnotherPidNamespace: the pid in agentbe-<pid>-<n>
// is the daemon's in its own pid namespace, so a daemon that lives in
// another namespace in the same cgroup (a container given no cgroup of its
// own, unshare --pid) has a pid this one does not know. Its commands are
// not killed, and its cgroups are kept, while it runs; once it is gone
// they are.
func TestStaleCgroupOfADaemonInAnotherPidNamespace(t *testing.T) {
	var e Executor
	withCgroupKind(cgroupV1Pids, func() { e, _ = newExec(t, ModeSoftware) })
	x := e.(*executor)
	if x.cgroups == nil {
		t.Skip("no cgroup v1 pids hierarchy here")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is needed: %v", err)
	}
	// A pid no process has here, which the other namespace's "daemon" takes.
	inner := 0
	for p := 30000; p > 20000; p-- {
		if syscall.Kill(p, 0) == syscall.ESRCH {
			inner = p
			break
		}
	}
	if inner == 0 {
		t.Fatal("no free pid between 20000 and 30000")
	}
	// ns_last_pid is the namespace's own with a /proc of its own.
	daemon := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "sh", "-c",
		fmt.Sprintf("echo %d > /proc/sys/kernel/ns_last_pid || exit 1; sleep 1000 & wait", inner-1))
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	killDaemon := func() {
		// Killing the namespace's first process ends every process in it.
		for _, p := range procsWithInnerPid(1, daemon.Process.Pid) {
			syscall.Kill(p, syscall.SIGKILL)
		}
		daemon.Process.Kill()
		daemon.Wait()
	}
	t.Cleanup(killDaemon)
	var host int
	for range 1000 { // until the namespace's sleep has its pid
		if ps := procsWithInnerPid(inner, 0); len(ps) == 1 {
			host = ps[0]
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if host == 0 {
		t.Fatalf("no process with pid %d in a namespace of its own came up", inner)
	}
	if syscall.Kill(inner, 0) != syscall.ESRCH {
		t.Fatalf("pid %d was taken here meanwhile; the test cannot tell", inner)
	}

	stale := filepath.Join(x.cgroups.home, fmt.Sprintf("agentbe-%d-1", inner))
	cmdCg := filepath.Join(stale, "c1")
	victim := exec.Command("sleep", "1002")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		victim.Process.Kill()
		victim.Wait()
		for _, d := range []string{cmdCg, stale} {
			for range 1000 {
				if err := os.Remove(d); err == nil || os.IsNotExist(err) {
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
	})
	for _, d := range []string{stale, cmdCg} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeCgroupFile(filepath.Join(cmdCg, "cgroup.procs"), strconv.Itoa(victim.Process.Pid)); err != nil {
		t.Fatal(err)
	}

	if n := removeStaleCgroups(x.cgroups.home); n != 0 {
		t.Errorf("removeStaleCgroups killed %d processes while their daemon runs in another namespace", n)
	}
	var ws syscall.WaitStatus
	if pid, err := syscall.Wait4(victim.Process.Pid, &ws, syscall.WNOHANG, nil); pid != 0 || err != nil {
		t.Fatalf("the command of a live daemon in another pid namespace was killed (wait4: %d, %v, %v)", pid, ws, err)
	}
	if _, err := os.Stat(cmdCg); err != nil {
		t.Fatalf("the live daemon's command cgroup was removed: %v", err)
	}

	killDaemon()
	for range 1000 { // until the namespace is gone
		if len(procsWithInnerPid(inner, 0)) == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	removeStaleCgroups(x.cgroups.home)
	done := make(chan error, 1)
	go func() { done <- victim.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("once its daemon was gone, the dead daemon's command still ran")
	}
}

// procsWithInnerPid lists the processes whose pid in their innermost pid
// namespace, one below this one, is inner (and, unless parent is 0, whose
// parent is parent).
func procsWithInnerPid(inner, parent int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		var nspid []string
		ppid := -1
		for l := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "NSpid:"); ok {
				nspid = strings.Fields(v)
			}
			if v, ok := strings.CutPrefix(l, "PPid:"); ok {
				ppid, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		if len(nspid) == 2 && nspid[1] == strconv.Itoa(inner) && (parent == 0 || ppid == parent) {
			out = append(out, p)
		}
	}
	return out
}

package browser

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
)

// TestKillUsingSparesAReusedPid: the sweep of a session's processes reads
// a command line, then signals. If that process exits in between and the
// kernel gives its pid to another process, the signal must not reach the
// newcomer (for a root daemon, any process on the host). The test makes
// the kernel reuse the pid in that window (ns_last_pid) and checks that
// the newcomer lives, while a process of the session with no such race is
// killed.
func TestKillUsingSparesAReusedPid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the pid is reused on purpose by writing /proc/sys/kernel/ns_last_pid")
	}
	dir := t.TempDir()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	inDir := filepath.Join(dir, "sleep") // its command line names a path in dir
	if err := os.WriteFile(inDir, prog, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func(path string) *exec.Cmd {
		c := exec.Command(path, "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	racing, plain := start(inDir), start(inDir)
	var newcomer *exec.Cmd
	beforeKill = func(pid int) {
		if pid != racing.Process.Pid {
			return
		}
		racing.Process.Kill()
		racing.Wait()
		// Another process takes the pid: the next pid the kernel gives
		// is ns_last_pid+1, unless some other fork comes first; retry.
		for range 200 {
			if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
				t.Fatalf("ns_last_pid: %v", err)
			}
			c := exec.Command(sleep, "60")
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			if c.Process.Pid == pid {
				newcomer = c
				return
			}
			c.Process.Kill()
			c.Wait()
		}
	}
	t.Cleanup(func() { beforeKill = nil })
	pids := processesUsing(dir, true)
	if newcomer == nil {
		t.Fatalf("pid %d was not reused in 200 tries", racing.Process.Pid)
	}
	if !slices.Contains(pids, racing.Process.Pid) || !slices.Contains(pids, plain.Process.Pid) {
		t.Errorf("processesUsing found %v; want %d and %d", pids, racing.Process.Pid, plain.Process.Pid)
	}
	// A SIGKILL sent to it is pending already; the SIGTERM sent now ends
	// it only if none was.
	newcomer.Process.Signal(syscall.SIGTERM)
	newcomer.Wait()
	if sig := newcomer.ProcessState.Sys().(syscall.WaitStatus).Signal(); sig != syscall.SIGTERM {
		t.Errorf("the process that took pid %d after the command line was read ended by %v, not by the test's SIGTERM", newcomer.Process.Pid, sig)
	}
	if err := plain.Wait(); err == nil || plain.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the session's own process was not killed: %v", err)
	}
}

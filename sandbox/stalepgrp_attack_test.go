//go:build linux

package sandbox

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

// staleGroup is a command for a pty: it makes a child the leader of a
// process group of its own, gives it the terminal (the foreground group),
// lets it exit and reaps it, so the terminal's foreground group names a
// process group that no longer exists; it prints that number and waits.
const staleGroup = `import os, time
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    time.sleep(0.3)
    os._exit(0)
os.setpgid(pid, pid)
os.tcsetpgrp(0, pid)
os.waitpid(pid, 0)
print("STALE", pid, flush=True)
time.sleep(60)
`

// TestAttackSignalStaleForegroundGroup: a command on a pty leaves the
// terminal's foreground group pointing at a group that is gone, and waits
// until its number is another process group's (here steered through
// ns_last_pid; a command can get there by forking through the pid space,
// 32768 on a default kernel). A signal asked for then (SSH's signal
// request) must not reach that other group: a root daemon would kill any
// process group of the host. It reaches the command's own session, or
// nothing.
func TestAttackSignalStaleForegroundGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("steering pid allocation (ns_last_pid) needs root; CI runs as root")
	}
	python, err := exec.LookPath("python3")
	if err != nil || !strings.HasPrefix(python, "/usr/") {
		python = "/usr/bin/python3"
	}
	if _, err := os.Stat(python); err != nil {
		t.Skip("no /usr/bin/python3 to play the command")
	}
	for _, mode := range []Mode{ModeSoftware, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, ws := newExec(t, mode)
			if err := os.WriteFile(filepath.Join(ws, "stale.py"), []byte(staleGroup), 0o644); err != nil {
				t.Fatal(err)
			}
			var out syncbuf.Buffer
			inR, inW := io.Pipe()
			defer inW.Close()
			p, err := e.Start(context.Background(), Request{Command: python + " stale.py", Pty: &Pty{Cols: 80, Rows: 24}},
				Stdio{Stdin: inR, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = e.Close(); _, _ = p.Wait() }()
			waitFor(t, &out, "STALE ")
			_, rest, _ := strings.Cut(out.String(), "STALE ")
			n, err := strconv.Atoi(strings.Fields(rest)[0])
			if err != nil {
				t.Fatalf("output %q", out.String())
			}
			victim := groupLeaderAt(t, n)
			if victim == nil {
				t.Skipf("could not start a process as pid %d (the machine is busy)", n)
			}
			sigErr := p.Signal("KILL")
			// Ours comes second: if the daemon's KILL reached the victim,
			// it is already pending and the victim dies of it.
			_ = victim.Process.Signal(syscall.SIGTERM)
			_ = victim.Wait()
			ws2 := victim.ProcessState.Sys().(syscall.WaitStatus)
			if ws2.Signaled() && ws2.Signal() == syscall.SIGKILL {
				t.Errorf("the signal for the command (err %v) killed process group %d, another's that took the stale foreground group's number", sigErr, n)
			}
		})
	}
}

// groupLeaderAt starts `sleep 60` as the leader of its own process group
// with pid n, steering the kernel's next pid through ns_last_pid; nil when
// another process took n first every time.
func groupLeaderAt(t *testing.T, n int) *exec.Cmd {
	t.Helper()
	for range 50 {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(n-1)), 0); err != nil {
			t.Skipf("cannot steer pid allocation: %v", err)
		}
		c := exec.Command("sleep", "60")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if c.Process.Pid == n {
			t.Cleanup(func() { _ = c.Process.Kill() })
			return c
		}
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	return nil
}

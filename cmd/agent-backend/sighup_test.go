package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

// TestSIGHUPWhileStartingIsAReload: a SIGHUP (a logrotate or cert-renewal
// hook) that arrives while the daemon starts, its port bound and its
// providers not yet up, is a reload once the daemon is up, not the
// process's end. The signals are sent from the daemon's first log line
// (its command line read) until it listens.
func TestSIGHUPWhileStartingIsAReload(t *testing.T) {
	port := freePort(t)
	audit := filepath.Join(t.TempDir(), "audit.log")
	cmd := exec.Command(binary, "daemon", "--port", fmt.Sprint(port), "--isolation", "software",
		"--ssh-host-key", filepath.Join(t.TempDir(), "hostkey"), "--root", t.TempDir(), "--audit-log", audit)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	exited := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	waitFor(t, func() bool { return exited() || strings.Contains(stderr.String(), "level=") })
	sent := 0
	waitFor(t, func() bool {
		if exited() || strings.Contains(stderr.String(), "msg=listening") {
			return true
		}
		if cmd.Process.Signal(syscall.SIGHUP) == nil {
			sent++
		}
		return false
	})
	if exited() {
		t.Fatalf("the daemon ended on a SIGHUP while starting (%d sent): %v\n%s", sent, cmd.ProcessState, stderr)
	}
	waitFor(t, func() bool { return strings.Contains(stderr.String(), "SIGHUP: audit log reopened") })
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second): // hang guard
		t.Fatalf("still running 30s after SIGTERM:\n%s", stderr)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %v after SIGTERM; want 0\n%s", cmd.ProcessState, stderr)
	}
}

// TestSIGHUPWhileShuttingDown: SIGHUPs sent without pause from before a
// SIGTERM until the process is gone neither end it by signal nor cut its
// shutdown short: it exits 0 having logged "stopped". (Process.Signal
// goes through a pidfd: never to another process that got the pid.)
func TestSIGHUPWhileShuttingDown(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.log")
	p := startDaemon(t, "--root", t.TempDir(), "--audit-log", audit)
	stop := make(chan struct{})
	hups := make(chan int)
	go func() {
		n := 0
		defer func() { hups <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if p.cmd.Process.Signal(syscall.SIGHUP) == nil {
				n++
			}
			time.Sleep(20 * time.Microsecond)
		}
	}()
	waitFor(t, func() bool { return strings.Contains(p.stderr.String(), "SIGHUP: audit log reopened") })
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second): // hang guard
		t.Fatalf("still running 30s after SIGTERM:\n%s", p.stderr)
	}
	close(stop)
	n := <-hups
	if st := p.cmd.ProcessState; st.ExitCode() != 0 {
		t.Fatalf("exit %v after SIGTERM with SIGHUPs arriving (%d sent); want 0\n%s", st, n, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "msg=stopped") {
		t.Errorf("no \"stopped\" in the log:\n%s", p.stderr)
	}
}

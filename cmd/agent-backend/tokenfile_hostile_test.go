package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

// TestTokenFileNeitherWaitsNorSwallows: the token file of agent-backend
// proxy, health and site serve naming a FIFO fails at once instead of
// holding the command until someone writes, and one over 64 KiB fails
// instead of being read whole (and sent, or served as the token); each
// error names the file.
func TestTokenFileNeitherWaitsNorSwallows(t *testing.T) {
	t.Run("proxy", func(t *testing.T) {
		fifo, big := hostileTokenFiles(t)
		for _, c := range []struct{ name, want string }{{fifo, "a FIFO"}, {big, "larger than"}} {
			if tok, err := proxyToken("", c.name); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.name) {
				t.Errorf("proxyToken(%s): %d bytes, %v; want an error naming the file and %q", c.name, len(tok), err, c.want)
			}
		}
	})
	t.Run("health", func(t *testing.T) {
		fifo, big := hostileTokenFiles(t)
		for _, c := range []struct{ name, want string }{{fifo, "a FIFO"}, {big, "larger than"}} {
			_, errOut, code := run(t, nil, "health", "--url", "http://127.0.0.1:1/health", "--token-file", c.name)
			if code != 1 || !strings.Contains(errOut, "--token-file") || !strings.Contains(errOut, c.name) || !strings.Contains(errOut, c.want) {
				t.Errorf("health --token-file %s: exit %d, %q; want an error naming the flag, the file and %q", c.name, code, errOut, c.want)
			}
		}
	})
	t.Run("site serve", func(t *testing.T) {
		fifo, big := hostileTokenFiles(t)
		for _, c := range []struct{ name, want string }{{fifo, "a FIFO"}, {big, "larger than"}} {
			siteServeRefused(t, []string{"--token-file", c.name}, "/", "--token-file", c.name, c.want)
		}
	})
	// The same holds for site serve's --config file.
	t.Run("site serve --config", func(t *testing.T) {
		fifo, big := hostileTokenFiles(t)
		for _, c := range []struct{ name, want string }{{fifo, "a FIFO"}, {big, "larger than"}} {
			siteServeRefused(t, []string{"--config", c.name}, "/", "--config", c.name, c.want)
		}
	})
}

// siteServeRefused runs site serve on a copy of the example site with
// extra flags and requires that it stops at start, exit 1, with one line
// holding each of want. A server that starts anyway fails the test with
// what GET get answered.
func siteServeRefused(t *testing.T, extra []string, get string, want ...string) {
	t.Helper()
	dir := exampleSiteDir(t, "")
	port := freePort(t)
	args := append([]string{"site", "serve", dir, "-p", fmt.Sprint(port), "--isolation", "software", "--no-init"}, extra...)
	cmd := exec.Command(binary, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	logs := &syncbuf.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() { cmd.Process.Kill(); <-exited }()
	for ; ; time.Sleep(10 * time.Millisecond) {
		select {
		case <-exited:
			errOut := logs.String()
			ok := cmd.ProcessState.ExitCode() == 1 && strings.Count(strings.TrimSpace(errOut), "\n") == 0
			for _, w := range want {
				ok = ok && strings.Contains(errOut, w)
			}
			if !ok {
				t.Errorf("site serve %v: exit %d, stderr %q; want one line holding %q", extra, cmd.ProcessState.ExitCode(), errOut, want)
			}
			return
		default:
		}
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, get)); err == nil {
			resp.Body.Close()
			t.Errorf("site serve %v started; GET %s answered %d", extra, get, resp.StatusCode)
			return
		}
	}
}

// hostileTokenFiles makes, in a fresh directory, a FIFO and a 2 MiB file,
// each named as a token file by mistake or by someone else: a read must
// fail at once naming the file ("a FIFO", "larger than"), not wait for a
// writer or take the file whole. So that a reader that does wait fails
// the test rather than hanging it, a writer comes along after a while and
// hands the FIFO "late-token".
func hostileTokenFiles(t *testing.T) (fifo, big string) {
	t.Helper()
	dir := t.TempDir()
	fifo, big = filepath.Join(dir, "fifo"), filepath.Join(dir, "big")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, bytes.Repeat([]byte("t"), 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	late := time.AfterFunc(3*time.Second, func() {
		// Non-blocking: with no reader waiting (the read refused the
		// FIFO), there is no one to hand it to.
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Write([]byte("late-token\n"))
			f.Close()
		}
	})
	t.Cleanup(func() { late.Stop() })
	return fifo, big
}

package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestTokenFileNeitherWaitsNorSwallows: the token file of agent-backend
// proxy, health and site serve naming a FIFO fails at once instead of
// holding the command until someone writes, and one over 64 KiB fails
// instead of being read whole (and sent, or served as the token); each
// error names the file.
func TestTokenFileNeitherWaitsNorSwallows(t *testing.T) {
	t.Run("proxy", func(t *testing.T) {
		testenv.RefusesHostileFiles(t, "proxyToken", func(name string) (string, error) { return proxyToken("", name) })
	})
	t.Run("health", func(t *testing.T) {
		for _, c := range testenv.HostileFiles(t) {
			_, errOut, code := run(t, nil, "health", "--url", "http://127.0.0.1:1/health", "--token-file", c.Path)
			if code != 1 || !strings.Contains(errOut, "--token-file") || !strings.Contains(errOut, c.Path) || !strings.Contains(errOut, c.Want) {
				t.Errorf("health --token-file %s: exit %d, %q; want an error naming the flag, the file and %q", c.Path, code, errOut, c.Want)
			}
		}
	})
	t.Run("site serve", func(t *testing.T) {
		for _, c := range testenv.HostileFiles(t) {
			siteServeRefused(t, []string{"--token-file", c.Path}, "/", "--token-file", c.Path, c.Want)
		}
	})
	// The same holds for site serve's --config file.
	t.Run("site serve --config", func(t *testing.T) {
		for _, c := range testenv.HostileFiles(t) {
			siteServeRefused(t, []string{"--config", c.Path}, "/", "--config", c.Path, c.Want)
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

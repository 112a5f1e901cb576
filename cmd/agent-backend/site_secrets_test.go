package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSiteServeSecretsInsideSiteRefused: `site serve` answers GET for any
// file of DIR, not only its pages, and DIR is its commands' workspace, so
// an --env-file (whose values are secrets that never reach the agent) or a
// --token-file inside DIR would be one request away, and a page that lets
// commands write could replace it. Either one inside DIR, directly,
// through a symlink outside that leads in, or named by the --config file,
// stops the start with one line naming the flag (or key) and DIR; nothing
// is served. A server that starts anyway fails the test with what GET of
// the file answered.
func TestSiteServeSecretsInsideSiteRefused(t *testing.T) {
	const secret = "SITE_GREETING=the-operators-secret-42\n"
	for _, tc := range []struct {
		name string
		// setup writes the files and returns the flags and the file's
		// name under DIR that a GET would read.
		setup func(t *testing.T, dir, outside string) (args []string, get, want string)
	}{
		{"--env-file inside", func(t *testing.T, dir, _ string) ([]string, string, string) {
			writeSiteFile(t, filepath.Join(dir, ".env"), secret)
			return []string{"--env-file", filepath.Join(dir, ".env")}, ".env", "--env-file " + filepath.Join(dir, ".env")
		}},
		{"--env-file through a symlink outside", func(t *testing.T, dir, outside string) ([]string, string, string) {
			writeSiteFile(t, filepath.Join(dir, ".env"), secret)
			link := filepath.Join(outside, "site.env")
			if err := os.Symlink(filepath.Join(dir, ".env"), link); err != nil {
				t.Fatal(err)
			}
			return []string{"--env-file", link}, ".env", "--env-file " + link
		}},
		{"env_file in --config", func(t *testing.T, dir, outside string) ([]string, string, string) {
			writeSiteFile(t, filepath.Join(dir, "vars.env"), secret)
			conf := writeSiteFile(t, filepath.Join(outside, "site.toml"), fmt.Sprintf("env_file = %q\n", filepath.Join(dir, "vars.env")))
			return []string{"-c", conf}, "vars.env", "env_file in --config " + conf
		}},
		{"--token-file inside", func(t *testing.T, dir, _ string) ([]string, string, string) {
			writeSiteFile(t, filepath.Join(dir, "token"), "site-token-42\n")
			return []string{"--token-file", filepath.Join(dir, "token")}, "token", "--token-file " + filepath.Join(dir, "token")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, outside := exampleSiteDir(t, ""), t.TempDir()
			extra, get, want := tc.setup(t, dir, outside)
			siteServeRefused(t, dir, extra, "/"+get, want, "inside the tool site "+dir)
		})
	}
}

// siteServeRefused runs site serve on dir (a copy of the example site)
// with extra flags and requires that it stops at start, exit 1, with one
// line holding each of want. A server that starts anyway fails the test
// with what GET get (with the bearer token the tests' token files hold)
// answered.
func siteServeRefused(t *testing.T, dir string, extra []string, get string, want ...string) {
	t.Helper()
	port := freePort(t)
	args := append([]string{"site", "serve", dir, "-p", fmt.Sprint(port), "--isolation", "software", "--no-init"}, extra...)
	cmd, logs, exited := startBinary(t, "", args...)
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
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", port, get), nil)
		req.Header.Set("Authorization", "Bearer site-token-42")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Errorf("site serve %v started; GET %s answered %d %q", extra, get, resp.StatusCode, b)
			return
		}
	}
}

func writeSiteFile(t *testing.T, p, content string) string {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

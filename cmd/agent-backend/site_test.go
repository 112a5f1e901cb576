package main

import (
	"encoding/json"
	"fmt"
	"io"
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

// exampleSiteDir is a copy of the example site with a page that allows
// sleep and seq, and the given site.toml (none when toml is "").
func exampleSiteDir(t *testing.T, toml string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../examples/site")); err != nil {
		t.Fatal(err)
	}
	page := "---\ntools:\n  - [sleep, {}, \";\"]\n  - [seq, {}, {}, \";\"]\n---\n# slow and long\n"
	if err := os.WriteFile(filepath.Join(dir, "long.md"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	if toml != "" {
		if err := os.WriteFile(filepath.Join(dir, "site.toml"), []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startBinary starts `agent-backend args...` in dir ("": the test's own)
// with only PATH and a fresh HOME in its environment and its stderr in
// logs; exited is closed once it has ended and been waited for. Stopping
// it is the caller's.
func startBinary(t *testing.T, dir string, args ...string) (cmd *exec.Cmd, logs *syncbuf.Buffer, exited chan struct{}) {
	t.Helper()
	cmd = exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	logs = &syncbuf.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	return cmd, logs, exited
}

// startSite runs `agent-backend args...` in dir (a `site serve`) and
// returns its base URL, once it answers on port, and its log.
func startSite(t *testing.T, dir string, port int, args ...string) (string, *syncbuf.Buffer) {
	t.Helper()
	cmd, logs, exited := startBinary(t, dir, args...)
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("%s exited: %s", strings.Join(args, " "), logs)
		default:
		}
		// The start-up line is written before the server answers, but
		// it reaches logs through exec's copying goroutine, which may not
		// have run yet when the first answer comes back: wait for both.
		if resp, err := http.Get(url + "/"); err == nil {
			resp.Body.Close()
			if strings.Contains(logs.String(), "serving the tool site") {
				return url, logs
			}
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("site serve not answering after 30s: %s", logs)
		}
	}
}

type siteReply struct {
	status  int
	applied string
	res     struct {
		Stdout     string `json:"stdout"`
		Stderr     string `json:"stderr"`
		Returncode int    `json:"returncode"`
	}
}

// sitePost POSTs a command to url+path as a statespace client does, with
// the Prefer header when prefer is not "".
func sitePost(t *testing.T, url, path, prefer string, command ...string) siteReply {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"command": command})
	req, _ := http.NewRequest(http.MethodPost, url+path, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	if prefer != "" {
		req.Header.Set("Prefer", prefer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := siteReply{status: resp.StatusCode, applied: resp.Header.Get("Preference-Applied")}
	if err := json.Unmarshal(b, &a.res); err != nil {
		t.Fatalf("POST %s %v: %d, not JSON: %s", path, command, resp.StatusCode, b)
	}
	return a
}

// TestSiteServeVersion: `site serve --version` (and statespace's -V) print
// the version and exit 0, without a DIR.
func TestSiteServeVersion(t *testing.T) {
	for _, flag := range []string{"--version", "-V"} {
		if out, errOut, code := run(t, nil, "site", "serve", flag); code != 0 || out != "agent-backend v0.0.0-test\n" || errOut != "" {
			t.Errorf("site serve %s: exit %d, %q %q", flag, code, out, errOut)
		}
	}
	out, _, code := run(t, nil, "site", "serve", "--help")
	for _, want := range []string{"-H, --host", "-p, --port", "-c, --config", "-V, --version", "--no-init", "--max-output", "--strict-output", "--not-allowed-status", "timeout = 30", "Prefer: handling=strict"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("site serve --help lacks %q (exit %d)", want, code)
		}
	}
}

// TestSiteServeStatespaceConfig serves a site the way a statespace user
// does: -H and -p, and a --config TOML whose timeout is whole seconds; DIR
// defaults to the current directory. A command no pattern allows is 403;
// output over the cap is cut by default and 413 when the request asks for
// strict output.
func TestSiteServeStatespaceConfig(t *testing.T) {
	dir := exampleSiteDir(t, "timeout = 1\nmax_output_bytes = 4096\n")
	port := freePort(t)
	url, logs := startSite(t, dir, port, "site", "serve", "-H", "127.0.0.1", "-p", fmt.Sprint(port), "-c", "site.toml", "--isolation", "software")
	if !strings.Contains(logs.String(), "timeout=1s") || !strings.Contains(logs.String(), "max_output=4096") {
		t.Errorf("the file's timeout and max_output_bytes are not in the start-up log:\n%s", logs)
	}
	if a := sitePost(t, url, "/long", "", "sleep", "5"); a.status != http.StatusRequestTimeout || !strings.Contains(a.res.Stderr, "timed out after 1s") {
		t.Errorf("timeout = 1: %d %+v", a.status, a.res)
	}
	if a := sitePost(t, url, "/", "", "rm", "-rf", "data"); a.status != http.StatusForbidden || !strings.Contains(a.res.Stderr, "command not allowed by /README.md") {
		t.Errorf("a command no pattern allows: %d %+v", a.status, a.res)
	}
	// A variable the page uses and no --env-file sets: the error names
	// site serve's flag, not the daemon's --site-env-file.
	if a := sitePost(t, url, "/", "", "echo", "greeting: $SITE_GREETING"); a.status != http.StatusInternalServerError || !strings.HasSuffix(strings.TrimSpace(a.res.Stderr), "sets it with --env-file") {
		t.Errorf("a variable no --env-file sets: %d %+v", a.status, a.res)
	}
	if a := sitePost(t, url, "/long", "", "seq", "1", "20000"); a.status != http.StatusOK || a.applied != "" || !strings.Contains(a.res.Stdout, "[... output truncated: ") || !strings.HasSuffix(a.res.Stdout, "20000\n") {
		t.Errorf("output over the cap, default: %d %q %.200q", a.status, a.applied, a.res.Stdout)
	}
	if a := sitePost(t, url, "/long", "handling=strict", "seq", "1", "20000"); a.status != http.StatusRequestEntityTooLarge || a.applied != "handling=strict" || a.res.Stdout != "" ||
		!strings.Contains(a.res.Stderr, "output too large: stdout is 108894 bytes, over the limit of 4096 bytes") {
		t.Errorf("output over the cap, strict: %d %q %+v", a.status, a.applied, a.res)
	}
}

// TestSiteServeStatespaceAnswers: with not_allowed_status = 400 and
// strict_output = true in the file, the server answers as statespace's
// Rust server does (400, and 413 for output over the cap), and a request
// can still ask for the cut output; flags win over the file.
func TestSiteServeStatespaceAnswers(t *testing.T) {
	dir := exampleSiteDir(t, "timeout = \"5s\"\nmax_output_bytes = 4096\nnot_allowed_status = 400\nstrict_output = true\nport = 1\n")
	port := freePort(t)
	url, _ := startSite(t, dir, port, "site", "serve", dir, "--port", fmt.Sprint(port), "--config", filepath.Join(dir, "site.toml"), "--isolation", "software")
	if a := sitePost(t, url, "/", "", "rm", "-rf", "data"); a.status != http.StatusBadRequest || !strings.Contains(a.res.Stderr, "command not allowed") {
		t.Errorf("not_allowed_status = 400: %d %+v", a.status, a.res)
	}
	if a := sitePost(t, url, "/long", "", "seq", "1", "20000"); a.status != http.StatusRequestEntityTooLarge || !strings.Contains(a.res.Stderr, "output too large") {
		t.Errorf("strict_output = true: %d %+v", a.status, a.res)
	}
	if a := sitePost(t, url, "/long", "handling=lenient", "seq", "1", "20000"); a.status != http.StatusOK || a.applied != "handling=lenient" || !strings.Contains(a.res.Stdout, "[... output truncated: ") {
		t.Errorf("strict_output = true, lenient asked: %d %q %.200q", a.status, a.applied, a.res.Stdout)
	}
	if a := sitePost(t, url, "/long", "", "seq", "1", "3"); a.status != http.StatusOK || a.res.Stdout != "1\n2\n3\n" {
		t.Errorf("strict_output = true, under the cap: %d %+v", a.status, a.res)
	}
}

// TestSiteServeConfigErrors: a bad --config file or flag value fails at
// start with one line naming the key (or flag) and the file.
func TestSiteServeConfigErrors(t *testing.T) {
	dir := exampleSiteDir(t, "")
	file := filepath.Join(dir, "bad.toml")
	for _, tc := range []struct {
		toml string
		args []string
		want string
	}{
		{"timeout = 1.5", nil, "--config " + file + `: timeout = 1.5: want whole seconds (30) or a duration ("1m30s")`},
		{"timeout = 0", nil, "timeout = 0: want whole seconds"},
		{"timeout = -30", nil, "timeout = -30: want whole seconds"},
		{`timeout = "soon"`, nil, `timeout = "soon": want whole seconds`},
		{"timeout = 86401", nil, "timeout = 86401: want whole seconds (30) or a duration (\"1m30s\"), more than 0 and at most 24h"},
		{"port = 70000", nil, "--config " + file + ": port = 70000: want a port, 1-65535"},
		{`port = "8000"`, nil, `port = "8000": want a port, 1-65535`},
		{"max_output_bytes = -1", nil, "max_output_bytes = -1: want a number of bytes, 1-1073741824"},
		{"max_list_items = 0", nil, "max_list_items = 0: want a number of items"},
		{`host = ""`, nil, `host = "": want a non-empty string`},
		{`isolation = "vm"`, nil, `isolation = "vm": want one of auto, bwrap, landlock, software, none`},
		{`allowed_origins = "https://a.example"`, nil, `allowed_origins = "https://a.example": want a list of strings`},
		{"not_allowed_status = 404", nil, "not_allowed_status = 404: want 403 (the default) or 400"},
		{`strict_output = "yes"`, nil, `strict_output = "yes": want true or false`},
		{"timeout_secs = 30", nil, `--config ` + file + `: unknown key "timeout_secs" (the keys are host, port, timeout,`},
		{"port = [", nil, "--config " + file + ":1:8: "},
		{"port = [{a = 1}]", nil, "--config " + file + ": port = [...]: want a port, 1-65535"},
		{"timeout = [[1], {\r\r", nil, "--config " + file + `:1:18: invalid character at start of key: \r`},
		{`token_file = "/nonexistent/token"`, nil, `token_file in --config ` + file + ` "/nonexistent/token": cannot read`},
		{"", []string{"--timeout", "1.5"}, `--timeout "1.5": want whole seconds (30) or a duration ("1m30s")`},
		{"", []string{"--max-output", "0"}, "--max-output 0: want a number of bytes, 1-1073741824"},
		{"", []string{"--not-allowed-status", "401"}, "--not-allowed-status 401: want 403 (the default) or 400"},
		{"", []string{"a", "b"}, "site serve takes one DIR, the tool site's directory; got 2 arguments (a b)"},
	} {
		args := []string{"site", "serve"}
		if tc.args == nil || tc.args[0] != "a" {
			args = append(args, dir)
		}
		if tc.toml != "" {
			if err := os.WriteFile(file, []byte(tc.toml+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			args = append(args, "-c", file)
		}
		args = append(args, tc.args...)
		out, errOut, code := run(t, nil, args...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, "agent-backend: ") || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%q %v: exit %d, stderr %q; want one line containing %q", tc.toml, tc.args, code, errOut, tc.want)
		}
	}
}

// TestSiteServeNoInit: --no-init (statespace's flag) leaves DIR as it is;
// without it the missing AGENTS.md and index.html are written.
func TestSiteServeNoInit(t *testing.T) {
	for _, noInit := range []bool{true, false} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("---\ntools:\n  - [ls]\n---\n# bare\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		port := freePort(t)
		args := []string{"site", "serve", "-p", fmt.Sprint(port), "--isolation", "software"}
		if noInit {
			args = append(args, "--no-init")
		}
		url, _ := startSite(t, dir, port, args...)
		if a := sitePost(t, url, "/", "", "ls"); a.status != http.StatusOK || !strings.Contains(a.res.Stdout, "README.md") {
			t.Errorf("--no-init=%v: ls: %d %+v", noInit, a.status, a.res)
		}
		for _, name := range []string{"AGENTS.md", "index.html"} {
			_, err := os.Stat(filepath.Join(dir, name))
			if noInit != os.IsNotExist(err) {
				t.Errorf("--no-init=%v: %s: %v", noInit, name, err)
			}
		}
	}
}

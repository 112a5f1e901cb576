package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the agent-backend built once for the tests that run it as a
// process, the way users and client libraries do.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentbe-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "agent-backend")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building agent-backend:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// run runs the binary to completion with a clean environment plus env.
func run(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestVersion(t *testing.T) {
	want := regexp.MustCompile(`^agent-backend v\d+\.\d+\.\d+\S*\n$`)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, _, code := run(t, nil, args...)
		if code != 0 || !want.MatchString(out) {
			t.Errorf("%v: exit %d, output %q", args, code, out)
		}
	}
}

func TestHelpExplainsEveryFlag(t *testing.T) {
	out, _, code := run(t, nil, "daemon", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, flag := range []string{"--root", "rootDir", "--scope-path", "scopePath", "--isolation", "--shell", "--port", "--auth-token",
		"--auth-token-file", "--local-only", "--disable-ssh-ws", "--ssh-host-key", "--bind", "--config", "--log-format",
		"--log-level", "--shutdown-timeout", "--check-config", "--insecure-no-auth", "--backend", `(default "127.0.0.1")`, "(default 3001)", "(default 10s)"} {
		if !strings.Contains(out, flag) {
			t.Errorf("daemon --help lacks %q", flag)
		}
	}
}

func TestBadInputExitsNonZeroWithOneLine(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	tests := []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"daemon", "--bogus"}, nil, "agent-backend: unknown flag: --bogus (see 'agent-backend daemon --help')"},
		{[]string{"daemon"}, nil, "agent-backend: missing workspace root: set --root (alias --rootDir), AGENTBE_ROOT, or root in the config file"},
		{[]string{"daemon", "--root", file}, nil, `agent-backend: --root "` + file + `" is a file, not a directory`},
		{[]string{"daemon", "--root", root, "--port", "65536"}, nil, `agent-backend: invalid argument "65536" for "--port" flag: must be from 1 to 65535`},
		{[]string{"daemon", "--root", root, "--isolation", "vm"}, nil, `agent-backend: invalid argument "vm" for "--isolation" flag: must be one of auto, bwrap, software, none`},
		{[]string{"daemon", "--root", root, "--shell", "fish"}, nil, `agent-backend: invalid argument "fish" for "--shell" flag: must be one of auto, bash, sh`},
		{[]string{"daemon", "--root", root, "--auth-token-file", "/nonexistent"}, nil, `agent-backend: --auth-token-file "/nonexistent": cannot read: no such file or directory`},
		{[]string{"daemon", "--root", root, "--bind", "0.0.0.0"}, nil, "agent-backend: --bind 0.0.0.0 is not a loopback address and no auth token is set"},
		{[]string{"daemon", "--root", root}, []string{"AGENTBE_PORT=http"}, `agent-backend: invalid value "http" in AGENTBE_PORT: must be a whole number`},
		{[]string{"bogus-command"}, nil, `agent-backend: unknown command "bogus-command" for "agent-backend"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, errOut, code := run(t, tt.env, tt.args...)
			if code == 0 {
				t.Fatalf("exit 0; want failure")
			}
			if out != "" {
				t.Errorf("stdout not empty: %q", out)
			}
			if !strings.HasPrefix(errOut, tt.want) {
				t.Errorf("stderr %q\nwant prefix %q", errOut, tt.want)
			}
			if strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Errorf("error is not one line: %q", errOut)
			}
		})
	}
}

func TestCheckConfig(t *testing.T) {
	root := t.TempDir()
	out, errOut, code := run(t, nil, "daemon", "--rootDir", root, "--auth-token", "hunter2-secret", "--check-config")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out+errOut, "hunter2-secret") {
		t.Fatalf("token printed:\n%s%s", out, errOut)
	}
	for _, want := range []string{`root: "` + root + `"`, `auth-token: "[redacted]"`, "port: 3001"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// A token from the environment is redacted too.
	out, _, _ = run(t, []string{"AUTH_TOKEN=env-secret-token"}, "daemon", "--root", root, "--check-config")
	if strings.Contains(out, "env-secret-token") || !strings.Contains(out, `auth-token: "[redacted]"`) {
		t.Errorf("env token not redacted:\n%s", out)
	}

	_, errOut, code = run(t, nil, "daemon", "--root", root, "--bind", "0.0.0.0", "--check-config")
	if code != 1 || !strings.HasPrefix(errOut, "agent-backend: invalid configuration: --bind 0.0.0.0") {
		t.Errorf("invalid config: exit %d, stderr %q", code, errOut)
	}
	// --check-config does not create the root.
	missing := filepath.Join(root, "not-yet")
	if _, _, code := run(t, nil, "daemon", "--root", missing, "--check-config"); code != 0 {
		t.Errorf("missing root: exit %d", code)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("--check-config created %s", missing)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// daemonProc is a daemon process on a loopback port.
type daemonProc struct {
	cmd    *exec.Cmd
	url    string
	stderr *lockedBuffer
	done   chan struct{} // closed once the process exited and its log was read
}

// lockedBuffer collects a daemon's log while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startDaemon(t *testing.T, args ...string) *daemonProc {
	t.Helper()
	port := freePort(t)
	args = append([]string{"daemon", "--port", fmt.Sprint(port), "--isolation", "software",
		"--ssh-host-key", filepath.Join(t.TempDir(), "hostkey")}, args...)
	cmd := exec.Command(binary, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	p := &daemonProc{cmd: cmd, url: fmt.Sprintf("http://127.0.0.1:%d", port), stderr: &lockedBuffer{}, done: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		signalled := false
		for sc.Scan() {
			p.stderr.WriteString(sc.Text() + "\n")
			if !signalled && strings.Contains(sc.Text(), "msg=listening") {
				close(ready)
				signalled = true
			}
		}
	}()
	go func() { cmd.Wait(); pw.Close(); <-scanned; close(p.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
	})
	select {
	case <-ready:
	case <-p.done:
		t.Fatalf("daemon exited before listening: %s", p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("daemon not listening after 30s: %s", p.stderr)
	}
	return p
}

func TestDaemonServesHealthAndExitsZeroOnSIGTERM(t *testing.T) {
	root := filepath.Join(t.TempDir(), "created-by-daemon")
	p := startDaemon(t, "--rootDir", root, "--auth-token", "T")
	resp, err := http.Get(p.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"status":"ok"`) {
		t.Fatalf("/health: %d %s", resp.StatusCode, body)
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		t.Fatalf("root not created: %v", err)
	}

	// The health subcommand agrees.
	if out, errOut, code := run(t, nil, "health", "--url", p.url+"/health"); code != 0 || !strings.Contains(out, `"status":"ok"`) {
		t.Errorf("health: exit %d %q %q", code, out, errOut)
	}

	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second): // a hang guard, not a speed check
		t.Fatal("daemon still running 30s after SIGTERM")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM; want 0\n%s", code, p.stderr)
	}
	for _, want := range []string{"created the workspace root", "signal received", "stopped"} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, p.stderr)
		}
	}
}

func TestHealthCommandFailsWhenNothingListens(t *testing.T) {
	_, errOut, code := run(t, nil, "health", "--url", fmt.Sprintf("http://127.0.0.1:%d/health", freePort(t)), "--timeout", "2s")
	if code != 1 || !strings.HasPrefix(errOut, "agent-backend: unhealthy:") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	_, errOut, code := run(t, nil, "daemon", "--root", t.TempDir(), "--isolation", "software", "--port", fmt.Sprint(port),
		"--ssh-host-key", filepath.Join(t.TempDir(), "k"))
	if code == 0 || !strings.Contains(errOut, fmt.Sprintf("listen on --bind 127.0.0.1 --port %d", port)) {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

package main

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/daemon"
	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
	"github.com/agentbe/agentbe-daemon/internal/testbin"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// binary is the agent-backend built once for the tests that run it as a
// process, the way users and client libraries do.
var binary string

func TestMain(m *testing.M) {
	testenv.OperatorUmask() // the operator's files, made as an operator would
	var err error
	if binary, err = testbin.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testbin.Cleanup()
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
	// The test binary is stamped 0.0.0-test (internal/testbin), as a
	// release is with its tag.
	if out, _, code := run(t, nil, "--version"); code != 0 || out != "agent-backend v0.0.0-test\n" {
		t.Errorf("--version: exit %d, output %q", code, out)
	}
	out, _, code := run(t, nil, "version")
	want := regexp.MustCompile(`^agent-backend v0\.0\.0-test\n(commit: [0-9a-f]{12}( \(modified\))?\nbuilt: \S+\n)?go: go1\.\d+`)
	if code != 0 || !want.MatchString(out) {
		t.Errorf("version: exit %d, output %q", code, out)
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
		{[]string{"daemon", "--prot", "3000"}, nil, "agent-backend: unknown flag: --prot; did you mean --port? (see 'agent-backend daemon --help')"},
		{[]string{"daemon", "--root-dir", "/x"}, nil, "agent-backend: unknown flag: --root-dir; did you mean --root? (see 'agent-backend daemon --help')"},
		{[]string{"daemon", "--auth-tokne-file=/x"}, nil, "agent-backend: unknown flag: --auth-tokne-file; did you mean --auth-token-file? (see 'agent-backend daemon --help')"},
		{[]string{"site", "serve", "--env-fil", "x"}, nil, "agent-backend: unknown flag: --env-fil; did you mean --env-file? (see 'agent-backend site serve --help')"},
		{[]string{"daemon"}, nil, "agent-backend: missing workspace root: set --root (alias --rootDir), AGENTBE_ROOT, or root in the config file"},
		{[]string{"daemon", "--root", file}, nil, `agent-backend: --root "` + file + `" is a file, not a directory`},
		{[]string{"daemon", "--root", root, "--port", "65536"}, nil, `agent-backend: invalid argument "65536" for "--port" flag: must be from 1 to 65535`},
		{[]string{"daemon", "--root", root, "--isolation", "vm"}, nil, `agent-backend: invalid argument "vm" for "--isolation" flag: must be one of auto, bwrap, landlock, software, none`},
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
	stderr *syncbuf.Buffer
	done   chan struct{} // closed once the process exited and its log was read
}

func startDaemon(t *testing.T, args ...string) *daemonProc {
	t.Helper()
	return startDaemonEnv(t, nil, args...)
}

// startDaemonEnv is startDaemon with extra environment variables (KEY=VALUE).
func startDaemonEnv(t *testing.T, env []string, args ...string) *daemonProc {
	t.Helper()
	port := freePort(t)
	args = append([]string{"daemon", "--port", fmt.Sprint(port), "--isolation", "software",
		"--ssh-host-key", filepath.Join(t.TempDir(), "hostkey")}, args...)
	cmd := exec.Command(binary, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	p := &daemonProc{cmd: cmd, url: fmt.Sprintf("http://127.0.0.1:%d", port), stderr: &syncbuf.Buffer{}, done: make(chan struct{})}
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

	// The health subcommand agrees. Without the token it is told
	// liveness only; with --token-file, the details too.
	if out, errOut, code := run(t, nil, "health", "--url", p.url+"/health"); code != 0 || !strings.Contains(out, `"status":"ok"`) || strings.Contains(out, `"isolation"`) {
		t.Errorf("health: exit %d %q %q", code, out, errOut)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("T\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := run(t, nil, "health", "--url", p.url+"/health", "--token-file", tokenFile); code != 0 || !strings.Contains(out, `"isolation"`) {
		t.Errorf("health --token-file: exit %d %q %q", code, out, errOut)
	}
	if _, errOut, code := run(t, nil, "health", "--url", p.url+"/health", "--token-file", tokenFile+".missing"); code == 0 || !strings.Contains(errOut, "--token-file") {
		t.Errorf("health --token-file of no file: exit %d %q", code, errOut)
	}
	// A token the daemon does not take: healthy (exit 0), liveness only,
	// and a line on stderr that says the token was not taken.
	wrongFile := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(wrongFile, []byte("not-T\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := run(t, nil, "health", "--url", p.url+"/health", "--token-file", wrongFile); code != 0 || strings.Contains(out, `"isolation"`) ||
		!strings.Contains(errOut, "did not take the token in --token-file "+wrongFile) {
		t.Errorf("health --token-file of a wrong token: exit %d %q %q", code, out, errOut)
	}
	if _, errOut, code := run(t, nil, "health", "--url", p.url+"/health", "--token-file", tokenFile); strings.Contains(errOut, "did not take") {
		t.Errorf("health --token-file of the right token says it was not taken: exit %d %q", code, errOut)
	}
	emptyFile := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(emptyFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := run(t, nil, "health", "--url", p.url+"/health", "--token-file", emptyFile); code == 0 || !strings.Contains(errOut, "--token-file "+emptyFile+" is empty") {
		t.Errorf("health --token-file of an empty file: exit %d %q", code, errOut)
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
	for _, want := range []string{"created the workspace root", "SSH host key", "fingerprint=SHA256:", "signal received", "stopped"} {
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

// mcpLines runs the binary with args and talks to it as an MCP stdio client
// does: it writes each request as a line and, for requests with an id, waits
// for the answer before the next; then it closes stdin and expects exit 0.
// stdout must hold nothing but JSON-RPC messages (logs go to stderr).
func mcpLines(t *testing.T, args []string, requests ...string) (lines []string, stderr string) {
	t.Helper()
	return mcpLinesExtra(t, nil, args, requests...)
}

// mcpLinesExtra is mcpLines with descriptors the daemon inherits from its
// launcher (fd 3 on), not close-on-exec, as a careless launcher leaves them.
func mcpLinesExtra(t *testing.T, extra []*os.File, args []string, requests ...string) (lines []string, stderr string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.ExtraFiles = extra
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errb := &syncbuf.Buffer{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := make(chan string)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			out <- sc.Text()
		}
	}()
	for _, req := range requests {
		if _, err := io.WriteString(stdin, req+"\n"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(req, `"id":`) {
			continue // a notification gets no answer
		}
		select {
		case l, ok := <-out:
			if !ok {
				t.Fatalf("stdout closed before the answer to %s\n%s", req, errb)
			}
			if !strings.HasPrefix(l, `{"jsonrpc":"2.0"`) {
				t.Errorf("stdout line is not a JSON-RPC message: %q", l)
			}
			lines = append(lines, l)
		case <-time.After(60 * time.Second): // hang guard
			cmd.Process.Kill()
			t.Fatalf("no answer to %s after 60s\n%s", req, errb)
		}
	}
	stdin.Close()
	done := make(chan error, 1)
	go func() {
		for l := range out {
			t.Errorf("unexpected stdout after the last answer: %q", l)
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after stdin closed: %v\n%s", err, errb)
		}
	case <-time.After(60 * time.Second): // hang guard
		cmd.Process.Kill()
		t.Fatalf("still running 60s after stdin closed\n%s", errb)
	}
	return lines, errb.String()
}

const (
	initReq  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	initNote = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	listReq  = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
)

func TestLocalOnlyServesMCPOnStdio(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "hello.txt"), []byte("hi there\n"), 0o644)
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"hello.txt"}}}`
	lines, stderr := mcpLines(t, []string{"daemon", "--rootDir", root, "--local-only", "--isolation", "software", "--shell", "auto"},
		initReq, initNote, listReq, call)
	if len(lines) != 3 {
		t.Fatalf("want 3 responses, got %d: %q\nstderr:\n%s", len(lines), lines, stderr)
	}
	if !strings.Contains(lines[1], `"name":"exec"`) || !strings.Contains(lines[1], `"name":"read_text_file"`) {
		t.Errorf("tools/list lacks exec or read_text_file: %s", lines[1])
	}
	if !strings.Contains(lines[2], `hi there`) {
		t.Errorf("read_text_file: %s", lines[2])
	}
	if !strings.Contains(stderr, "serving MCP over stdio") {
		t.Errorf("stdio mode not logged on stderr:\n%s", stderr)
	}
}

func TestMemoryBackendTopLevelForm(t *testing.T) {
	write := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a/b.txt","content":"in memory"}}}`
	read := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"a/b.txt"}}}`
	dir := filepath.Join(t.TempDir(), "never-created")
	lines, stderr := mcpLines(t, []string{"--backend", "memory", "--rootDir", dir}, initReq, initNote, listReq, write, read)
	if len(lines) != 4 {
		t.Fatalf("want 4 responses, got %d: %q\nstderr:\n%s", len(lines), lines, stderr)
	}
	if strings.Contains(lines[1], `"name":"exec"`) || !strings.Contains(lines[1], `"name":"write_file"`) {
		t.Errorf("memory tools/list: want file tools and no exec: %s", lines[1])
	}
	if !strings.Contains(lines[3], "in memory") {
		t.Errorf("read back: %s", lines[3])
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("memory backend created %s on disk", dir)
	}
}

// A first SIGTERM waits for in-flight work; a second one exits at once.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	p := startDaemon(t, "--root", t.TempDir(), "--shutdown-timeout", "5m")
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 600"}}}`
	go func() {
		req, _ := http.NewRequest(http.MethodPost, p.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	// The exec call in flight, as /metrics counts it: a word of the log
	// would match other lines (the start-up log names the executable).
	waitFor(t, func() bool { return inFlight(p.url) })
	p.cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, func() bool { return strings.Contains(p.stderr.String(), "shutting down") })
	select {
	case <-p.done:
		t.Fatalf("exited on the first signal with a request in flight and a 5m grace period:\n%s", p.stderr)
	case <-time.After(200 * time.Millisecond):
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second): // hang guard
		t.Fatalf("still running 30s after the second signal:\n%s", p.stderr)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit code %d after a second signal; want 130", code)
	}
	if !strings.Contains(p.stderr.String(), "second signal") {
		t.Errorf("second signal not logged:\n%s", p.stderr)
	}
}

// inFlight reports whether the daemon at url is answering a request now.
func inFlight(url string) bool {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	// /metrics itself is one in-flight request.
	return strings.Contains(string(b), "agentbe_http_requests_in_flight 2")
}

// metricsText is the daemon's /metrics page at url.
func metricsText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 3000; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not met after 30s")
}

// The daemon's GOMAXPROCS: --max-procs wins, then GOMAXPROCS from the
// environment, then auto (half the CPUs, at least 1). Read back from the
// Go collector in /metrics and from the start-up log.
func TestMaxProcs(t *testing.T) {
	// Go's own default (the CPUs this process may use, cgroup limits
	// included) is what "auto" halves; the daemon names it in its log.
	auto := -1
	cases := []struct {
		name string
		env  []string
		args []string
		want int
		why  string
		// walks: the GOMAXPROCS a checkpoint's walk runs on
		// (internal/cpuburst): every CPU under auto, else want.
		walks int
	}{
		{"auto", nil, nil, auto, "why=\"auto: half of the", auto},
		{"environment", []string{"GOMAXPROCS=3"}, nil, 3, `why="GOMAXPROCS in the environment"`, 3},
		{"flag wins", []string{"GOMAXPROCS=3"}, []string{"--max-procs", "2"}, 2, "why=--max-procs", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := startDaemonEnv(t, c.env, append([]string{"--root", t.TempDir()}, c.args...)...)
			if c.want == auto {
				m := regexp.MustCompile(`half of the (\d+) CPUs`).FindStringSubmatch(p.stderr.String())
				if m == nil {
					t.Fatalf("start-up log does not say how many CPUs auto halved:\n%s", p.stderr)
				}
				n, _ := strconv.Atoi(m[1])
				c.want, c.walks = max(1, n/2), n
			}
			body := metricsText(t, p.url)
			want := fmt.Sprintf("\ngo_sched_gomaxprocs_threads %d\n", c.want)
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
			}
			if log := p.stderr.String(); !strings.Contains(log, fmt.Sprintf("gomaxprocs=%d ", c.want)) || !strings.Contains(log, c.why) {
				t.Errorf("start-up log does not say gomaxprocs=%d (%s):\n%s", c.want, c.why, log)
			}
			if log := p.stderr.String(); !strings.Contains(log, fmt.Sprintf(" checkpoint_walks=%d\n", c.walks)) {
				t.Errorf("start-up log does not say checkpoint_walks=%d:\n%s", c.walks, log)
			}
		})
	}
}

// The daemon's GC target: GOGC from the environment wins, else the daemon's
// default (daemon.DefaultGCPercent). Read back from the Go collector in
// /metrics and from the start-up log.
func TestGCPercent(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		want int
		why  string
	}{
		{"default", nil, daemon.DefaultGCPercent, `why="the daemon's default`},
		{"environment", []string{"GOGC=150"}, 150, `why="GOGC in the environment"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := startDaemonEnv(t, c.env, "--root", t.TempDir())
			body := metricsText(t, p.url)
			want := fmt.Sprintf("\ngo_gc_gogc_percent %d\n", c.want)
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
			}
			if log := p.stderr.String(); !strings.Contains(log, fmt.Sprintf("gogc=%d ", c.want)) || !strings.Contains(log, c.why) {
				t.Errorf("start-up log does not say gogc=%d (%s):\n%s", c.want, c.why, log)
			}
		})
	}
}

// TestInheritedDescriptorsDoNotReachCommands: a descriptor the daemon
// inherits from its launcher without close-on-exec must not reach the
// commands it runs, in software mode and under bwrap.
func TestInheritedDescriptorsDoNotReachCommands(t *testing.T) {
	for _, isolation := range []string{"software", "bwrap", "landlock"} {
		t.Run(isolation, func(t *testing.T) {
			if isolation == "bwrap" {
				testenv.Bwrap(t)
			}
			marker, err := os.Create(filepath.Join(t.TempDir(), "inherited-descriptor-marker"))
			if err != nil {
				t.Fatal(err)
			}
			defer marker.Close()
			call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"exec","arguments":{"command":"ls -l /proc/self/fd/"}}}`
			lines, stderr := mcpLinesExtra(t, []*os.File{marker},
				[]string{"daemon", "--rootDir", t.TempDir(), "--local-only", "--isolation", isolation},
				initReq, initNote, call)
			if len(lines) != 2 {
				t.Fatalf("want 2 responses, got %d: %q\nstderr:\n%s", len(lines), lines, stderr)
			}
			if !strings.Contains(lines[1], `/proc/`) || strings.Contains(lines[1], `"isError":true`) {
				t.Fatalf("exec did not list the descriptors: %s", lines[1])
			}
			if strings.Contains(lines[1], "inherited-descriptor-marker") || strings.Contains(lines[1], " 4 -\u003e") {
				t.Errorf("the command inherited the daemon's launcher's descriptor: %s", lines[1])
			}
		})
	}
}

// TestSIGHUPReopensAuditLog is logrotate's sequence against the real binary:
// rename the log, send SIGHUP, and the next call's line lands in a new file
// at the configured path while the renamed one keeps the earlier lines.
func TestSIGHUPReopensAuditLog(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "audit.log")
	p := startDaemon(t, "--rootDir", t.TempDir(), "--audit-log", logPath)
	call := func(file string) {
		t.Helper()
		resp, err := http.Post(p.url+"/execute", "application/json",
			strings.NewReader(fmt.Sprintf(`{"tool_name":"read_text_file","arguments":{"path":%q}}`, file)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	lines := func(path string) string { b, _ := os.ReadFile(path); return string(b) }

	call("before-rotation.txt")
	waitFor(t, func() bool { return strings.Contains(lines(logPath), "before-rotation.txt") })
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(p.stderr.String(), "SIGHUP: audit log reopened") })
	call("after-rotation.txt")
	waitFor(t, func() bool { return strings.Contains(lines(logPath), "after-rotation.txt") })

	if old := lines(logPath + ".1"); !strings.Contains(old, "before-rotation.txt") || strings.Contains(old, "after-rotation.txt") {
		t.Errorf("rotated file:\n%s", old)
	}
	if cur := lines(logPath); strings.Contains(cur, "before-rotation.txt") {
		t.Errorf("new file holds a line from before the rotation:\n%s", cur)
	}
	if p.cmd.ProcessState != nil {
		t.Fatalf("daemon exited on SIGHUP: %s", p.stderr)
	}
}

// TestCheckConfigUpstreams: --check-config reads the --upstreams file and
// names the file, the server and the key of a mistake; a good one passes
// and is echoed.
func TestCheckConfigUpstreams(t *testing.T) {
	root, dir := t.TempDir(), t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"servers":[{"name":"fs","command":"node","args":["${AGENTBE_TEST_ARG}"]}]}`)
	out, errOut, code := run(t, []string{"AGENTBE_TEST_ARG=x"}, "daemon", "--root", root, "--upstreams", good, "--check-config")
	if code != 0 || !strings.Contains(out, `upstreams: "`+good+`"`) {
		t.Errorf("good file: exit %d\n%s%s", code, out, errOut)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"servers":[{"name":"fs","comand":"node"}]}`, `servers[0] ("fs"): "comand": unknown key; did you mean "command"?`},
		{`{"servers":[{"name":"fs","command":"node","args":["${NOT_SET_ANYWHERE}"]}]}`, `servers[0] ("fs"): "args[0]": ${NOT_SET_ANYWHERE} is not set in the daemon's environment`},
	} {
		bad := write("bad.json", tc.body)
		_, errOut, code := run(t, nil, "daemon", "--root", root, "--upstreams", bad, "--check-config")
		if code != 1 || !strings.Contains(errOut, "agent-backend: invalid configuration: --upstreams: "+bad+": "+tc.want) {
			t.Errorf("exit %d, stderr %q; want it to contain %q", code, errOut, tc.want)
		}
	}
	_, errOut, code = run(t, nil, "daemon", "--root", root, "--upstreams", filepath.Join(dir, "missing.json"), "--check-config")
	if code != 1 || !strings.Contains(errOut, "--upstreams: "+filepath.Join(dir, "missing.json")+": no such file or directory") {
		t.Errorf("missing file: exit %d, stderr %q", code, errOut)
	}
}

// TestSiteServe runs `site serve` on the example site the way a user does:
// a page by GET, a tool by POST, a clear error without README.md, exit 0 on
// SIGTERM.
func TestSiteServe(t *testing.T) {
	if _, errOut, code := run(t, nil, "site", "serve", t.TempDir()); code != 1 || !strings.Contains(errOut, "has no README.md") {
		t.Errorf("a directory without README.md: exit %d, %q", code, errOut)
	}
	port := freePort(t)
	siteDir := t.TempDir()
	if err := os.CopyFS(siteDir, os.DirFS("../../examples/site")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "site", "serve", siteDir, "--port", fmt.Sprint(port), "--isolation", "software", "--timeout", "5")
	var logs syncbuf.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitFor(t, func() bool {
		resp, err := http.Get(url + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	resp, err := http.Get(url + "/guide")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "# Using this site") {
		t.Errorf("GET /guide: %d %s", resp.StatusCode, body)
	}
	resp, err = http.Post(url+"/data", "application/json", strings.NewReader(`{"command":["grep","-c","IN","cities.csv"]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"stdout":"1\n","stderr":"","returncode":0}` {
		t.Errorf("POST /data: %d %s", resp.StatusCode, body)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, logs.String())
	}
}

// TestExtCommands: `ext test` passes on the examples and fails with the
// failing assertion named on a broken test; `ext check` reports every
// error with file:line.
func TestExtCommands(t *testing.T) {
	out, errOut, code := run(t, nil, "ext", "test", "../../examples/extensions")
	if code != 0 || !strings.HasPrefix(out, "ok\t../../examples/extensions\t11 tests") {
		t.Errorf("ext test on the examples: exit %d\n%s%s", code, out, errOut)
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../examples/extensions")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "textstats_test.star"), []byte("load(\"textstats.star\", \"stats\")\n\ndef test_wrong():\n    testing.eq(stats({\"text\": \"a b\"})[\"words\"], 3)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code = run(t, nil, "ext", "test", dir, "--run", "test_wrong")
	if code != 1 || !strings.Contains(out, "--- FAIL: textstats_test.star:test_wrong") || !strings.Contains(out, "textstats_test.star:4: eq: 2 != 3") {
		t.Errorf("a failing test: exit %d\n%s", code, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.star"), []byte("def describe_extension():\n    return Extension(name = 'broken', tools = [Tool(name = 'x')])\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "syntax.star"), []byte("x = 1\ndef f(:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = run(t, nil, "ext", "check", dir)
	if code != 1 || !strings.Contains(errOut, `broken.star: describe_extension(): tool "x" has no handler`) || !strings.Contains(errOut, "syntax.star:2:") {
		t.Errorf("ext check: exit %d\n%s", code, errOut)
	}
}

// TestReferenceFlagsExplained: the npm daemon's flags and commands this one
// does not take fail with what to use instead, never "unknown flag".
func TestReferenceFlagsExplained(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"daemon", "--rootDir", t.TempDir(), "--ssh-users", "alice,bob"}, "--ssh-users is a flag of the npm daemon that this one does not take: this daemon creates no system users"},
		{[]string{"daemon", "--rootDir", t.TempDir(), "--ssh-public-key", "ssh-ed25519 AAAA"}, "--ssh-public-key is a flag of the npm daemon"},
		{[]string{"start-docker", "--build"}, "start-docker is a command of the npm daemon that this one does not provide"},
		{[]string{"stop-docker"}, "stop-docker is a command of the npm daemon"},
	} {
		_, errOut, code := run(t, nil, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "unknown") {
			t.Errorf("%v: exit %d, %q", tc.args, code, errOut)
		}
	}
}

// TestHealthFlags: --port builds the loopback URL; --insecure and --ca take
// an https daemon with a certificate of its own; bad values are named.
func TestHealthFlags(t *testing.T) {
	p := startDaemon(t, "--rootDir", t.TempDir())
	port := p.url[strings.LastIndex(p.url, ":")+1:]
	if out, errOut, code := run(t, nil, "health", "--port", port); code != 0 || !strings.Contains(out, `"status":"ok"`) {
		t.Errorf("--port: exit %d %q %q", code, out, errOut)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"status":"ok"}`)) }))
	defer srv.Close()
	if _, errOut, code := run(t, nil, "health", "--url", srv.URL+"/health"); code != 1 || !strings.Contains(errOut, "certificate") ||
		!strings.Contains(errOut, "--ca FILE") || !strings.Contains(errOut, "--insecure") {
		t.Errorf("a self-signed daemon without --ca: exit %d %q; want the error to name --ca and --insecure", code, errOut)
	}
	// --port (or an http:// URL) against a daemon serving TLS: the answer
	// names the https URL to probe instead.
	plain := "http://" + strings.TrimPrefix(srv.URL, "https://") + "/health"
	if _, errOut, code := run(t, nil, "health", "--url", plain); code != 1 || !strings.Contains(errOut, "the daemon serves HTTPS (--tls-cert): probe --url "+srv.URL+"/health") {
		t.Errorf("http:// to a TLS daemon: exit %d %q; want it to name the https URL", code, errOut)
	}
	if out, errOut, code := run(t, nil, "health", "--url", srv.URL+"/health", "--insecure"); code != 0 || !strings.Contains(out, "ok") {
		t.Errorf("--insecure: exit %d %q %q", code, out, errOut)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644)
	if out, errOut, code := run(t, nil, "health", "--url", srv.URL+"/health", "--ca", caFile); code != 0 || !strings.Contains(out, "ok") {
		t.Errorf("--ca: exit %d %q %q", code, out, errOut)
	}
	none := filepath.Join(t.TempDir(), "none.pem")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--port", "70000"}, "--port 70000: want 1-65535"},
		{[]string{"--port", "1", "--url", "http://x/health"}, "--port and --url go separately"},
		{[]string{"--url", srv.URL, "--ca", none}, "--ca " + none + ": no such file"},
		{[]string{"--url", srv.URL, "--ca", filepath.Join("main_test.go")}, "no PEM certificate"},
	} {
		if _, errOut, code := run(t, nil, append([]string{"health"}, tc.args...)...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d %q", tc.args, code, errOut)
		}
	}
}

// TestCheckConfigPreflight: --check-config also checks that the bind
// address resolves, that the port can be bound, and that the host key can
// be created; each failure names the flag.
func TestCheckConfigPreflight(t *testing.T) {
	root := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	// A file where a directory should be: nothing can be created below it,
	// even by root.
	unwritable := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(unwritable, nil, 0o600)
	badKeys := filepath.Join(t.TempDir(), "authorized_keys")
	os.WriteFile(badKeys, []byte("# keys\nssh-ed25519 not-base64\n"), 0o600)
	badCA := filepath.Join(t.TempDir(), "ca.pub")
	os.WriteFile(badCA, []byte(`cert-authority ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGgsVnv2VQ1yjzNyn8UUvakqHJRu6VzdtcCSuFyZ2P2F ca`+"\n"), 0o600)
	// Host keys the start would refuse: not a key, writable by others, a
	// FIFO (which a blocking open would wait on forever).
	notKey := filepath.Join(t.TempDir(), "not-a-key")
	os.WriteFile(notKey, []byte("garbage\n"), 0o600)
	_, goodKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	pemKey, err := ssh.MarshalPrivateKey(goodKey, "")
	if err != nil {
		t.Fatal(err)
	}
	writableKey := filepath.Join(t.TempDir(), "writable-key")
	os.WriteFile(writableKey, pem.EncodeToMemory(pemKey), 0o600)
	os.Chmod(writableKey, 0o666)
	fifoKey := filepath.Join(t.TempDir(), "fifo-key")
	if err := syscall.Mkfifo(fifoKey, 0o600); err != nil {
		t.Fatal(err)
	}
	free := strconv.Itoa(freePort(t))
	sshFree := "127.0.0.1:" + strconv.Itoa(freePort(t))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--port", busy}, "--port " + busy + ": 127.0.0.1:" + busy + " is in use: another process listens there"},
		{[]string{"--port", free, "--ssh-host-key", notKey}, "--ssh-host-key " + notKey + ": not a private key the daemon can use"},
		{[]string{"--port", free, "--ssh-host-key", writableKey}, "--ssh-host-key " + writableKey + ": "},
		{[]string{"--port", free, "--ssh-host-key", fifoKey}, "--ssh-host-key " + fifoKey + ": not a regular file"},
		{[]string{"--bind", "no-such-host.invalid", "--insecure-no-auth"}, "--bind no-such-host.invalid does not resolve"},
		{[]string{"--ssh-host-key", filepath.Join(unwritable, "sub", "key")}, "--ssh-host-key " + filepath.Join(unwritable, "sub", "key") + " does not exist and cannot be created in " + unwritable + ":"},
		{[]string{"--port", free, "--ssh-listen", "127.0.0.1:" + busy, "--ssh-password-hash-file", unwritable}, "--ssh-listen: 127.0.0.1:" + busy + " is in use: another process listens there"},
		{[]string{"--port", free, "--ssh-listen", sshFree, "--ssh-authorized-keys", badKeys}, "--ssh-authorized-keys: " + badKeys + ":2: "},
		{[]string{"--port", free, "--ssh-listen", sshFree, "--ssh-trusted-user-ca-keys", badCA}, "--ssh-trusted-user-ca-keys: " + badCA + ":1: options (cert-authority) are not allowed on a CA key"},
		{[]string{"--port", free, "--ssh-listen", sshFree, "--ssh-password-hash-file", unwritable}, "--ssh-password-hash-file " + unwritable + ": not a bcrypt hash"},
	} {
		_, errOut, code := run(t, nil, append([]string{"daemon", "--root", root, "--check-config"}, tc.args...)...)
		if code != 1 || !strings.Contains(errOut, "agent-backend: invalid configuration: "+tc.want) {
			t.Errorf("%v: exit %d, %q", tc.args, code, errOut)
		}
	}
	if os.Geteuid() != 0 {
		_, errOut, code := run(t, nil, "daemon", "--root", root, "--check-config", "--port", "80")
		if code != 1 || !strings.Contains(errOut, "--port 80: 127.0.0.1:80 needs root or CAP_NET_BIND_SERVICE") {
			t.Errorf("a privileged port: exit %d, %q", code, errOut)
		}
	}
	if out, errOut, code := run(t, nil, "daemon", "--root", root, "--check-config", "--port", strconv.Itoa(freePort(t)), "--ssh-host-key", filepath.Join(t.TempDir(), "k")); code != 0 {
		t.Errorf("a good configuration: exit %d %q %q", code, out, errOut)
	}
	// A usable key passes, and no SSH served (--local-only) means the
	// key is not looked at.
	os.Chmod(writableKey, 0o600)
	if out, errOut, code := run(t, nil, "daemon", "--root", root, "--check-config", "--port", strconv.Itoa(freePort(t)), "--ssh-host-key", writableKey); code != 0 {
		t.Errorf("an existing good host key: exit %d %q %q", code, out, errOut)
	}
	if out, errOut, code := run(t, nil, "daemon", "--root", root, "--check-config", "--local-only", "--ssh-host-key", notKey); code != 0 {
		t.Errorf("--local-only with an unusable host key it does not use: exit %d %q %q", code, out, errOut)
	}
}

// TestMissingSubcommandHint: the no-subcommand form typed at a terminal
// prints what to run and exits 2 instead of waiting for MCP on the
// terminal; spawned with a pipe on stdin (the npm client), it serves MCP
// on stdio.
func TestMissingSubcommandHint(t *testing.T) {
	root := t.TempDir()
	cmd := exec.Command(binary, "--root", root)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var out syncbuf.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&out, tty); close(copied) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second): // a hang guard: without the hint it waits forever
		cmd.Process.Kill()
		t.Fatal("agent-backend --root DIR on a terminal is still waiting")
	}
	if code := cmd.ProcessState.ExitCode(); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	select { // the pty reads EIO once the process and its terminal are gone
	case <-copied:
	case <-time.After(10 * time.Second):
		tty.Close()
		<-copied
	}
	if !strings.Contains(out.String(), "no command given") || !strings.Contains(out.String(), "agent-backend daemon --root DIR") {
		t.Errorf("output %q lacks the hint", out.String())
	}

	// The npm client's spawn: a pipe on stdin, MCP answers.
	spawn := exec.Command(binary, "--root", root)
	spawn.Env = cmd.Env
	spawn.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n")
	got, err := spawn.Output()
	if err != nil || !strings.Contains(string(got), `"serverInfo"`) {
		t.Errorf("the spawned form: %v %q", err, got)
	}
}

// TestStampedBuildDetails: a release build's stamped commit and date are
// what `version` reports (.goreleaser.yaml sets them).
func TestStampedBuildDetails(t *testing.T) {
	defer func(c, d string) { stampedCommit, stampedDate = c, d }(stampedCommit, stampedDate)
	stampedCommit, stampedDate = "0123456789abcdef0123456789abcdef01234567", "2026-11-24T02:51:02Z"
	commit, when, gover := buildDetails()
	if commit != "0123456789ab" || when != "2026-11-24T02:51:02Z" || !strings.HasPrefix(gover, "go1.") {
		t.Errorf("buildDetails() = %q %q %q", commit, when, gover)
	}
}

// TestOperatorFilesInsideWorkspaceRefused: an operator file inside the
// workspace --root (here system.run's policy file, the Starlark extensions'
// directory and the config file itself) fails --check-config and the start,
// with one line naming the flag, the path and the root; the same files
// outside the workspace pass.
func TestOperatorFilesInsideWorkspaceRefused(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	write := func(p, body string) string {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	policyIn := write(filepath.Join(root, "policy.json"), `{}`)
	policyOut := write(filepath.Join(outside, "policy.json"), `{}`)
	extIn, extOut := filepath.Join(root, "ext"), filepath.Join(outside, "ext")
	write(filepath.Join(extIn, "a.star"), "")
	write(filepath.Join(extOut, "a.star"), "")
	confIn := write(filepath.Join(root, "agentbe.yaml"), "root: "+root+"\n")
	confOut := write(filepath.Join(outside, "agentbe.yaml"), "root: "+root+"\n")
	why := "lies inside the workspace --root " + root + ", where the agent can read and change it; keep operator files outside the workspace"
	for _, tc := range []struct {
		args       []string
		flag, path string
	}{
		{[]string{"--root", root, "--exec-approvals", policyIn}, "--exec-approvals", policyIn},
		{[]string{"--root", root, "--extensions", extIn}, "--extensions", extIn},
		{[]string{"--config", confIn}, "--config", confIn},
	} {
		_, errOut, code := run(t, nil, append([]string{"daemon", "--check-config"}, tc.args...)...)
		if want := "agent-backend: invalid configuration: " + tc.flag + " " + tc.path; code != 1 || !strings.HasPrefix(errOut, want) || !strings.Contains(errOut, why) {
			t.Errorf("--check-config %v: exit %d, %q; want exit 1 and %q ... %q", tc.args, code, errOut, want, why)
		}
		// The start is refused the same way (on stdio, so that a daemon
		// that did start would end at once, its stdin being empty).
		_, errOut, code = run(t, nil, append([]string{"daemon", "--local-only"}, tc.args...)...)
		if code != 1 || !strings.Contains(errOut, tc.flag+" "+tc.path) || !strings.Contains(errOut, why) {
			t.Errorf("start %v: exit %d, %q; want exit 1 and %q", tc.args, code, errOut, why)
		}
	}
	for _, args := range [][]string{
		{"--root", root, "--exec-approvals", policyOut},
		{"--root", root, "--extensions", extOut},
		{"--config", confOut},
	} {
		if out, errOut, code := run(t, nil, append([]string{"daemon", "--check-config", "--port", strconv.Itoa(freePort(t))}, args...)...); code != 0 {
			t.Errorf("--check-config %v (outside the workspace): exit %d %q %q", args, code, out, errOut)
		}
	}
}

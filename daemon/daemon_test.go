package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/internal/previewtest"
	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
	"github.com/agentbe/agentbe-daemon/internal/testbin"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"
)

func TestMain(m *testing.M) {
	sandboxexec.Main() // the landlock mode's trampoline: its commands run through this binary
	testenv.OperatorUmask()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		testbin.Cleanup()
		previewtest.Cleanup()
		os.Exit(code)
	}))
}

func testConfig(t testing.TB) config.Config {
	t.Helper()
	c := config.Default()
	c.Root = t.TempDir()
	c.Isolation = "software"
	c.SSHHostKey = t.TempDir() + "/host_key"
	c.ShutdownTimeout = 5 * time.Second
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// running is a daemon serving on a loopback port, stopped by stop().
type running struct {
	d    *Daemon
	url  string
	logs *syncbuf.Buffer
	stop func() error
}

// limiter is the daemon's connection limiter, once Serve has installed it:
// a test can dial the listener before Serve runs (the kernel accepts into
// the backlog), so it must not read the limiter before then.
func (r *running) limiter(t testing.TB) *connLimiter {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if lim := r.d.conns.Load(); lim != nil {
			return lim
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon did not start serving within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func start(t testing.TB, c config.Config, tweak func(*Daemon)) *running {
	t.Helper()
	return startTweaked(t, c, Options{}, tweak)
}

func startWith(t *testing.T, c config.Config, opts Options) *running {
	t.Helper()
	return startTweaked(t, c, opts, nil)
}

func startTweaked(t testing.TB, c config.Config, opts Options, tweak func(*Daemon)) *running {
	t.Helper()
	logs := &syncbuf.Buffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.Version = "9.9.9"
	d, err := New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(d)
	}
	r := serve(t, d)
	r.logs = logs
	return r
}

// serve runs d on a loopback port until the test ends (or stop).
func serve(t testing.TB, d *Daemon) *running {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, ln) }()
	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			stopErr = <-done
			if err := d.Close(); err != nil && stopErr == nil {
				stopErr = err
			}
		})
		return stopErr
	}
	t.Cleanup(func() { _ = stop() })
	return &running{d: d, url: "http://" + ln.Addr().String(), stop: stop}
}

func get(t testing.TB, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// send makes one request with a JSON body and the headers of hdr ("Host"
// sets the request's host), and returns the status and the body.
func send(t testing.TB, method, url, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// bearer is the Authorization header of token ("" for none).
func bearer(token string) map[string]string {
	if token == "" {
		return map[string]string{}
	}
	return map[string]string{"Authorization": "Bearer " + token}
}

// executeTool calls tool over POST /execute without a token and returns
// its output decoded as JSON, failing the test unless it succeeded.
func executeTool(t *testing.T, url, tool, args string) map[string]any {
	t.Helper()
	_, b := send(t, http.MethodPost, url+"/execute", `{"tool_name":"`+tool+`","arguments":`+args+`}`, nil)
	var out map[string]any
	json.Unmarshal([]byte(b), &out)
	if out["status"] != "success" {
		t.Fatalf("%s %s: %s", tool, args, b)
	}
	var res map[string]any
	json.Unmarshal([]byte(out["output"].(string)), &res)
	return res
}

func TestHealth(t *testing.T) {
	c := testConfig(t)
	r := start(t, c, nil)
	code, body := get(t, r.url+"/health")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	var h struct {
		Status        string          `json:"status"`
		Version       string          `json:"version"`
		RootDir       string          `json:"rootDir"`
		Transports    map[string]bool `json:"transports"`
		Isolation     string          `json:"isolation"`
		UptimeSeconds *float64        `json:"uptimeSeconds"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("not JSON: %v: %s", err, body)
	}
	if h.Status != "ok" || h.Version != "9.9.9" || h.RootDir != c.Root {
		t.Errorf("health = %s", body)
	}
	for _, k := range []string{"mcp", "ssh-ws", "ssh"} {
		if _, ok := h.Transports[k]; !ok {
			t.Errorf("transports lacks %q: %s", k, body)
		}
	}
	if h.Transports["ssh"] {
		t.Errorf("conventional ssh reported on: %s", body)
	}
	if h.UptimeSeconds == nil || *h.UptimeSeconds < 0 {
		t.Errorf("uptimeSeconds missing: %s", body)
	}
	// POST is not served on /health.
	resp, err := http.Post(r.url+"/health", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /health = %d, want 405", resp.StatusCode)
	}
}

func TestMetrics(t *testing.T) {
	r := start(t, testConfig(t), nil)
	get(t, r.url+"/health")
	get(t, r.url+"/no-such-thing")
	code, body := get(t, r.url+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	for _, want := range []string{
		`agentbe_http_requests_total{code="200",route="/health"} 1`,
		`agentbe_http_requests_total{code="404",route="other"} 1`,
		`agentbe_http_request_duration_seconds_count{route="/health"} 1`,
		"go_goroutines",
		"process_resident_memory_bytes",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestNotFoundAndStrayUpgrade(t *testing.T) {
	r := start(t, testConfig(t), nil)
	code, body := get(t, r.url+"/nope")
	if code != http.StatusNotFound || !strings.Contains(string(body), `"error":"Not Found"`) {
		t.Errorf("GET /nope = %d %s", code, body)
	}
	req, _ := http.NewRequest(http.MethodGet, r.url+"/elsewhere", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("upgrade on /elsewhere = %d, want 400", resp.StatusCode)
	}
}

func TestPanicIsRecovered(t *testing.T) {
	r := start(t, testConfig(t), func(d *Daemon) {
		mux := http.NewServeMux()
		mux.HandleFunc("/boom", func(http.ResponseWriter, *http.Request) { panic("kaboom") })
		mux.Handle("/", d.handler)
		d.handler = instrument(mux, d.log, d.metrics)
	})
	code, body := get(t, r.url+"/boom")
	if code != http.StatusInternalServerError || !strings.Contains(string(body), "Internal Server Error") {
		t.Errorf("GET /boom = %d %s", code, body)
	}
	if code, _ := get(t, r.url+"/health"); code != http.StatusOK {
		t.Errorf("daemon stopped serving after a panic: /health = %d", code)
	}
	if !strings.Contains(r.logs.String(), "kaboom") || !strings.Contains(r.logs.String(), "handler panicked") {
		t.Errorf("panic not logged:\n%s", r.logs.String())
	}
}

// An in-flight request started before the shutdown completes with its full
// answer; new connections are refused after it.
func TestGracefulShutdownLetsInFlightFinish(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	r := start(t, testConfig(t), func(d *Daemon) {
		mux := http.NewServeMux()
		mux.HandleFunc("/slow", func(w http.ResponseWriter, _ *http.Request) {
			close(entered)
			<-release
			io.WriteString(w, "finished")
		})
		mux.Handle("/", d.handler)
		d.handler = instrument(mux, d.log, d.metrics)
	})
	type result struct {
		code int
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get(r.url + "/slow")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- result{resp.StatusCode, string(b), err}
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- r.stop() }()
	// The listener closes at the start of the shutdown; wait for that before
	// letting the slow request finish, so the test shows both at once.
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
		if err != nil {
			break
		}
		c.Close()
		if i > 500 {
			t.Fatal("listener still accepting after shutdown began")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	res := <-got
	if res.err != nil || res.code != http.StatusOK || res.body != "finished" {
		t.Fatalf("in-flight request: %d %q %v", res.code, res.body, res.err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Serve returned %v after a graceful shutdown", err)
	}
	http.DefaultClient.CloseIdleConnections()
}

// When the grace period ends, remaining requests are cut and Serve returns.
func TestShutdownCutsAfterGrace(t *testing.T) {
	c := testConfig(t)
	c.ShutdownTimeout = 100 * time.Millisecond
	entered := make(chan struct{})
	r := start(t, c, func(d *Daemon) {
		mux := http.NewServeMux()
		mux.HandleFunc("/hang", func(w http.ResponseWriter, req *http.Request) {
			close(entered)
			<-req.Context().Done() // released when the server cuts the connection
		})
		mux.Handle("/", d.handler)
		d.handler = instrument(mux, d.log, d.metrics)
	})
	errc := make(chan error, 1)
	go func() {
		resp, err := http.Get(r.url + "/hang")
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-entered
	if err := r.stop(); err != nil {
		t.Fatalf("Serve after cut: %v", err)
	}
	if err := <-errc; err == nil {
		t.Error("hanging request got an answer; want its connection cut")
	}
	if !strings.Contains(r.logs.String(), "grace period over") {
		t.Errorf("cut not logged:\n%s", r.logs.String())
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestCloseIsIdempotent(t *testing.T) {
	d, err := New(testConfig(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// With --scopePath naming a directory that does not exist yet, exec works
// from the first call: the daemon creates the scope at startup.
func TestStaticScopeIsCreatedForExec(t *testing.T) {
	c := testConfig(t)
	c.ScopePath = "users/u1"
	r := start(t, c, nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"pwd"}}}`
	req, _ := http.NewRequest(http.MethodPost, r.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `"text":"` + c.Root + `/users/u1"`
	if !strings.Contains(string(b), want) || strings.Contains(string(b), `"isError":true`) {
		t.Fatalf("exec pwd in a fresh static scope: %s; want %q", b, want)
	}
	http.DefaultClient.CloseIdleConnections()
}

// mcpExec calls the exec tool over the daemon's /mcp and returns the reply.
func mcpExec(t *testing.T, url, command string) string {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"command": command})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":` + string(args) + `}}`
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The --exec-max-* limits and --allow-commands patterns reach the executor.
func TestExecLimitsAndAllowPatternsReachCommands(t *testing.T) {
	c := testConfig(t)
	c.ExecMaxFileSize = 1024
	c.AllowCommands = []string{`^sudo --version$`}
	r := start(t, c, nil)
	defer http.DefaultClient.CloseIdleConnections()

	if got := mcpExec(t, r.url, "ulimit -f"); !strings.Contains(got, `"text":"1"`) { // bash counts KiB
		t.Errorf("ulimit -f with --exec-max-file-size 1024: %s", got)
	}
	if got := mcpExec(t, r.url, "head -c 4096 /dev/zero > big"); !strings.Contains(got, `"isError":true`) {
		t.Errorf("a 4 KiB write under a 1 KiB file-size limit succeeded: %s", got)
	}
	if got := mcpExec(t, r.url, "wc -c < big"); !strings.Contains(got, `"text":"1024"`) {
		t.Errorf("the file grew past the limit: %s", got)
	}
	// sudo is blocked by default; the allow pattern exempts exactly this
	// command (it then runs, and fails or not as sudo does) and no other.
	if got := mcpExec(t, r.url, "sudo --version"); strings.Contains(got, "Dangerous operation blocked") {
		t.Errorf("allowed command still blocked: %s", got)
	}
	if got := mcpExec(t, r.url, "sudo ls"); !strings.Contains(got, "Dangerous operation blocked") {
		t.Errorf("a command the pattern does not match was not blocked: %s", got)
	}
}

// A bwrap command can reach this daemon's own port only when that is safe:
// with a token (it does not have it), or when asked for explicitly. Served
// without a token, the port would let a scoped command call /mcp
// unauthenticated and read outside its scope, so auto takes the network
// away.
func TestExecNetworkWithoutToken(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap is not installed (CI installs it)")
	}
	tests := []struct {
		network, token, want string
	}{
		{"auto", "", "unreachable"},
		{"auto", "s3cret-token", "reachable"},
		{"true", "", "reachable"},
		{"false", "s3cret-token", "unreachable"},
	}
	for _, tc := range tests {
		t.Run(tc.network+"/token="+fmt.Sprint(tc.token != ""), func(t *testing.T) {
			c := testConfig(t)
			c.Isolation = "bwrap"
			c.BlockDangerous = false // /dev/tcp is the probe here, not the policy's business
			c.ExecNetwork = tc.network
			c.AuthToken = tc.token
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			r := start(t, c, nil)
			port := r.url[strings.LastIndex(r.url, ":")+1:]
			args, _ := json.Marshal(map[string]string{"command": `(exec 3<>/dev/tcp/127.0.0.1/` + port + `) 2>/dev/null && echo reachable || echo unreachable`})
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":` + string(args) + `}}`
			req, _ := http.NewRequest(http.MethodPost, r.url+"/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			http.DefaultClient.CloseIdleConnections()
			if !strings.Contains(string(b), `"text":"`+tc.want+`"`) {
				t.Fatalf("--exec-network=%s, token %v: %s; want %s", tc.network, tc.token != "", b, tc.want)
			}
		})
	}
}

// Where bwrap cannot make a private network namespace (gVisor,
// user.max_net_namespaces=0), auto keeps bwrap with the host's network
// rather than falling back to software mode, and says so; software mode
// without a token warns that commands can call the port.
func TestExecNetworkAutoKeepsBwrap(t *testing.T) {
	real, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bwrap is not installed (CI installs it)")
	}
	dir := t.TempDir()
	fake := "#!/bin/sh\n" +
		"case \"$1\" in --help|--version) exec " + real + " \"$@\";; esac\n" +
		"for a; do [ \"$a\" = --share-net ] && exec " + real + " \"$@\"; done\n" +
		"echo 'bwrap: loopback: Failed RTM_NEWADDR: Operation not supported' >&2; exit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "bwrap"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))

	c := testConfig(t)
	c.Isolation = "auto"
	r := start(t, c, nil)
	if got := r.d.w.exec.Mode(); got != "bwrap" {
		t.Fatalf("isolation %s; want bwrap with the host's network\n%s", got, r.logs.String())
	}
	if !strings.Contains(r.logs.String(), "commands share the host's network") {
		t.Fatalf("no warning that commands share the network:\n%s", r.logs.String())
	}

	c = testConfig(t) // software
	r = start(t, c, nil)
	if !strings.Contains(r.logs.String(), "commands are host processes and can call this daemon's port") {
		t.Fatalf("software mode without a token gave no warning:\n%s", r.logs.String())
	}
}

// TestFsyncFlag: --fsync reaches the workspace: /health says so, and a
// write over MCP lands (fsops's TestFsyncSyncsEveryChange counts the
// syncs a durable workspace makes; this checks the daemon builds one).
func TestFsyncFlag(t *testing.T) {
	for _, on := range []bool{false, true} {
		c := testConfig(t)
		c.Fsync = on
		r := start(t, c, nil)
		_, body := get(t, r.url+"/health")
		var h struct {
			Fsync *bool `json:"fsync"`
		}
		if err := json.Unmarshal(body, &h); err != nil || h.Fsync == nil || *h.Fsync != on {
			t.Fatalf("--fsync=%v: health %s", on, body)
		}
		if code, out := mcpCall(t, r.url, "write_file", `{"path":"d/f.txt","content":"durable"}`); code != http.StatusOK || strings.Contains(out, `"isError":true`) {
			t.Fatalf("--fsync=%v: write_file: %d %s", on, code, out)
		}
		if b, err := os.ReadFile(filepath.Join(c.Root, "d/f.txt")); err != nil || string(b) != "durable" {
			t.Fatalf("--fsync=%v: file %q, %v", on, b, err)
		}
	}
}

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/registry"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

var fastTiming = timing{
	backoffBase:  50 * time.Millisecond,
	backoffMax:   200 * time.Millisecond,
	resetAfter:   time.Minute,
	startTimeout: 20 * time.Second,
	pingInterval: 100 * time.Millisecond,
	pingTimeout:  2 * time.Second,
	stopGrace:    2 * time.Second,
}

// testMaxMessage, when set, is the started provider's message limit.
var testMaxMessage int64

type fixture struct {
	p    *Provider
	reg  *registry.Registry
	ws   fsops.Workspace
	root string
	mark string // a value unique to this test's upstream processes
}

// start runs one test upstream "t" in mode, under isolation iso.
func start(t *testing.T, mode string, iso sandbox.Mode, mod func(*Server), tm timing) *fixture {
	t.Helper()
	if iso == sandbox.ModeBwrap {
		testenv.Bwrap(t)
	}
	root := t.TempDir()
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	mark := fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano())
	sc := Server{Name: "t", Command: testBinary(t),
		Env:     map[string]string{"AGENTBE_TEST_UPSTREAM": mode, "AGENTBE_TEST_MARK": mark},
		PassEnv: []string{"PASSED"}, Block: []string{"secret_tool"}}
	if mod != nil {
		mod(&sc)
	}
	cfg := &Config{Servers: []Server{sc}}
	raw, _ := json.Marshal(cfg)
	cfg, err = ParseConfig("test.json", raw, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(registry.Options{})
	p, err := Start(Options{Config: cfg, Workspace: ws, Registry: reg, timing: &tm, CacheDir: t.TempDir(), maxMessage: testMaxMessage,
		Sandbox: sandbox.Config{Mode: iso, WorkspaceRoot: ws.Root()},
		Getenv: func(k string) (string, bool) {
			if k == "PASSED" {
				return "passed-value", true
			}
			return "should-not-pass", true
		}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{p: p, reg: reg, ws: ws, root: ws.Root(), mark: mark}
	t.Cleanup(func() {
		p.Close()
		f.assertNoProcess(t)
	})
	return f
}

// assertNoProcess checks /proc for any process carrying this test's mark.
func (f *fixture) assertNoProcess(t *testing.T) {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains(string(env), "AGENTBE_TEST_MARK="+f.mark) {
			st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			t.Errorf("upstream process %s still there after Close: %s", e.Name(), st)
		}
	}
}

func (f *fixture) health(t *testing.T) Health {
	t.Helper()
	h := f.p.Health()
	if len(h) != 1 {
		t.Fatalf("health: %+v", h)
	}
	return h[0]
}

func (f *fixture) waitFor(t *testing.T, what string, cond func(Health) bool) Health {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang guard, not a speed check
	for {
		h := f.health(t)
		if cond(h) {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s; health: %+v", what, h)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (f *fixture) running(t *testing.T) Health {
	return f.waitFor(t, "running", func(h Health) bool { return h.State == StateRunning })
}

func (f *fixture) call(t *testing.T, ws fsops.Workspace, tool, args string) (text string, isErr bool, code errcode.Code) {
	t.Helper()
	if ws == nil {
		ws = f.ws
	}
	res, err := f.reg.Call(context.Background(), tool, registry.Call{Args: json.RawMessage(args), Workspace: ws, Face: "rest"})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError, registry.Code(res)
}

func (f *fixture) recorded() string {
	b, _ := os.ReadFile(filepath.Join(f.root, ".upstream-record"))
	return string(b)
}

// TestDiscoveryAndRouting, in each isolation mode: the upstream's tools
// appear as t__tool (filtered), calls reach it with their arguments and its
// results come back unchanged; it runs in the workspace with HOME there,
// and only passEnv'd variables.
func TestDiscoveryAndRouting(t *testing.T) {
	for _, iso := range []sandbox.Mode{sandbox.ModeBwrap, sandbox.ModeSoftware, sandbox.ModeNone} {
		t.Run(string(iso), func(t *testing.T) {
			f := start(t, "serve", iso, nil, fastTiming)
			h := f.running(t)
			if h.PID == 0 || h.Tools != 11 {
				t.Errorf("health %+v; want a pid and 11 tools (of 12: secret_tool filtered out)", h)
			}
			tl, ok := f.reg.Lookup("t__echo")
			if !ok || tl.Description != "echoes" || tl.Annotations == nil || !tl.Annotations.ReadOnlyHint {
				t.Errorf("t__echo: %+v %v", tl, ok)
			}
			if _, ok := f.reg.Lookup("t__secret_tool"); ok {
				t.Error("the blocked tool is served")
			}
			if txt, isErr, _ := f.call(t, nil, "t__echo", `{"text":"héllo"}`); isErr || txt != "héllo" {
				t.Errorf("echo: %q %v", txt, isErr)
			}
			if err := os.WriteFile(filepath.Join(f.root, "a.txt"), []byte("content"), 0o644); err != nil {
				t.Fatal(err)
			}
			if txt, isErr, _ := f.call(t, nil, "t__read", `{"path":"a.txt"}`); isErr || txt != "content" {
				t.Errorf("read: %q %v", txt, isErr)
			}
			txt, _, _ := f.call(t, nil, "t__whoami", `{}`)
			// (The MCP root is checked with server-filesystem, which asks
			// for it; a go-sdk server on protocol 2026-07-28 may not.)
			want := fmt.Sprintf("cwd=%s home=%s passed=passed-value secret=", f.root, f.root)
			if txt != want {
				t.Errorf("whoami:\n got %s\nwant %s", txt, want)
			}
			if prov := f.reg.Providers(); len(prov) != 1 || prov[0].Name != "upstream:t" || prov[0].State != "ready" || prov[0].Tools != 11 {
				t.Errorf("providers: %+v", prov)
			}
		})
	}
}

// TestPathEscapesNeverReachTheUpstream: escaping paths are refused with
// PATH_ESCAPE_ATTEMPT and the upstream records none of them.
func TestPathEscapesNeverReachTheUpstream(t *testing.T) {
	f := start(t, "serve", sandbox.ModeSoftware, nil, fastTiming)
	f.running(t)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(f.root, "link-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(f.root, "scope"), 0o755); err != nil {
		t.Fatal(err)
	}
	scope, err := f.ws.Scope("scope")
	if err != nil {
		t.Fatal(err)
	}
	defer scope.Close()
	for _, tc := range []struct {
		name string
		ws   fsops.Workspace
		path string
	}{
		{"absolute", nil, "/etc/passwd"},
		{"dot-dot", nil, "../../etc/passwd"},
		{"symlink", nil, "link-out/x"},
		{"NUL", nil, "a\u0000b"},
		{"outside the caller's scope", scope, "a.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, _ := json.Marshal(map[string]string{"path": tc.path})
			txt, isErr, code := f.call(t, tc.ws, "t__read", string(args))
			if !isErr || code != errcode.PathEscapeAttempt {
				t.Fatalf("got %q isError=%v code=%s; want a PATH_ESCAPE_ATTEMPT", txt, isErr, code)
			}
		})
	}
	if txt, isErr, _ := f.call(t, scope, "t__read", `{"path":"scope/in.txt"}`); !isErr || strings.Contains(txt, "PATH") {
		t.Logf("a path inside the scope passes the check (the upstream answers): %q", txt)
	}
	if rec := f.recorded(); strings.Contains(rec, "read /etc") || strings.Contains(rec, "link-out") || strings.Contains(rec, "read a.txt") {
		t.Errorf("the upstream saw a refused call:\n%s", rec)
	}
	if !strings.Contains(f.recorded(), "read scope/in.txt") {
		t.Errorf("the allowed call did not reach the upstream:\n%s", f.recorded())
	}
}

// TestCrashRestartsAndToolsComeBack: a crash is seen at once, calls get
// "unavailable (restarting, attempt k)" meanwhile, and the tools work again.
func TestCrashRestartsAndToolsComeBack(t *testing.T) {
	tm := fastTiming
	tm.backoffBase = 700 * time.Millisecond
	tm.backoffMax = 700 * time.Millisecond
	f := start(t, "serve", sandbox.ModeSoftware, nil, tm)
	first := f.running(t)
	var changes atomic.Int32
	unsub := f.reg.Subscribe(func() { changes.Add(1) })
	defer unsub()
	if _, isErr, _ := f.call(t, nil, "t__crash", `{}`); !isErr {
		t.Error("crash: no error")
	}
	f.waitFor(t, "restarting", func(h Health) bool { return h.State == StateRestarting })
	txt, isErr, code := f.call(t, nil, "t__echo", `{"text":"x"}`)
	if !isErr || code != errcode.ConnectionClosed || !strings.Contains(txt, "server t is unavailable (restarting, attempt 1 of 5)") {
		t.Errorf("during the restart: %q %v %s", txt, isErr, code)
	}
	h := f.running(t)
	if h.Restarts != 1 || h.PID == first.PID || !strings.Contains(h.LastError, "exited with status 3") || !strings.Contains(h.LastError, "crashing on request") {
		t.Errorf("after the restart: %+v", h)
	}
	if txt, isErr, _ := f.call(t, nil, "t__echo", `{"text":"back"}`); isErr || txt != "back" {
		t.Errorf("after the restart: %q %v", txt, isErr)
	}
	// The restarted server's tools were set again: the faces tell their
	// clients (notifications/tools/list_changed) to list them anew.
	if changes.Load() == 0 {
		t.Error("no registry change after the restart")
	}
}

// TestWedgedServerKilledAndRestarted: a stopped process (SIGSTOP) answers no
// ping; it is killed and restarted.
func TestWedgedServerKilledAndRestarted(t *testing.T) {
	tm := fastTiming
	tm.pingTimeout = 300 * time.Millisecond
	f := start(t, "serve", sandbox.ModeSoftware, nil, tm)
	first := f.running(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	f.reg.Call(ctx, "t__wedge", registry.Call{Args: json.RawMessage(`{}`), Workspace: f.ws})
	h := f.waitFor(t, "a restart", func(h Health) bool { return h.State == StateRunning && h.Restarts == 1 })
	if h.PID == first.PID || !strings.Contains(h.LastError, "no answer to ping") {
		t.Errorf("after the restart: %+v", h)
	}
}

// TestRepeatedFailuresEndFailed: a server that cannot start is retried
// maxRetries times, then failed, with its stderr in last_error and its
// provider failed in the registry.
func TestRepeatedFailuresEndFailed(t *testing.T) {
	f := start(t, "crash-at-start", sandbox.ModeSoftware, func(s *Server) { s.Restart.MaxRetries = 2 }, fastTiming)
	h := f.waitFor(t, "failed", func(h Health) bool { return h.State == StateFailed })
	if h.Restarts != 2 || !strings.Contains(h.LastError, "3 failures in a row") || !strings.Contains(h.LastError, "cannot start (test upstream told to fail)") {
		t.Errorf("health: %+v", h)
	}
	if prov := f.reg.Providers(); len(prov) != 1 || prov[0].State != "failed" || prov[0].Tools != 0 {
		t.Errorf("providers: %+v", prov)
	}
}

// TestCleanExitStops: with the default policy a server that exits 0 is
// stopped, not restarted.
func TestCleanExitStops(t *testing.T) {
	f := start(t, "serve", sandbox.ModeSoftware, nil, fastTiming)
	f.running(t)
	f.call(t, nil, "t__quit", `{}`)
	h := f.waitFor(t, "stopped", func(h Health) bool { return h.State == StateStopped })
	if h.Restarts != 0 {
		t.Errorf("health: %+v", h)
	}
}

// TestServerTimeoutCancelsTheCall: past the server's timeout the call ends
// with an error naming it, and the upstream hears notifications/cancelled.
func TestServerTimeoutCancelsTheCall(t *testing.T) {
	f := start(t, "serve", sandbox.ModeSoftware, func(s *Server) { s.Timeout = Duration(200 * time.Millisecond) }, fastTiming)
	f.running(t)
	txt, isErr, code := f.call(t, nil, "t__sleep", `{"ms":10000}`)
	if !isErr || code != errcode.Timeout || !strings.Contains(txt, "server t: tool sleep timed out after 200ms") {
		t.Errorf("got %q %v %s", txt, isErr, code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(f.recorded(), "cancelled sleep") {
		if time.Now().After(deadline) {
			t.Fatalf("the upstream never saw the cancellation:\n%s", f.recorded())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestListChangedRelists: a tool the upstream adds at run time appears in
// the registry (whose subscribers, the faces, send list_changed).
func TestListChangedRelists(t *testing.T) {
	f := start(t, "serve", sandbox.ModeSoftware, nil, fastTiming)
	f.running(t)
	var changes atomic.Int32
	cancel := f.reg.Subscribe(func() { changes.Add(1) })
	defer cancel()
	f.call(t, nil, "t__add_tool", `{}`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := f.reg.Lookup("t__added"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("t__added never appeared")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if changes.Load() == 0 {
		t.Error("no registry change notified")
	}
	if txt, _, _ := f.call(t, nil, "t__added", `{}`); txt != "added works" {
		t.Errorf("added: %q", txt)
	}
}

// TestCloseLeavesNoProcess: Close ends the server and its tools leave.
func TestCloseLeavesNoProcess(t *testing.T) {
	f := start(t, "serve", sandbox.ModeBwrap, nil, fastTiming)
	f.running(t)
	f.p.Close()
	f.assertNoProcess(t)
	if _, ok := f.reg.Lookup("t__echo"); ok {
		t.Error("tools still served after Close")
	}
	if h := f.health(t); h.State != StateStopped {
		t.Errorf("health after Close: %+v", h)
	}
}

// TestResultCache: with cache.ttl, results of read-only idempotent tools
// are served from the cache (same arguments in any key order), others never;
// entries expire; a restart empties it.
func TestResultCache(t *testing.T) {
	f := start(t, "serve", sandbox.ModeSoftware, func(s *Server) { s.Cache = Cache{TTL: Duration(400 * time.Millisecond), MaxEntries: 2} }, fastTiming)
	f.running(t)
	call := func(tool, args string) string { txt, _, _ := f.call(t, nil, tool, args); return txt }
	first := call("t__count", `{"key":"a"}`)
	if again := call("t__count", ` { "key" : "a" } `); again != first {
		t.Errorf("cacheable tool called again: %q then %q", first, again)
	}
	if live1, live2 := call("t__count_live", `{"key":"a"}`), call("t__count_live", `{"key":"a"}`); live1 == live2 {
		t.Errorf("a tool not annotated idempotent was cached: %q", live1)
	}
	// Capacity 2: b and c push a out.
	call("t__count", `{"key":"b"}`)
	call("t__count", `{"key":"c"}`)
	if again := call("t__count", `{"key":"a"}`); again == first {
		t.Errorf("the oldest entry outlived the cap: %q", again)
	}
	cached := call("t__count", `{"key":"a"}`)
	time.Sleep(500 * time.Millisecond) // past the TTL
	if again := call("t__count", `{"key":"a"}`); again == cached {
		t.Errorf("an expired entry was served: %q", again)
	}
}

// TestOversizedMessageKillsTheServer: a server whose answer is larger than
// the message limit is killed and restarted, the caller gets an error, and
// the reason is in last_error; answers under the limit go through.
func TestOversizedMessageKillsTheServer(t *testing.T) {
	testMaxMessage = 64 << 10
	defer func() { testMaxMessage = 0 }()
	f := start(t, "serve", sandbox.ModeSoftware, nil, fastTiming)
	first := f.running(t)
	if txt, isErr, _ := f.call(t, nil, "t__big", `{"n":1000}`); isErr || len(txt) != 1000 {
		t.Fatalf("a small answer: %d bytes, %v", len(txt), isErr)
	}
	if txt, isErr, _ := f.call(t, nil, "t__big", `{"n":1000000}`); !isErr {
		t.Fatalf("an answer over the limit came through: %d bytes", len(txt))
	}
	h := f.waitFor(t, "the restart", func(h Health) bool { return h.State == StateRunning && h.PID != 0 && h.PID != first.PID })
	if !strings.Contains(h.LastError, "sent a message over 65536 bytes") || h.Restarts != 1 {
		t.Fatalf("health after the oversized answer: %+v", h)
	}
}

func TestMessageLimitReader(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int64
		fail bool
	}{
		{"abc\ndef\n", 3, false},
		{"abcd\n", 3, true},
		{"ab\ncd\nefgh", 3, true},
		{strings.Repeat("x\n", 1000), 1, false},
	} {
		m := &messageLimit{r: io.NopCloser(iotest.OneByteReader(strings.NewReader(tc.in))), max: tc.max, over: make(chan struct{})}
		_, err := io.ReadAll(m)
		if (err != nil) != tc.fail || (tc.fail && !errors.Is(err, errMessageTooLarge)) {
			t.Errorf("%q max %d: %v", tc.in, tc.max, err)
		}
		m = &messageLimit{r: io.NopCloser(strings.NewReader(tc.in)), max: tc.max, over: make(chan struct{})}
		if _, err := io.ReadAll(m); (err != nil) != tc.fail {
			t.Errorf("%q max %d in one read: %v", tc.in, tc.max, err)
		}
	}
}

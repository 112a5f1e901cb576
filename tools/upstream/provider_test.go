package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
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
var testMaxMessage int

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
	return startAt(t, t.TempDir(), mode, iso, mod, tm)
}

// startAt is start with the workspace root given (a test may put files
// there that the upstream reads when it starts).
func startAt(t *testing.T, root, mode string, iso sandbox.Mode, mod func(*Server), tm timing) *fixture {
	t.Helper()
	if iso == sandbox.ModeBwrap {
		testenv.Bwrap(t)
	}
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

// waitRecorded waits until the upstream has recorded text (what it did,
// in .upstream-record); the bound is a hang guard, not a speed check.
func (f *fixture) waitRecorded(t *testing.T, text, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(f.recorded(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("%s:\n%s", what, f.recorded())
		}
		time.Sleep(5 * time.Millisecond)
	}
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
			if h.PID == 0 || h.Tools != 12 {
				t.Errorf("health %+v; want a pid and 12 tools (of 13: secret_tool filtered out)", h)
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
			if prov := f.reg.Providers(); len(prov) != 1 || prov[0].Name != "upstream:t" || prov[0].State != "ready" || prov[0].Tools != 12 {
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
	f.waitRecorded(t, "cancelled sleep", "the upstream never saw the cancellation")
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

// TestAnswersUpToTheLimitGoThrough: with the daemon's own limit (32 MiB), a
// 20 MiB answer (over the go-sdk transport's 16 MiB line cap) comes back
// whole, the session goes on, and the server was neither killed nor
// restarted.
func TestAnswersUpToTheLimitGoThrough(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour // a ping waits behind the large answer: only the transport decides here
	f := start(t, "serve", sandbox.ModeSoftware, slowBigAnswers, tm)
	first := f.running(t)
	if txt, isErr, code := f.call(t, nil, "t__big", `{"n":20971520}`); isErr || len(txt) != 20<<20 {
		t.Fatalf("a 20 MiB answer: %d bytes, isError %v, %s %.200s", len(txt), isErr, code, txt)
	}
	if txt, isErr, _ := f.call(t, nil, "t__echo", `{"text":"after"}`); isErr || txt != "after" {
		t.Fatalf("the call after it: %q %v", txt, isErr)
	}
	if h := f.health(t); h.State != StateRunning || h.PID != first.PID || h.Restarts != 0 {
		t.Errorf("health after a 20 MiB answer: %+v; want the same server running", h)
	}
}

// slowBigAnswers gives the tests of tens of MiB a server timeout far past
// the 30 s default: they judge sizes, and the test server takes that long
// to write such an answer on a loaded 2-core machine under -race.
func slowBigAnswers(s *Server) { s.Timeout = Duration(5 * time.Minute) }

// TestAnswerOverTheLimitFailsOnlyThatCall: a 40 MiB answer (over 32 MiB)
// fails that call with TOO_LARGE naming the limit; the session goes on (the
// same process, no restart, the next call answered), and health says so at
// once.
func TestAnswerOverTheLimitFailsOnlyThatCall(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour // a ping waits behind the large answer: only the transport decides here
	f := start(t, "serve", sandbox.ModeSoftware, slowBigAnswers, tm)
	first := f.running(t)
	txt, isErr, code := f.call(t, nil, "t__big", `{"n":41943040}`)
	if !isErr || code != errcode.TooLarge || !strings.Contains(txt, "server t: tool big: answer over the 32 MiB limit on one upstream message") {
		t.Fatalf("a 40 MiB answer: isError %v, code %s, %.300s", isErr, code, txt)
	}
	if h := f.health(t); h.State != StateRunning || h.PID != first.PID || h.Restarts != 0 {
		t.Errorf("health right after: %+v; want the same server running", h)
	}
	if txt, isErr, _ := f.call(t, nil, "t__echo", `{"text":"after"}`); isErr || txt != "after" {
		t.Fatalf("the call after it: %q %v", txt, isErr)
	}
}

// TestOversizedMessagesCostOnlyThemselves, with a 64 KiB limit and no pings
// (so nothing but the transport can see a problem): an answer under it
// passes; one over it fails its call (TOO_LARGE); an oversized notification
// is dropped and an oversized request from the server answered with an
// error, the session going on; an oversized line that names no call ends
// the connection, and the server is seen down and restarted at once.
func TestOversizedMessagesCostOnlyThemselves(t *testing.T) {
	testMaxMessage = 64 << 10
	defer func() { testMaxMessage = 0 }()
	tm := fastTiming
	tm.pingInterval = time.Hour
	f := start(t, "serve", sandbox.ModeSoftware, nil, tm)
	first := f.running(t)
	if txt, isErr, _ := f.call(t, nil, "t__big", `{"n":60000}`); isErr || len(txt) != 60000 {
		t.Fatalf("an answer under the limit: %d bytes, %v", len(txt), isErr)
	}
	if txt, isErr, code := f.call(t, nil, "t__big", `{"n":1000000}`); !isErr || code != errcode.TooLarge || !strings.Contains(txt, "over the 64 KiB limit") {
		t.Fatalf("an answer over the limit: %v %s %.200s", isErr, code, txt)
	}
	for _, kind := range []string{"notification", "request"} {
		if txt, isErr, _ := f.call(t, nil, "t__flood", `{"kind":"`+kind+`","n":200000}`); isErr || txt != "flooded" {
			t.Fatalf("an oversized %s: %q %v", kind, txt, isErr)
		}
	}
	if h := f.health(t); h.State != StateRunning || h.PID != first.PID || h.Restarts != 0 {
		t.Fatalf("health after messages over the limit: %+v; want the same server running", h)
	}
	f.call(t, nil, "t__flood", `{"kind":"nameless","n":200000}`)
	h := f.waitFor(t, "the restart", func(h Health) bool { return h.Restarts == 1 && h.State == StateRunning && h.PID != first.PID })
	if !strings.Contains(h.LastError, "its connection ended: sent a message over the 64 KiB limit (200037 bytes) that names no call") {
		t.Errorf("last_error: %q", h.LastError)
	}
}

// TestDeadConnectionSeenAtOnce: a server that breaks its stream (a line that
// is not JSON-RPC) while its process runs on is seen down, killed and
// restarted at once, with pings an hour apart (the bound below is a hang
// guard, far under that).
func TestDeadConnectionSeenAtOnce(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour
	f := start(t, "serve", sandbox.ModeSoftware, nil, tm)
	first := f.running(t)
	f.call(t, nil, "t__flood", `{"kind":"garbage"}`)
	h := f.waitFor(t, "the restart", func(h Health) bool { return h.Restarts == 1 && h.State == StateRunning && h.PID != first.PID })
	if !strings.Contains(h.LastError, "its connection ended: sent a line that is not a JSON-RPC message") {
		t.Errorf("last_error: %q", h.LastError)
	}
	if txt, isErr, _ := f.call(t, nil, "t__echo", `{"text":"back"}`); isErr || txt != "back" {
		t.Errorf("after the restart: %q %v", txt, isErr)
	}
}

// TestClosedStdoutSeenAtOnce: a server that closes its stdout and runs on
// (its answer never comes) is seen down, killed and restarted at once, with
// pings an hour apart: the sandbox says when the process's side of the
// stream ended (sandbox.OutputEnder), and the transport reads its end. In
// software mode: under bwrap, bwrap itself holds the stream until the
// process exits, and the ping finds it.
func TestClosedStdoutSeenAtOnce(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour
	f := start(t, "serve", sandbox.ModeSoftware, nil, tm)
	first := f.running(t)
	if _, isErr, _ := f.call(t, nil, "t__flood", `{"kind":"close-stdout"}`); !isErr {
		t.Error("a call whose answer never came did not fail")
	}
	h := f.waitFor(t, "the restart", func(h Health) bool { return h.Restarts == 1 && h.State == StateRunning && h.PID != first.PID })
	if !strings.Contains(h.LastError, "its connection ended") {
		t.Errorf("last_error: %q", h.LastError)
	}
	if txt, isErr, _ := f.call(t, nil, "t__echo", `{"text":"back"}`); isErr || txt != "back" {
		t.Errorf("after the restart: %q %v", txt, isErr)
	}
}

// TestHealthNeverRunningWithoutProcess: while a server whose stdout closed
// is killed and restarted, /health never says running without a process
// (nor counts the restart while still saying running): a caller that waits
// for "running" with a new pid, as TestClosedStdoutSeenAtOnce does, then
// finds the new session, not "unavailable (restarting)".
func TestHealthNeverRunningWithoutProcess(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour
	f := start(t, "serve", sandbox.ModeSoftware, nil, tm)
	first := f.running(t)
	stop := make(chan struct{})
	bad := make(chan Health, 1)
	var seen atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				close(bad)
				return
			default:
			}
			h := f.p.Health()[0]
			seen.Add(1)
			if h.State == StateRunning && (h.PID == 0 || h.Restarts == 1 && h.PID == first.PID) {
				select {
				case bad <- h:
				default:
				}
			}
			runtime.Gosched()
		}
	}()
	if _, isErr, _ := f.call(t, nil, "t__flood", `{"kind":"close-stdout"}`); !isErr {
		t.Error("a call whose answer never came did not fail")
	}
	f.waitFor(t, "the restart", func(h Health) bool { return h.Restarts == 1 && h.State == StateRunning })
	close(stop)
	if h, ok := <-bad; ok {
		t.Fatalf("health said running without the server's process: %+v (first pid %d)", h, first.PID)
	}
	if seen.Load() < 100 {
		t.Fatalf("health was read %d times during the restart; the check saw too little", seen.Load())
	}
	if txt, isErr, _ := f.call(t, nil, "t__echo", `{"text":"back"}`); isErr || txt != "back" {
		t.Errorf("after the restart: %q %v", txt, isErr)
	}
}

// TestClosedStdinSeenAtOnce: a server that closes its stdin and runs on is
// seen at the next write to it (the pipe is written directly, EPIPE), then
// killed and restarted: the call fails at once instead of waiting out the
// server's timeout (an hour here) for an answer to a request nobody read.
func TestClosedStdinSeenAtOnce(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour
	f := start(t, "stdin-closer", sandbox.ModeSoftware, func(s *Server) { s.Timeout = Duration(time.Hour) }, tm)
	first := f.running(t)
	if txt, isErr, _ := f.call(t, nil, "t__close_stdin", `{}`); isErr || txt != "closing" {
		t.Fatalf("close_stdin: %q %v", txt, isErr)
	}
	f.waitRecorded(t, "closed stdin", "the upstream never closed its stdin")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := f.reg.Call(ctx, "t__echo", registry.Call{Args: json.RawMessage(`{"text":"lost"}`), Workspace: f.ws, Face: "rest"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || registry.Code(res) == errcode.Timeout {
		t.Fatalf("a call to a server that closed its stdin: isError %v, code %s, want a failure other than a timeout", res.IsError, registry.Code(res))
	}
	h := f.waitFor(t, "the restart", func(h Health) bool { return h.Restarts == 1 && h.State == StateRunning && h.PID != first.PID })
	if !strings.Contains(h.LastError, "its connection ended") || !strings.Contains(h.LastError, "closed its stdin and ran on") {
		t.Errorf("last_error: %q", h.LastError)
	}
	if txt, isErr, _ := f.call(t, nil, "t__echo", `{"text":"back"}`); isErr || txt != "back" {
		t.Errorf("after the restart: %q %v", txt, isErr)
	}
}

// TestStalledStdinWriteEndsWithItsCall: a server that stops reading its
// stdin (open, never read) cannot hold a call's write: a request larger
// than the pipe's buffer blocks on the pipe itself (sandbox.StdinPipe,
// written by the calling goroutine), and when the call's context ends the
// pipe is closed under the write, the call fails, and the server is killed
// and restarted.
func TestStalledStdinWriteEndsWithItsCall(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour
	f := start(t, "stdin-closer", sandbox.ModeSoftware, func(s *Server) { s.Timeout = Duration(time.Hour) }, tm)
	first := f.running(t)
	if txt, isErr, _ := f.call(t, nil, "t__stop_reading", `{}`); isErr || txt != "stopping" {
		t.Fatalf("stop_reading: %q %v", txt, isErr)
	}
	f.waitRecorded(t, "stopped reading", "the upstream never stopped reading")
	big, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", 1<<20)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // the call's bound, which the write must obey
	defer cancel()
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := f.reg.Call(ctx, "t__echo", registry.Call{Args: big, Workspace: f.ws, Face: "rest"})
		done <- res
	}()
	select {
	case res := <-done:
		if res != nil && !res.IsError {
			t.Fatal("a call whose request could not be written succeeded")
		}
	case <-time.After(60 * time.Second): // a hang guard, not a speed check
		t.Fatal("a call blocked writing to a server that stopped reading outlived its context")
	}
	f.waitFor(t, "the restart", func(h Health) bool { return h.Restarts == 1 && h.State == StateRunning && h.PID != first.PID })
	if txt, isErr, _ := f.call(t, nil, "t__echo", `{"text":"back"}`); isErr || txt != "back" {
		t.Errorf("after the restart: %q %v", txt, isErr)
	}
}

// TestFramer: lines up to the limit come whole (with any piece sizes); a
// longer one is read to its end without being kept, and its top-level id
// and method are found wherever they are; the buffer never grows past the
// limit; an error from emit stops the feed.
func TestFramer(t *testing.T) {
	long := strings.Repeat("x", 100)
	for _, tc := range []struct {
		name string
		in   string
		max  int
		want []string // lines, or "BIG id method" for an oversize
	}{
		{"short lines", "abc\ndef\n\n", 3, []string{"abc", "def", ""}},
		{"last line without a newline", "ab\ncd", 3, []string{"ab", "cd"}},
		{"at and over the limit", "abc\nabcd\nab\n", 3, []string{"abc", "BIG <nil> false", "ab"}},
		{"id first (go-sdk)", `{"jsonrpc":"2.0","id":7,"result":{"t":"` + long + `"}}` + "\n{}\n", 64, []string{"BIG 7 false", "{}"}},
		{"id last (TypeScript SDK)", `{"result":{"t":"` + long + `","id":99},"jsonrpc":"2.0","id":"a\"}b"}` + "\n", 64, []string{`BIG "a\"}b" false`}},
		{"a request", `{"method":"x","params":{"id":1,"p":"` + long + `"},"id":  -3 }`, 64, []string{"BIG -3 true"}},
		{"a notification", `{"method":"x","params":{"p":"` + long + `"}}`, 64, []string{"BIG <nil> true"}},
		{"an object id is none", `{"id":{"a":1},"result":"` + long + `"}`, 64, []string{"BIG <nil> false"}},
		{"a batch names no call", `[{"id":1,"result":"` + long + `"}]`, 64, []string{"BIG <nil> false"}},
		{"many short lines", strings.Repeat("x\n", 1000), 1, slices.Repeat([]string{"x"}, 1000)},
	} {
		for _, piece := range []int{len(tc.in), 1, 7} {
			f := framer{max: tc.max}
			var got []string
			emit := func(line []byte, big *oversize) error {
				if cap(f.buf) > tc.max {
					t.Fatalf("%s: buffer of %d bytes, over the %d limit", tc.name, cap(f.buf), tc.max)
				}
				if len(line) > tc.max {
					t.Fatalf("%s: a line of %d bytes, over the %d limit", tc.name, len(line), tc.max)
				}
				if big != nil {
					id := "<nil>"
					if big.id != nil {
						id = string(big.id)
					}
					got = append(got, fmt.Sprintf("BIG %s %v", id, big.method))
					return nil
				}
				got = append(got, string(line))
				return nil
			}
			for in := tc.in; len(in) > 0; {
				n := min(piece, len(in))
				// A copy each time: the framer must not keep the piece.
				if err := f.feed([]byte(in[:n]), emit); err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				in = in[n:]
			}
			if err := f.end(emit); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s (pieces of %d bytes):\n got %q\nwant %q", tc.name, piece, got, tc.want)
			}
		}
	}
	f := framer{max: 8}
	stop := errors.New("stop")
	var got []string
	err := f.feed([]byte("a\nb\nc\n"), func(line []byte, _ *oversize) error {
		got = append(got, string(line))
		if string(line) == "b" {
			return stop
		}
		return nil
	})
	if err != stop || !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("emit's error: feed returned %v after %q, want stop after a and b", err, got)
	}
}

// FuzzIDScanner: on any JSON object, the scanner finds the id that
// encoding/json decodes when it is a string, a number or null (nothing for
// any other, or one over 256 bytes), and whether it has a method.
func FuzzIDScanner(f *testing.F) {
	for _, s := range []string{`{"id":1}`, `{"result":{"id":2},"id":"x\"y"}`, `{"method":"m","id":null}`, `{"a":[{"id":3}],"id" : 4 }`, `{"id":{"x":1}}`, `{"id":[1],"x":"]"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(in), &obj) != nil || strings.Contains(in, `\`) {
			return // not an object; or keys may be spelled with escapes, which the scanner compares raw
		}
		var sc idScanner
		sc.feed([]byte(in))
		want, hasID := obj["id"]
		if hasID {
			var v any
			json.Unmarshal(want, &v)
			switch v.(type) {
			case string, float64, nil:
				hasID = len(want) <= 256
			default:
				hasID = false
			}
		}
		if got := sc.id(); hasID != (got != nil) || (hasID && !bytes.Equal(compact(got), compact(want))) {
			t.Errorf("%s: scanner id %q, want %q (%v)", in, got, want, hasID)
		}
		if _, m := obj["method"]; m != sc.method {
			t.Errorf("%s: method %v, want %v", in, sc.method, m)
		}
	})
}

func compact(b []byte) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}

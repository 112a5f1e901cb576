package upstream

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// callRes is a registry call of the fixture's upstream with ctx, giving
// the whole result.
func (f *fixture) callRes(t *testing.T, ctx context.Context, tool, args string) *mcp.CallToolResult {
	t.Helper()
	res, err := f.reg.Call(ctx, tool, registry.Call{Args: json.RawMessage(args), Workspace: f.ws, Face: "rest"})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// TestAttackStrayAnswers: answers the daemon never asked for (an id never
// used, a string id, a second answer to an id already answered) are
// dropped and the session goes on; an answer the server writes under
// another pending call's id is that call's answer (the daemon matches
// answers to calls by id on the server's one session, so a server can
// swap its own answers, and nothing else: no answer crosses servers or
// leaves the daemon's own data).
func TestAttackStrayAnswers(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour
	f := startHostile(t, hostileScript{}, func(s *Server) { s.Timeout = Duration(5 * time.Second) }, tm)
	first := f.running(t)
	stray := []string{
		`{"jsonrpc":"2.0","id":987654,"result":{"content":[{"type":"text","text":"stray"}]}}`,
		`{"jsonrpc":"2.0","id":"nobody","result":{}}`,
		`{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"first answer"}]}}`,
		`{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"second answer"}]}}`,
		`{"jsonrpc":"2.0","id":$ID,"error":{"code":-1,"message":"third answer"}}`,
	}
	if txt, isErr, _ := f.call(t, nil, "t__emit", emitArgs(t, stray, 1, `"silent":true`)); isErr || txt != "first answer" {
		t.Errorf("the call's first answer: %q %v", txt, isErr)
	}
	if txt, isErr, _ := f.call(t, nil, "t__emit", `{"after":1}`); isErr || txt != `{"after":1}` {
		t.Errorf("after the stray answers: %q %v", txt, isErr)
	}
	// A: a call the server does not answer; B: answers A's id, then its own.
	var wg sync.WaitGroup
	var aText string
	wg.Go(func() { aText, _, _ = f.call(t, nil, "t__emit", `{"lines":[],"silent":true}`) })
	f.waitRecordedN(t, "request tools/call", 3)
	swap := `{"jsonrpc":"2.0","id":$PREV,"result":{"content":[{"type":"text","text":"written for A by B's call"}]}}`
	if txt, isErr, _ := f.call(t, nil, "t__emit", emitArgs(t, []string{swap}, 1, "")); isErr || txt != "emitted" {
		t.Errorf("B: %q %v", txt, isErr)
	}
	wg.Wait()
	if aText != "written for A by B's call" {
		t.Errorf("A: %q", aText)
	}
	if h := f.health(t); h.PID != first.PID || h.Restarts != 0 {
		t.Errorf("health %+v", h)
	}
}

// waitRecordedN waits until the upstream has recorded text n times.
func (f *fixture) waitRecordedN(t *testing.T, text string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for strings.Count(f.recorded(), text) < n {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %d × %q:\n%s", n, text, f.recorded())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAttackServerRequests: requests from the server to the daemon
// (sampling/createMessage, elicitation/create, an unknown method) are
// refused by the daemon's MCP client itself (it declares no sampling or
// elicitation, so the SDK answers "client does not support …", and
// method not found for the unknown one); no face forwards them to a
// client; roots/list is answered with the workspace as the one root;
// ping is answered. Nothing is held: the next call is answered.
func TestAttackServerRequests(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour
	f := startHostile(t, hostileScript{}, nil, tm)
	f.running(t)
	reqs := []string{
		`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":10}}`,
		`{"jsonrpc":"2.0","id":"s2","method":"elicitation/create","params":{"message":"token?","requestedSchema":{"type":"object","properties":{}}}}`,
		`{"jsonrpc":"2.0","id":"s3","method":"roots/list"}`,
		`{"jsonrpc":"2.0","id":"s4","method":"x/unknown"}`,
		`{"jsonrpc":"2.0","id":"s5","method":"ping"}`,
	}
	if txt, isErr, _ := f.call(t, nil, "t__emit", emitArgs(t, reqs, 1, "")); isErr || txt != "emitted" {
		t.Fatalf("emit: %q %v", txt, isErr)
	}
	f.waitRecordedN(t, "answer ", 5)
	rec := f.recorded()
	for id, want := range map[string]string{`"s1"`: `client does not support CreateMessage`, `"s2"`: `client does not support elicitation`, `"s3"`: `"uri":"file://` + f.root + `"`, `"s4"`: `"code":-32601`, `"s5"`: `{}`} {
		line := ""
		for l := range strings.SplitSeq(rec, "\n") {
			if strings.HasPrefix(l, "answer "+id+" ") {
				line = l
			}
		}
		if !strings.Contains(line, want) {
			t.Errorf("answer to %s: %q; want %s", id, line, want)
		}
	}
	if txt, isErr, _ := f.call(t, nil, "t__emit", `{"x":1}`); isErr || txt != `{"x":1}` {
		t.Errorf("after: %q %v", txt, isErr)
	}
}

// TestAttackResultContent: what a server puts in a result comes back as
// it sent it, and nothing in it is acted on: resource links and embedded
// resources naming host files (file:///etc/shadow) are not read, images
// are not decoded, terminal escapes and NUL stay in the text (each face
// escapes them in its JSON). A result with invalid UTF-8 is made valid
// (U+FFFD) by the SDK's decoding, and the session goes on.
func TestAttackResultContent(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour
	f := startHostile(t, hostileScript{}, nil, tm)
	first := f.running(t)
	answer := `{"jsonrpc":"2.0","id":$ID,"result":{"content":[` +
		`{"type":"text","text":"\u001b]0;owned\u0007\u001b[2J\u0000end"},` +
		`{"type":"resource_link","uri":"file:///etc/shadow","name":"shadow"},` +
		`{"type":"resource","resource":{"uri":"file:///root/.ssh/id_rsa","text":"not read"}},` +
		`{"type":"image","data":"AAAA","mimeType":"image/png"}]}}`
	res := f.callRes(t, context.Background(), "t__emit", emitArgs(t, []string{answer}, 1, `"silent":true`))
	if res.IsError || len(res.Content) != 4 {
		t.Fatalf("result: %+v", res)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "\x1b]0;owned\a\x1b[2J\x00end" {
		t.Errorf("text: %#v", res.Content[0])
	}
	if rl, ok := res.Content[1].(*mcp.ResourceLink); !ok || rl.URI != "file:///etc/shadow" {
		t.Errorf("link: %#v", res.Content[1])
	}
	if er, ok := res.Content[2].(*mcp.EmbeddedResource); !ok || er.Resource.Text != "not read" {
		t.Errorf("embedded: %#v", res.Content[2])
	}
	bad := `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"a` + "\xff\xfe" + `b"}]}}`
	res = f.callRes(t, context.Background(), "t__emit", emitArgs(t, []string{"HEX:" + hex.EncodeToString([]byte(bad))}, 1, `"silent":true`))
	var txt string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			txt += tc.Text
		}
	}
	if !utf8.ValidString(txt) {
		t.Errorf("invalid UTF-8 came back: %q", txt)
	}
	t.Logf("invalid UTF-8 in a result: isError=%v %q", res.IsError, txt)
	if txt, isErr, _ := f.call(t, nil, "t__emit", `{"x":1}`); isErr || txt != `{"x":1}` {
		t.Errorf("after: %q %v", txt, isErr)
	}
	if h := f.health(t); h.PID != first.PID {
		t.Errorf("health %+v", h)
	}
}

// TestAttackInitializeNeverAnswered: a server that never answers
// initialize is killed at the start timeout and restarted with backoff
// (bounded by backoffMax) until restart.maxRetries failures in a row; then
// it is failed, its tools are not served and no process is left.
func TestAttackInitializeNeverAnswered(t *testing.T) {
	tm := fastTiming
	tm.startTimeout = 300 * time.Millisecond
	f := startHostile(t, hostileScript{InitDelayMS: -1}, func(s *Server) { s.Restart.MaxRetries = 3 }, tm)
	h := f.waitFor(t, "failed", func(h Health) bool { return h.State == StateFailed })
	if h.Restarts != 3 || !strings.Contains(h.LastError, "4 failures in a row") || !strings.Contains(h.LastError, "handshake") {
		t.Errorf("health %+v", h)
	}
	// A process killed before it wrote its record (a slow start under
	// -race) is not counted: at most the four attempts.
	if n := strings.Count(f.recorded(), "started pid="); n == 0 || n > 4 {
		t.Errorf("%d starts recorded; want 1 to 4", n)
	}
	if got := f.served(); len(got) != 0 {
		t.Errorf("a failed server's tools are served: %v", got)
	}
	for n := 1; n < 40; n++ {
		if d := backoff(defaultTiming, n); d > defaultTiming.backoffMax*12/10 {
			t.Errorf("backoff %d: %s", n, d)
		}
	}
}

// TestAttackCancellationReachesUpstream: a caller that goes away (its
// context cancelled: a client that disconnected) ends its call at once,
// and the server is told notifications/cancelled naming the call.
func TestAttackCancellationReachesUpstream(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour
	f := startHostile(t, hostileScript{}, func(s *Server) { s.Timeout = Duration(time.Hour) }, tm)
	f.running(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *mcp.CallToolResult)
	go func() { done <- f.callRes(t, ctx, "t__emit", `{"lines":[],"silent":true}`) }()
	f.waitRecordedN(t, "request tools/call", 1)
	cancel()
	if res := <-done; !res.IsError {
		t.Errorf("a cancelled call: %+v", res)
	}
	f.waitRecordedN(t, "notification notifications/cancelled", 1)
}

// TestAttackMaxConcurrentPerServer: with maxConcurrent 2, two calls the
// server does not answer hold both slots: a third waits for a slot and,
// when its caller's time runs out first, fails (worded as the caller's
// deadline) without having reached the server.
func TestAttackMaxConcurrentPerServer(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour
	f := startHostile(t, hostileScript{}, func(s *Server) { s.MaxConcurrent = 2; s.Timeout = Duration(time.Hour) }, tm)
	f.running(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { f.callRes(t, ctx, "t__emit", `{"lines":[],"silent":true}`) })
	}
	f.waitRecordedN(t, "request tools/call", 2)
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	res := f.callRes(t, short, "t__emit", `{"third":1}`)
	cancelShort()
	cancel()
	wg.Wait()
	txt := ""
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			txt += tc.Text
		}
	}
	if !res.IsError {
		t.Errorf("the third call: %v %q", res.IsError, txt)
	}
	if n := strings.Count(f.recorded(), "request tools/call"); n != 2 {
		t.Errorf("%d calls reached the server; want 2:\n%s", n, f.recorded())
	}
}

// TestAttackArguments: the daemon does not validate arguments against the
// server's schema (the server does; its schema is its own), but every
// path in them is checked however deep it lies (arguments nested past
// encoding/json's 10,000 levels are refused as invalid), and arguments that
// are not an object reach no server (before the fix an array, a string or
// a number went to the server as its arguments, past the path check,
// which finds paths only under keys and in file: URIs).
func TestAttackArguments(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour
	f := startHostile(t, hostileScript{Tools: []byte(`[{"name":"emit","inputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}}]`)}, nil, tm)
	f.running(t)
	// Against the schema: passed on as sent.
	if txt, isErr, _ := f.call(t, nil, "t__emit", `{"n":"not a number","extra":true}`); isErr || txt != `{"extra":true,"n":"not a number"}` && txt != `{"n":"not a number","extra":true}` {
		t.Errorf("arguments against the schema: %q %v", txt, isErr)
	}
	for _, depth := range []int{4000, 5001} { // 8000 levels; 10,002, past encoding/json's limit
		deep := strings.Repeat(`{"a":[`, depth) + `{"path":"/etc/passwd"}` + strings.Repeat(`]}`, depth)
		want := "PATH_ESCAPE_ATTEMPT"
		if depth > 5000 {
			want = "INVALID_ARGUMENT"
		}
		if txt, isErr, code := f.call(t, nil, "t__emit", deep); !isErr || string(code) != want {
			t.Errorf("a path %d levels deep: %v %s %.200q", 2*depth+1, isErr, code, txt)
		}
	}
	before := strings.Count(f.recorded(), "request tools/call")
	for _, args := range []string{`[1,2]`, `"x"`, `5`, `{"a":1`} {
		res, err := f.reg.Call(context.Background(), "t__emit", registry.Call{Args: json.RawMessage(args), Workspace: f.ws, Face: "rest"})
		if err == nil && !res.IsError {
			t.Errorf("arguments %s: answered %+v", args, res)
		}
	}
	if n := strings.Count(f.recorded(), "request tools/call"); n != before {
		t.Errorf("arguments that are not an object reached the server (%d calls):\n%s", n-before, f.recorded())
	}
}

// countHandler counts the records logged through it.
type countHandler struct{ n *atomic.Int64 }

func (h countHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h countHandler) Handle(context.Context, slog.Record) error { h.n.Add(1); return nil }
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h countHandler) WithGroup(string) slog.Handler             { return h }

// TestAttackStderrFlood: a server's stderr without end, as one line of
// 64 MiB with no newline and as 200,000 short lines, costs the daemon a
// bounded buffer: the partial line is cut at stderrLineMax, the last
// stderrKeepLines lines are kept, last_error is at most lastErrorMaxSize,
// and the log gets at most stderrLogPerSec lines (and one count) a second.
func TestAttackStderrFlood(t *testing.T) {
	var logged atomic.Int64
	s := newStderrSink(slog.New(countHandler{&logged}))
	start := time.Now()
	chunk := []byte(strings.Repeat("\x1b[2J", 1<<18)) // 1 MiB, no newline
	for range 64 {
		s.Write(chunk)
	}
	line := []byte(strings.Repeat("e", 100) + "\n")
	for range 200000 {
		s.Write(line)
	}
	elapsed := time.Since(start)
	s.mu.Lock()
	partial, lines := cap(s.partial), len(s.lines)
	s.mu.Unlock()
	if partial > 2*stderrLineMax || lines > stderrKeepLines || len(s.last()) > lastErrorMaxSize {
		t.Errorf("held: partial cap %d, %d lines, last %d bytes", partial, lines, len(s.last()))
	}
	if most := int64(stderrLogPerSec+1) * (int64(elapsed/time.Second) + 2); logged.Load() > most {
		t.Errorf("%d lines logged in %s", logged.Load(), elapsed)
	}
}

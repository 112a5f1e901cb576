package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// emitArgs is the arguments of the hostile upstream's emit tool.
func emitArgs(t *testing.T, lines []string, repeat int, more string) string {
	t.Helper()
	b, err := json.Marshal(lines)
	if err != nil {
		t.Fatal(err)
	}
	s := `{"lines":` + string(b) + `,"repeat":` + itoa(repeat)
	if more != "" {
		s += "," + more
	}
	return s + "}"
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestAttackStalledWriteBounded: an upstream stops reading its stdin and
// a write to it blocks under a context that ends much later (a call whose
// timeout is an hour, with 1 MiB of arguments; the SDK gives its answers
// to the server's own requests a context that never ends). Every write is
// bounded by the ping timeout: the stream breaks, the server is killed and
// restarted, and calls made meanwhile end at their own deadlines instead
// of queueing behind the stalled write. Before the fix the write, and the
// write lock, were held for the hour (with answers to 3000 roots/list
// requests, which now stop at maxServerRequests, for good).
func TestAttackStalledWriteBounded(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour
	f := startHostile(t, hostileScript{}, func(s *Server) { s.Timeout = Duration(time.Hour) }, tm)
	first := f.running(t)
	bg := func(args string) {
		go f.reg.Call(context.Background(), "t__emit", registry.Call{Args: json.RawMessage(args), Workspace: f.ws, Face: "rest"})
	}
	bg(`{"lines":[],"stall":true}`)
	f.waitRecorded(t, "stalled", "the upstream never stalled")
	big := `{"pad":"` + strings.Repeat("p", 1<<20) + `"}`
	bg(big)
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	res := f.callRes(t, short, "t__emit", `{"x":1}`)
	cancel()
	if !res.IsError {
		t.Errorf("a call to the stalled server: %+v", res)
	}
	h := f.waitFor(t, "the restart", func(h Health) bool { return h.Restarts == 1 && h.State == StateRunning && h.PID != first.PID })
	if !strings.Contains(h.LastError, "no write to its stdin completed within") {
		t.Errorf("last_error: %q", h.LastError)
	}
	if txt, isErr, _ := f.call(t, nil, "t__emit", `{"x":2}`); isErr || txt != `{"x":2}` {
		t.Errorf("after the restart: %q %v", txt, isErr)
	}
}

// TestAttackNotificationFlood: 20,000 notifications/tools/list_changed,
// logging messages and progress notifications for no call: the call that
// sent them is answered, the server runs on (same process), and the
// list_changed flood, whose listings find the same tools, changes nothing
// in the registry, so no face tells its clients anything. Before the fix
// every listing set the tools again and every client of every face was
// told list_changed each time. Listings are at most one per relistEvery
// (not timed here).
func TestAttackNotificationFlood(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour
	f := startHostile(t, hostileScript{}, func(s *Server) { s.Timeout = Duration(5 * time.Minute) }, tm)
	first := f.running(t)
	var changes atomic.Int64
	unsub := f.reg.Subscribe(func() { changes.Add(1) })
	defer unsub()
	for _, line := range []string{
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"emergency","data":"\u001b[2J"}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`,
	} {
		if txt, isErr, _ := f.call(t, nil, "t__emit", emitArgs(t, []string{line}, 20000, "")); isErr || txt != "emitted" {
			t.Fatalf("%.60s: %q %v", line, txt, isErr)
		}
	}
	if txt, isErr, _ := f.call(t, nil, "t__emit", `{"x":1}`); isErr || txt != `{"x":1}` {
		t.Errorf("after the flood: %q %v", txt, isErr)
	}
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for strings.Count(f.recorded(), "request tools/list") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no listing after the flood:\n%s", f.recorded())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := changes.Load(); n != 0 {
		t.Errorf("%d registry changes for listings of the same tools", n)
	}
	if h := f.health(t); h.PID != first.PID || h.State != StateRunning {
		t.Errorf("health %+v", h)
	}
}

// TestAttackLineAtTheLimit: with a 64 KiB limit, an answer of exactly
// 64 KiB (the newline not counted) comes back whole; one byte more fails
// only its call with TOO_LARGE; the session goes on, the same process.
func TestAttackLineAtTheLimit(t *testing.T) {
	testMaxMessage = 64 << 10
	defer func() { testMaxMessage = 0 }()
	tm := fastTiming
	tm.pingInterval = time.Hour
	f := startHostile(t, hostileScript{}, nil, tm)
	first := f.running(t)
	answer := func(n int) string {
		head, tail := `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"`, `"}]}}`
		// $ID is replaced by the call's id: n counts the line as sent.
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	// The calls are the session's second and third: ids 2 and 3 (one digit, as "$ID" is three).
	pad := len("$ID") - 1
	if txt, isErr, _ := f.call(t, nil, "t__emit", emitArgs(t, []string{answer(64<<10 + pad)}, 1, `"silent":true`)); isErr || len(txt) < 60000 {
		t.Errorf("an answer of exactly the limit: %v %.100q", isErr, txt)
	}
	if txt, isErr, code := f.call(t, nil, "t__emit", emitArgs(t, []string{answer(64<<10 + pad + 1)}, 1, `"silent":true`)); !isErr || code != "TOO_LARGE" {
		t.Errorf("an answer one byte over: %v %s %.100q", isErr, code, txt)
	}
	if h := f.health(t); h.PID != first.PID || h.Restarts != 0 {
		t.Errorf("health %+v", h)
	}
}

// TestAttackNoNewlineEver: a server that writes without ever ending its
// line (200 MiB, then nothing) costs the daemon no more than the limit:
// the line is scanned, not kept; the pending call ends at its timeout and
// the next ping, whose answer cannot come, ends the server, which is
// restarted.
func TestAttackNoNewlineEver(t *testing.T) {
	f := startHostile(t, hostileScript{}, func(s *Server) { s.Timeout = Duration(time.Second) }, fastTiming)
	first := f.running(t)
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, isErr, _ := f.call(t, nil, "t__emit", emitArgs(t, []string{strings.Repeat("y", 1<<20)}, 200, `"noNewline":true,"silent":true`)); !isErr {
		t.Error("the call whose answer never came did not fail")
	}
	h := f.waitFor(t, "the restart", func(h Health) bool { return h.Restarts == 1 && h.State == StateRunning && h.PID != first.PID })
	if !strings.Contains(h.LastError, "ping") && !strings.Contains(h.LastError, "limit") {
		t.Errorf("last_error: %q", h.LastError)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.TotalAlloc - before.TotalAlloc); grew > 150<<20 {
		t.Errorf("the daemon allocated %d MiB for 200 MiB of one line", grew>>20)
	}
}

// TestAttackServerRequestFlood: a server that sends 20,000 requests
// (roots/list) while it reads none of the answers gets at most
// maxServerRequests of them waiting in the daemon: the rest are dropped
// unanswered (TestTransportServerRequestsBounded counts them), so the SDK's
// queue (unbounded) does not grow with them: before the fix 200,000 such
// requests took 761 MB of live heap within the 10 s bound on a write, and
// the server was killed; with it, 94 MB, the test's own strings included.
// The server runs on, and its next call is answered.
func TestAttackServerRequestFlood(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour
	tm.pingTimeout = 10 * time.Second
	f := startHostile(t, hostileScript{}, nil, tm)
	first := f.running(t)
	var reqs []string
	for i := range 20000 {
		reqs = append(reqs, `{"jsonrpc":"2.0","id":"r`+itoa(i)+`","method":"roots/list"}`)
	}
	if txt, isErr, _ := f.call(t, nil, "t__emit", emitArgs(t, reqs, 1, "")); isErr || txt != "emitted" {
		t.Fatalf("emit: %q %v", txt, isErr)
	}
	if txt, isErr, _ := f.call(t, nil, "t__emit", `{"x":1}`); isErr || txt != `{"x":1}` {
		t.Errorf("after: %q %v", txt, isErr)
	}
	if n := strings.Count(f.recorded(), "answer \"r"); n == 0 {
		t.Error("no request answered")
	}
	if h := f.health(t); h.PID != first.PID || h.Restarts != 0 {
		t.Errorf("health %+v", h)
	}
}

// TestTransportServerRequestsBounded: 1000 requests from the server that
// nobody answers: the session gets maxServerRequests of them and the rest
// are dropped, while an answer and a notification after them still pass.
// Before the fix all 1000 were handed on.
func TestTransportServerRequestsBounded(t *testing.T) {
	r, w := io.Pipe()
	_, stdinW := io.Pipe()
	tr := newTransport(r, stdinW, DefaultMaxMessage, slog.New(slog.DiscardHandler))
	cn, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	go func() {
		for i := range 1000 {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":"r%d","method":"roots/list"}`+"\n", i)
		}
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n"+`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`+"\n")
	}()
	reqs, answered := 0, false
	for {
		m, err := cn.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := m.(*jsonrpc.Response); ok {
			answered = true
			continue
		}
		if m.(*jsonrpc.Request).ID.IsValid() {
			reqs++
			continue
		}
		break // the notification, the last message
	}
	if reqs != maxServerRequests || !answered {
		t.Errorf("%d requests handed on (want %d); the answer after them passed: %v", reqs, maxServerRequests, answered)
	}
}

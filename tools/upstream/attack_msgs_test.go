package upstream

import (
	"encoding/json"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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

// TestAttackServerRequestsUnread: an upstream sends requests to the daemon
// (roots/list, 3000 of them) and stops reading its stdin, so the
// daemon's answers fill the pipe. A write that has no deadline of its own
// (an answer to the server's request: the SDK gives it none) is bounded by
// the ping timeout; the server is killed and restarted, and calls made
// meanwhile end at their own deadlines instead of queueing behind the
// stalled write.
func TestAttackServerRequestsUnread(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour
	f := startHostile(t, hostileScript{}, func(s *Server) { s.Timeout = Duration(time.Second) }, tm)
	first := f.running(t)
	var reqs []string
	for i := range 3000 {
		reqs = append(reqs, `{"jsonrpc":"2.0","id":"r`+itoa(i)+`","method":"roots/list"}`)
	}
	f.call(t, nil, "t__emit", emitArgs(t, reqs, 1, `"stall":true`))
	f.waitRecorded(t, "stalled", "the upstream never stalled")
	txt, isErr, _ := f.call(t, nil, "t__emit", `{"x":1}`)
	if !isErr {
		t.Errorf("a call to the stalled server answered %q", txt)
	}
	h := f.waitFor(t, "the restart", func(h Health) bool { return h.Restarts == 1 && h.State == StateRunning && h.PID != first.PID })
	if !strings.Contains(h.LastError, "its connection ended") {
		t.Errorf("last_error: %q", h.LastError)
	}
	if txt, isErr, _ := f.call(t, nil, "t__emit", `{"x":2}`); isErr || txt != `{"x":2}` {
		t.Errorf("after the restart: %q %v", txt, isErr)
	}
}

// TestAttackNotificationFlood: 100,000 notifications/tools/list_changed,
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
	f := startHostile(t, hostileScript{}, nil, tm)
	first := f.running(t)
	var changes atomic.Int64
	unsub := f.reg.Subscribe(func() { changes.Add(1) })
	defer unsub()
	for _, line := range []string{
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"emergency","data":"\u001b[2J"}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`,
	} {
		if txt, isErr, _ := f.call(t, nil, "t__emit", emitArgs(t, []string{line}, 100000, "")); isErr || txt != "emitted" {
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

package mcphttp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// initializeBatches starts a session on a protocol version that has
// batches (the SDK takes them up to 2025-03-26).
// stdioOutputAfterEOF waits for a session of serveStdioAll whose stdin was
// closed to end (a minute at most, a guard: past it the session is ended
// by Close and the test fails), and returns all it wrote.
func stdioOutputAfterEOF(t *testing.T, e *env, done chan error, out chan string) string {
	t.Helper()
	select {
	case <-done:
	case <-time.After(time.Minute): // a guard, not a figure
		t.Error("ServeStdio still waiting a minute after EOF")
		e.srv.Close()
		<-done
	}
	return <-out
}

// serveStdioAll serves a stdio session of e on fresh pipes: done gets
// ServeStdio's error, and out everything the session wrote to stdout, once
// it has ended.
func serveStdioAll(e *env) (p *stdioPipes, done chan error, out chan string) {
	p = newStdioPipes()
	done = make(chan error, 1)
	go func() {
		done <- e.srv.ServeStdio(context.Background(), p.serverIn, p.serverOut)
		p.serverOut.Close()
	}()
	out = make(chan string, 1)
	go func() { b, _ := io.ReadAll(p.clientIn); out <- string(b) }()
	return p, done, out
}

func (c *rawStdio) initializeBatches() {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	c.recv()
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// TestStdioLongLineHeldToCap: a line longer than the fast path holds
// (64 KiB) is judged against the session's in-flight cap like any other,
// with room below the cap too: a batch of 40 calls padded past 64 KiB, sent
// to a session with a cap of 2 and nothing waiting, is refused whole and
// none of its calls runs. Such a line used to be passed on as it arrived
// whenever the session had room, so one line could put any number of
// requests in flight past --max-inflight-per-ip.
func TestStdioLongLineHeldToCap(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxInflightPerIP = 2 })
	c := startRawStdio(t, e.srv)
	c.initializeBatches()
	const n = 40
	var calls []string
	for i := range n {
		calls = append(calls, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i+1)+`,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"f`+strconv.Itoa(i)+`.txt","content":"x"}}}`)
	}
	line := "[" + strings.Join(calls, ",") + strings.Repeat(" ", 4*stdioFastMaxLine) + "]"
	c.send(line)
	done := make(chan string, 1)
	go func() { done <- c.recv() }()
	var reply string
	select {
	case reply = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("no answer to the batch")
	}
	var msgs []struct {
		ID    int `json:"id"`
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(reply), &msgs); err != nil {
		t.Fatalf("%v in %.300q", err, reply)
	}
	refused := 0
	for _, m := range msgs {
		if m.Error != nil && m.Error.Code == -32000 {
			refused++
		}
	}
	if refused != n || len(msgs) != n {
		t.Errorf("%d answers, %d refused at the cap; want all %d refused (%.300q)", len(msgs), refused, n, reply)
	}
	for i := range n {
		if _, err := os.Stat(filepath.Join(e.root, "f"+strconv.Itoa(i)+".txt")); err == nil {
			t.Errorf("f%d.txt was written by a call past the cap", i)
		}
	}
}

// TestStdioIDInUseAcrossPaths: a call whose id is that of a request still
// waiting for its answer on the other path (the fast path's call under an
// id the SDK runs, or the SDK's under an id the fast path runs) is dropped
// unanswered and does not run, as the SDK drops a request whose id is in
// use. Each path knew only its own ids, so the second call ran too: two
// answers under one id, and a request the in-flight cap counted once.
func TestStdioIDInUseAcrossPaths(t *testing.T) {
	// _meta sends a call to the SDK; without it a call takes the fast path.
	sdkCall := func(tool, args string) string {
		return `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,"_meta":{"progressToken":"p"}}}`
	}
	fastCall := func(tool, args string) string {
		return `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
	}
	hold := `{"command":"sleep 0.5; echo first"}`
	second := `{"path":"second.txt","content":"x"}`
	for _, tc := range []struct{ name, first, then string }{
		{"SDK first", sdkCall("exec", hold), fastCall("write_file", second)},
		{"fast path first", fastCall("exec", hold), sdkCall("write_file", second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			c := serveRawStdio(t, t.Context(), e.srv)
			c.initialize()
			c.send(tc.first)
			c.send(tc.then)
			c.p.clientOut.Close()
			rest, _ := io.ReadAll(c.out)
			if err := <-c.done; err != nil {
				t.Errorf("ServeStdio: %v", err)
			}
			if _, err := os.Stat(filepath.Join(e.root, "second.txt")); err == nil {
				t.Error("the call with an id in use on the other path ran")
			}
			if n := strings.Count(string(rest), `"id":5`); n != 1 || !strings.Contains(string(rest), "first") {
				t.Errorf("%d answers with id 5, want the first call's only: %.600s", n, rest)
			}
		})
	}
}

// TestStdioLedgerInUse: read reports a single request whose id is waited
// for; a batch is the SDK's to judge, and a cancel is no request.
func TestStdioLedgerInUse(t *testing.T) {
	l := newStdioLedger(0)
	req := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for i, c := range []struct {
		line  string
		inUse bool
	}{
		{req, false},
		{req, true},
		{`{"jsonrpc":"2.0","id":1.0,"method":"ping"}`, true}, // the SDK reads it as 1 too
		{`{"jsonrpc":"2.0","id":"1","method":"ping"}`, false},
		{"[" + req + "]", false},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, false},
		{req, false},
	} {
		if _, _, inUse := l.read([]byte(c.line)); inUse != c.inUse {
			t.Errorf("%d: read(%s): inUse %v, want %v", i, c.line, inUse, c.inUse)
		}
	}
}

// TestStdioOddIDsAtEOF: ids the fast path, the ledger and the SDK might
// read differently, each in a session that then closes stdin: a number
// past float64's range, -0, a fraction, 2^53+1 (and 2^53 after it, the
// same id to the SDK, dropped), a string with NUL and invalid UTF-8, and a
// line behind a byte order mark. Whichever path takes each, the session
// ends after EOF (no request waits for an answer that never comes), and
// every request the SDK accepts is answered under the id it writes back.
// The SDK ends the session at 1e400 and at the byte order mark, leaving
// the lines after them unread.
func TestStdioOddIDsAtEOF(t *testing.T) {
	call := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"list_directory","arguments":{"path":"."}}}`
	}
	for _, c := range []struct {
		name  string
		lines []string
		want  []string // in stdout
	}{
		{"1e400", []string{call("1e400"), call("7")}, nil},
		{"-0", []string{call("-0")}, []string{`"id":0,`}},
		{"fraction", []string{call("1.5")}, []string{`"id":1,`}},
		{"2^53+1 then 2^53", []string{call("9007199254740993"), call("9007199254740992")}, []string{`"id":9007199254740992,`}},
		{"NUL and invalid UTF-8", []string{call(`"a\u0000b` + "\xff" + `"`)}, []string{`"id":"a\u0000b` + "\ufffd" + `"`}},
		{"BOM", []string{"\ufeff" + call("8"), call("9")}, nil},
	} {
		for _, sdk := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sdk=%v", c.name, sdk), func(t *testing.T) {
				e := newEnv(t)
				e.srv.noFastPath = sdk
				p, done, out := serveStdioAll(e)
				lines := append([]string{
					`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
					`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
				}, c.lines...)
				p.clientOut.Write([]byte(strings.Join(lines, "\n") + "\n"))
				p.clientOut.Close()
				got := stdioOutputAfterEOF(t, e, done, out)
				for _, w := range c.want {
					if !strings.Contains(got, w) {
						t.Errorf("stdout lacks %s", w)
					}
				}
			})
		}
	}
}

// TestStdioNonReaderStopsBeingRead: a client that never reads stdout and
// keeps sending calls, on both paths. Once its cap of calls waits for
// answers, the next line's refusal is a write to stdout, which blocks: the
// daemon reads no more of stdin, so what the client can make it hold is
// the cap's calls and one line, not every line it sends. Ending the
// session (its context) lets everything go.
func TestStdioNonReaderStopsBeingRead(t *testing.T) {
	const limit = 4
	for _, sdk := range []bool{false, true} {
		t.Run(fmt.Sprintf("sdk=%v", sdk), func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.MaxInflightPerIP = limit })
			e.srv.noFastPath = sdk
			ctx, cancel := context.WithCancel(t.Context())
			c := serveRawStdio(t, ctx, e.srv)
			c.initialize()
			var sent atomic.Int64
			go func() {
				for i := 1; ; i++ {
					line := `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 60"}}}` + "\n"
					if _, err := io.WriteString(c.p.clientOut, line); err != nil {
						return
					}
					sent.Add(1)
				}
			}()
			time.Sleep(time.Second) // time enough to read thousands of lines
			if n := sent.Load(); n > limit+2 {
				t.Errorf("the daemon read %d lines from a client that reads nothing, with a cap of %d", n, limit)
			}
			cancel()
			select {
			case <-c.done:
			case <-time.After(time.Minute): // a guard, not a figure
				t.Fatal("ServeStdio did not end with its context")
			}
			c.p.clientOut.Close()
		})
	}
}

// TestStdioHugeBatchRefusedInLinearTime: a batch of 400,000 requests (a
// 16 MB line) at a cap of 32 is refused, each id once, in time linear in
// the batch: the refusal's ids were deduplicated by a scan of those
// already listed, under the ledger's lock, which took minutes for such a
// line and held every answer of the session (wrote) meanwhile. An id
// cancelled and sent again within the line is refused once.
func TestStdioHugeBatchRefusedInLinearTime(t *testing.T) {
	const n = 400000
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"ping"}`)
	}
	b.WriteString(`,{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}},{"jsonrpc":"2.0","id":7,"method":"ping"}]`)
	l := newStdioLedger(32)
	done := make(chan []string, 1)
	go func() {
		ids, _, _ := l.read([]byte(b.String()))
		done <- ids
	}()
	var ids []string
	select {
	case ids = <-done:
	case <-time.After(30 * time.Second): // a hang guard; the quadratic scan took minutes
		t.Fatal("refusing a batch of 400,000 requests took more than 30 s")
	}
	if len(ids) != n {
		t.Errorf("%d ids refused, want %d", len(ids), n)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("%s refused twice", id)
		}
		seen[id] = true
	}
	if len(l.pending) != 0 {
		t.Errorf("%d ids waited for after a refusal", len(l.pending))
	}
}

// TestStdioEOFMidLine: stdin ending in the middle of a line, and after a
// whole last line without its newline. The cut line is not JSON: nothing
// of it runs and nothing waits for it; the whole one is answered; the
// session ends either way.
func TestStdioEOFMidLine(t *testing.T) {
	write := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"cut.txt","content":"x"}}}`
	for _, c := range []struct {
		name, last string
		ran        bool
	}{
		{"cut", write[:len(write)/2], false},
		{"no newline", write, true},
	} {
		for _, sdk := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sdk=%v", c.name, sdk), func(t *testing.T) {
				e := newEnv(t)
				e.srv.noFastPath = sdk
				p, done, out := serveStdioAll(e)
				p.clientOut.Write([]byte(`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n" +
					`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
					`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n" + c.last))
				p.clientOut.Close()
				got := stdioOutputAfterEOF(t, e, done, out)
				if !strings.Contains(got, `"id":1,`) {
					t.Errorf("the ping before the last line was not answered: %.300s", got)
				}
				_, err := os.Stat(filepath.Join(e.root, "cut.txt"))
				if ran := err == nil; ran != c.ran || ran != strings.Contains(got, `"id":2,`) {
					t.Errorf("the last line ran: %v, want %v; stdout %.300s", ran, c.ran, got)
				}
			})
		}
	}
}

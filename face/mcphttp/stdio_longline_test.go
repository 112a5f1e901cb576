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
	"testing"
	"time"
)

// writeLine is a write_file call under id whose line (without its newline)
// is exactly n bytes long, writing path.
func writeLine(t *testing.T, id, path string, n int) string {
	t.Helper()
	head := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"` + path + `","content":"`
	tail := `"}}}`
	if n < len(head)+len(tail) {
		t.Fatalf("a line of %d bytes cannot hold the call", n)
	}
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// lineReply is the part of a JSON-RPC answer the tests read.
type lineReply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (c *rawStdio) reply() lineReply {
	c.t.Helper()
	line := c.recv()
	var r lineReply
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		c.t.Fatalf("%v in %.300q", err, line)
	}
	return r
}

// TestStdioLineBound: a line just under, at and just over the stdio line
// bound (--max-stdio-line-bytes), and ten times over it, on both paths and
// with a bound below and above the fast path's longest line (64 KiB, past
// which every line goes to the SDK, whose own bound follows the daemon's:
// sdkLineLimit). Under and at the bound the write runs; over it the line is
// answered with -32600 under its id, naming the bound and the flag, the
// file is not written, and the session goes on: the ping after it is
// answered. An over-long line whose id is not at its start, or is the id
// of a request still waiting for its answer, is answered under id null.
func TestStdioLineBound(t *testing.T) {
	for _, bound := range []int{4 << 10, 100 << 10} {
		for _, sdk := range []bool{false, true} {
			t.Run(fmt.Sprintf("bound=%d/sdk=%v", bound, sdk), func(t *testing.T) {
				e := newEnv(t, func(o *Options) { o.MaxStdioLineBytes = int64(bound) })
				e.srv.noFastPath = sdk
				c := startRawStdio(t, e.srv)
				c.initialize()
				for i, n := range []int{bound - 1, bound, bound + 1, 10 * bound} {
					id, path := strconv.Itoa(i+1), "f"+strconv.Itoa(i)+".txt"
					c.send(writeLine(t, id, path, n))
					r := c.reply()
					_, err := os.Stat(filepath.Join(e.root, path))
					written := err == nil
					if n <= bound {
						if string(r.ID) != id || r.Error != nil || !written {
							t.Errorf("a line of %d bytes, bound %d: id %s, error %+v, written %v; want it run", n, bound, r.ID, r.Error, written)
						}
						continue
					}
					if string(r.ID) != id || r.Error == nil || r.Error.Code != -32600 || written ||
						!strings.Contains(r.Error.Message, strconv.Itoa(bound)+" bytes (--max-stdio-line-bytes)") {
						t.Errorf("a line of %d bytes, bound %d: id %s, error %+v, written %v; want -32600 under id %s naming the bound", n, bound, r.ID, r.Error, written, id)
					}
					c.send(`{"jsonrpc":"2.0","id":"after` + id + `","method":"ping"}`)
					if r := c.reply(); string(r.ID) != `"after`+id+`"` || r.Error != nil {
						t.Errorf("the ping after an over-long line: id %s, error %+v", r.ID, r.Error)
					}
				}

				// The id after the content: not read, null.
				late := `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write_file","arguments":{"path":"late.txt","content":"` + strings.Repeat("x", bound) + `"}},"id":9}`
				c.send(late)
				if r := c.reply(); string(r.ID) != "null" || r.Error == nil || r.Error.Code != -32600 {
					t.Errorf("an over-long line with its id at the end: id %s, error %+v; want -32600 under null", r.ID, r.Error)
				}

				// The id of a call still running: null, and the call's own
				// answer comes under it.
				c.send(`{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 0.5; echo slow-answer"}}}`)
				c.send(writeLine(t, "50", "dup-long.txt", bound+1))
				first, second := c.reply(), c.reply()
				if string(first.ID) != "null" || first.Error == nil || first.Error.Code != -32600 {
					t.Errorf("an over-long line under the id of a running call: id %s, error %+v; want -32600 under null", first.ID, first.Error)
				}
				if string(second.ID) != "50" || !strings.Contains(string(second.Result), "slow-answer") {
					t.Errorf("the running call's answer: id %s, result %.200s", second.ID, second.Result)
				}
				if _, err := os.Stat(filepath.Join(e.root, "dup-long.txt")); err == nil {
					t.Error("dup-long.txt was written by an over-long line")
				}
			})
		}
	}
}

// TestStdioDefaultLineBound: with no bound configured, a line past
// DefaultMaxStdioLineBytes (16 MiB, the go-sdk's own bound) is answered
// with -32600 and the session goes on. The SDK ends the session at its
// bound (the ping after the line is never answered), and the daemon held
// the line whole before handing it over.
func TestStdioDefaultLineBound(t *testing.T) {
	e := newEnv(t)
	c := startRawStdio(t, e.srv)
	c.initialize()
	done := make(chan struct{})
	go func() { // the pipe takes the line as the daemon reads it
		defer close(done)
		io.WriteString(c.p.clientOut, writeLine(t, "1", "over-default.txt", DefaultMaxStdioLineBytes+1)+"\n")
		io.WriteString(c.p.clientOut, `{"jsonrpc":"2.0","id":2,"method":"ping"}`+"\n")
	}()
	replies := make(chan []lineReply, 1)
	go func() {
		var rs []lineReply
		for range 2 {
			line, err := c.out.ReadString('\n')
			if err != nil {
				break
			}
			var r lineReply
			json.Unmarshal([]byte(line), &r)
			rs = append(rs, r)
		}
		replies <- rs
	}()
	var rs []lineReply
	select {
	case rs = <-replies:
	case <-time.After(time.Minute): // a guard, not a figure
		t.Fatal("no answers a minute after a line over the default bound")
	}
	<-done
	if len(rs) != 2 || string(rs[0].ID) != "1" || rs[0].Error == nil || rs[0].Error.Code != -32600 ||
		string(rs[1].ID) != "2" || rs[1].Error != nil {
		t.Errorf("answers %+v; want -32600 under id 1, then the ping's", rs)
	}
	if _, err := os.Stat(filepath.Join(e.root, "over-default.txt")); err == nil {
		t.Error("over-default.txt was written by an over-long line")
	}
}

// TestStdioLongLineAtEOF: stdin ending inside an over-long line (no
// newline) after a ping: the ping is answered, the line is answered with
// -32600, and the session ends cleanly at EOF.
func TestStdioLongLineAtEOF(t *testing.T) {
	for _, sdk := range []bool{false, true} {
		t.Run(fmt.Sprintf("sdk=%v", sdk), func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.MaxStdioLineBytes = 4 << 10 })
			e.srv.noFastPath = sdk
			p, done, out := serveStdioAll(e)
			go func() {
				io.WriteString(p.clientOut, `{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n"+
					`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
					`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"+writeLine(t, "2", "eof.txt", 40<<10))
				p.clientOut.Close()
			}()
			got := stdioOutputAfterEOF(t, e, done, out)
			if !strings.Contains(got, `"id":1,"result"`) || !strings.Contains(got, `"id":2,"error":{"code":-32600`) {
				t.Errorf("stdout %.600s; want the ping's answer and -32600 under id 2", got)
			}
			if _, err := os.Stat(filepath.Join(e.root, "eof.txt")); err == nil {
				t.Error("eof.txt was written by an over-long line")
			}
		})
	}
}

// feedReader serves a generated stdin: a line of n bytes (a call under
// id 3 whose content pads it out), then a ping, then EOF, in reads of at
// most 32 KiB; before each read it calls check, and it counts what it gave.
type feedReader struct {
	head, tail []byte
	pad        int // padding bytes still to give
	given      int
	check      func()
}

func newFeedReader(n int, check func()) *feedReader {
	head := []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"f","content":"`)
	tail := []byte(`"}}}` + "\n" + `{"jsonrpc":"2.0","id":4,"method":"ping"}` + "\n")
	return &feedReader{head: head, tail: tail, pad: n - len(head) - 4, check: check}
}

func (f *feedReader) Read(p []byte) (int, error) {
	f.check()
	p = p[:min(len(p), 32<<10)]
	n := 0
	switch {
	case len(f.head) > 0:
		n = copy(p, f.head)
		f.head = f.head[n:]
	case f.pad > 0:
		n = min(len(p), f.pad)
		for i := range n {
			p[i] = 'x'
		}
		f.pad -= n
	case len(f.tail) > 0:
		n = copy(p, f.tail)
		f.tail = f.tail[n:]
	default:
		return 0, io.EOF
	}
	f.given += n
	return n, nil
}

func (f *feedReader) Close() error { return nil }

// TestStdioLongLineNotHeld: a line ten times the bound, fed through a
// reader that looks at what drainingReader holds before each of its
// reads: the line's start held (hold) and the bytes kept for the SDK (out)
// never pass twice the bound (what append's growth adds to it), every byte
// of the line is read, the line is answered once under its id, and the
// ping after it reaches the SDK.
func TestStdioLongLineNotHeld(t *testing.T) {
	const bound = 1 << 20
	var r *drainingReader
	most := 0
	feed := newFeedReader(10*bound, func() { most = max(most, cap(r.hold), cap(r.out)) })
	total := len(feed.head) + feed.pad + len(feed.tail)
	var long []string
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r = &drainingReader{ReadCloser: feed, ledger: newStdioLedger(32), ctx: ctx,
		fast:    func([]byte) bool { return false },
		refuse:  func([]string, bool) { t.Error("refused at the in-flight cap") },
		maxLine: bound, tooLong: func(key string) { long = append(long, key) }}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if feed.given != total {
		t.Errorf("%d bytes of stdin read; want all %d", feed.given, total)
	}
	if most > 2*bound {
		t.Errorf("%d bytes held for a line of %d, bound %d; want at most twice the bound", most, 10*bound, bound)
	}
	if len(long) != 1 || long[0] != "n3" {
		t.Errorf("answered as too long: %q; want once, under id 3", long)
	}
	if want := `{"jsonrpc":"2.0","id":4,"method":"ping"}` + "\n"; string(out) != want {
		t.Errorf("the SDK got %.200q; want only the ping", out)
	}
}

// TestLongLineKey: the id an over-long line is answered under, read from
// its first bytes as the ledger reads a whole line.
func TestLongLineKey(t *testing.T) {
	for _, c := range []struct{ prefix, want string }{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":"yyy`, "n7"},
		{`  {"id":"a\"b","method":"m","params":[1,2`, `sa"b`},
		{`{"method":"m","id":-3,"params":{`, "n-3"},
		{`{"id":7,"params":{"content":"yyy`, ""},          // no method read: maybe an answer
		{`{"id":7,"result":{"content":"yyy`, ""},          // the client's answer to the daemon
		{`{"id":7,"method":"","params":{"content":"`, ""}, // an empty method is no request
		{`{"method":"m","params":{"content":"yyy`, ""},
		{`{"method":"m","id":12`, ""},     // the number may go on
		{`{"method":"m","id":12,`, "n12"}, // it did not
		{`{"method":"m","id":null,"p":"`, ""},
		{`{"method":"m","id":{"a":1},"p":"`, ""},
		{`{"method":"m","ID":1,"p":"`, ""}, // keys matched exactly
		{`{"method":"m","i\u0064":5,"p":"`, "n5"},
		{`[{"id":1,"method":"m"},{"id":2,"method":"m","params":"`, ""}, // a batch: one answer, null
		{`xyz`, ""},
		{``, ""},
	} {
		if got := longLineKey([]byte(c.prefix)); got != c.want {
			t.Errorf("longLineKey(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}
}

// TestStdioBlankLinesDropped: lines of blanks only (newlines, spaces,
// tabs, carriage returns), ten times the line bound of them, do not reach
// the SDK, whose own bound (sdkLineLimit) would count them towards the
// next message and end the session: the ping after them is answered.
func TestStdioBlankLinesDropped(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxStdioLineBytes = 4 << 10 })
	c := startRawStdio(t, e.srv)
	c.initialize()
	go io.WriteString(c.p.clientOut, strings.Repeat("\n \t\r\n", 10*(4<<10)/5)+`{"jsonrpc":"2.0","id":"p","method":"ping"}`+"\n")
	if r := c.reply(); string(r.ID) != `"p"` || r.Error != nil {
		t.Errorf("the ping after the blank lines: id %s, error %+v", r.ID, r.Error)
	}
}

// TestStdioMessageOverLinesPastBound: one message spread over lines each
// within the bound (JSON with newlines between its tokens) but longer in
// all than the bound and sdkLineSlack: the SDK's own bound ends the
// session, as it ended it at its default bound; nothing of the message
// runs. Such a message within the bound is answered.
func TestStdioMessageOverLinesPastBound(t *testing.T) {
	const bound = 4 << 10
	spread := func(id string, n int) string {
		var b strings.Builder
		b.WriteString(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"spread` + id + `.txt","content":"x"`)
		for b.Len() < n {
			b.WriteString(",\n" + `"pad` + strconv.Itoa(b.Len()) + `":"` + strings.Repeat("p", 1000) + `"`)
		}
		b.WriteString("}}}")
		return b.String()
	}
	e := newEnv(t, func(o *Options) { o.MaxStdioLineBytes = bound })
	c := serveRawStdio(t, context.Background(), e.srv)
	defer func() {
		c.p.clientOut.Close()
		io.Copy(io.Discard, c.p.clientIn)
	}()
	c.initialize()
	c.send(spread("1", bound/2))
	if r := c.reply(); string(r.ID) != "1" || r.Error != nil {
		t.Errorf("a message over lines within the bound: id %s, error %+v", r.ID, r.Error)
	}
	go io.WriteString(c.p.clientOut, spread("2", 3*bound)+"\n"+`{"jsonrpc":"2.0","id":3,"method":"ping"}`+"\n")
	select {
	case err := <-c.done:
		if err == nil || !strings.Contains(err.Error(), "maximum line length") {
			t.Errorf("the session ended with %v, want the SDK's bound", err)
		}
	case <-time.After(time.Minute): // a guard, not a figure
		t.Fatal("the session still runs a minute after a message over lines past the bound")
	}
	if _, err := os.Stat(filepath.Join(e.root, "spread2.txt")); err == nil {
		t.Error("the message past the bound ran")
	}
}

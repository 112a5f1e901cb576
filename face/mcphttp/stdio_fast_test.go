package mcphttp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// rawStdio is a line-level client of one ServeStdio session.
type rawStdio struct {
	t    *testing.T
	p    *stdioPipes
	out  *bufio.Reader
	done chan error
}

func startRawStdio(t *testing.T, srv *Server) *rawStdio {
	t.Helper()
	c := serveRawStdio(t, context.Background(), srv)
	t.Cleanup(func() {
		c.p.clientOut.Close()
		io.Copy(io.Discard, c.p.clientIn)
		if err := <-c.done; err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	})
	return c
}

// serveRawStdio serves srv on new pipes under ctx; ServeStdio's error
// comes on c.done, for the caller to read.
func serveRawStdio(t *testing.T, ctx context.Context, srv *Server) *rawStdio {
	p := newStdioPipes()
	c := &rawStdio{t: t, p: p, out: bufio.NewReader(p.clientIn), done: make(chan error, 1)}
	go func() {
		c.done <- srv.ServeStdio(ctx, p.serverIn, p.serverOut)
		p.serverOut.Close()
	}()
	return c
}

func (c *rawStdio) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.p.clientOut, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawStdio) recv() string {
	c.t.Helper()
	line, err := c.out.ReadString('\n')
	if err != nil {
		c.t.Fatalf("reading a reply: %v (read %q)", err, line)
	}
	return line
}

func (c *rawStdio) initialize() {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	c.recv()
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// TestStdioFastPathMatchesSDK sends every golden case, and the calls the
// fast path leaves to the SDK, as raw lines to two stdio sessions over
// identical workspaces, one with the fast path and one sending everything
// through the SDK, and requires the same reply line for each.
func TestStdioFastPathMatchesSDK(t *testing.T) {
	fast, slow := newEnv(t), newEnv(t)
	slow.srv.noFastPath = true
	fc, sc := startRawStdio(t, fast.srv), startRawStdio(t, slow.srv)
	// Before initialize the SDK refuses a call; the fast path must not answer it.
	before := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"a.txt"}}}`
	fc.send(before)
	sc.send(before)
	if f, s := fc.recv(), sc.recv(); f != s || !strings.Contains(f, "initialize") {
		t.Errorf("a call before initialize:\nfast %s\nsdk  %s", f, s)
	}
	fc.initialize()
	sc.initialize()
	var lines []string
	known := 0
	for i, c := range goldenCases {
		if c.tool != "nonexistent_tool" {
			known++
		}
		args, _ := json.Marshal(c.args)
		lines = append(lines, `{"jsonrpc":"2.0","id":`+itoa(i+1)+`,"method":"tools/call","params":{"name":"`+c.tool+`","arguments":`+string(args)+`}}`)
	}
	known += 3
	lines = append(lines,
		// ids the SDK writes back as given: a string that needs escapes, a negative number
		`{"jsonrpc":"2.0","id":"a<b\"c\u00e9","method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"a.txt"}}}`,
		`{"jsonrpc":"2.0","id":-7,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"b.txt"}}}`,
		// a call that fails
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"missing.txt"}}}`,
		// left to the SDK: an id it rewrites, a progress token, a batch-free notification
		`{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"a.txt"}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"a.txt"},"_meta":{"progressToken":1}}}`,
	)
	for _, l := range lines {
		fc.send(l)
		sc.send(l)
		f, s := normalize(fc.recv(), fast.root), normalize(sc.recv(), slow.root)
		f = escapedTimeRE.ReplaceAllString(f, "$$TIME")
		s = escapedTimeRE.ReplaceAllString(s, "$$TIME")
		if f != s {
			t.Errorf("%s:\nfast %s\nsdk  %s", l, f, s)
		}
	}
	if n := fast.srv.fastCalls.Load(); n != int64(known) {
		t.Errorf("fast path answered %d calls, want %d", n, known)
	}
	if n := slow.srv.fastCalls.Load(); n != 0 {
		t.Errorf("SDK-only server used the fast path %d times", n)
	}
}

// TestStdioFastPathCancel: a notifications/cancelled ends a call running on
// the fast path, which answers as the SDK answers a cancelled call.
func TestStdioFastPathCancel(t *testing.T) {
	fast, slow := newEnv(t), newEnv(t)
	slow.srv.noFastPath = true
	var replies []string
	for _, e := range []*env{fast, slow} {
		c := startRawStdio(t, e.srv)
		c.initialize()
		c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"exec","arguments":{"command":"echo started; sleep 600"}}}`)
		// A second call on the same session is answered while the first runs.
		c.send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"a.txt"}}}`)
		if r := c.recv(); !strings.Contains(r, `"id":6`) {
			t.Fatalf("first reply %s, want the read's (id 6)", r)
		}
		c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"test"}}`)
		replies = append(replies, c.recv())
	}
	if replies[0] != replies[1] || !strings.Contains(replies[0], `"id":5`) {
		t.Errorf("cancelled call:\nfast %s\nsdk  %s", replies[0], replies[1])
	}
	if fast.srv.fastCalls.Load() != 2 {
		t.Errorf("fast path answered %d calls, want 2", fast.srv.fastCalls.Load())
	}
}

// TestStdioFastPathLongLine: a request line longer than the fast path holds
// (a large write) goes to the SDK whole, and the session goes on.
func TestStdioFastPathLongLine(t *testing.T) {
	e := newEnv(t)
	c := startRawStdio(t, e.srv)
	c.initialize()
	content := strings.Repeat(strings.Repeat("y", 99)+`\n`, 3*stdioFastMaxLine/100) // lines of 100 bytes, JSON-escaped
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"long.out","content":"` + content + `"}}}`)
	if r := c.recv(); !strings.Contains(r, `"id":1`) || strings.Contains(r, `"isError":true`) {
		t.Fatalf("write reply: %.300s", r)
	}
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"long.out","limit":5000}}}`)
	if r := c.recv(); !strings.Contains(r, content) {
		t.Fatalf("read reply: %.300s", r)
	}
	if n := e.srv.fastCalls.Load(); n != 1 {
		t.Errorf("fast path answered %d calls, want 1 (the read; the long write went to the SDK)", n)
	}
}

// TestStdioFastPathBeforeConnectReturns: the SDK reads a session's first
// lines on its own goroutine, possibly before ServeStdio's Connect has
// returned the session to the fast path; a call read then still runs on
// the fast path (it waits for the session), where it once went to the SDK
// (which made TestStdioFastPathClose fail under load).
func TestStdioFastPathBeforeConnectReturns(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	e.srv.afterConnect = func() { <-release }
	c := startRawStdio(t, e.srv)
	c.initialize()
	sent := make(chan error, 1)
	go func() {
		_, err := io.WriteString(c.p.clientOut, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"echo fast"}}}`+"\n")
		sent <- err
	}()
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	// The call's line is read; give its Read the time to reach the fast
	// path's choice before the session is known.
	time.Sleep(50 * time.Millisecond)
	close(release)
	if l := c.recv(); !strings.Contains(l, `"id":1`) || !strings.Contains(l, "fast") {
		t.Fatalf("call: %q", l)
	}
	if n := e.srv.fastCalls.Load(); n != 1 {
		t.Errorf("fast path answered %d calls, want 1", n)
	}
}

// TestStdioSessionEndCancelsSDKCalls: a call the SDK runs for a stdio
// session (here every call: the fast path is off, as for a call with a
// progress token) is cancelled when the session is ended, by Close or by
// ServeStdio's context, rather than left to run until it ends on its own.
func TestStdioSessionEndCancelsSDKCalls(t *testing.T) {
	for _, end := range []string{"close", "context"} {
		t.Run(end, func(t *testing.T) {
			e := newEnv(t)
			e.srv.noFastPath = true
			entered := make(chan struct{}, 1)
			cancelled := make(chan error, 1)
			tool := blockingTool("zz_block", "done", entered, nil)
			tool.Handler = func(ctx context.Context, _ registry.Call) *mcp.CallToolResult {
				entered <- struct{}{}
				select {
				case <-ctx.Done():
					cancelled <- ctx.Err()
				case <-time.After(time.Minute): // a guard, not a figure
					cancelled <- errors.New("not cancelled within a minute")
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}
			}
			if err := e.srv.reg.Set("test", []registry.Tool{tool}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := serveRawStdio(t, ctx, e.srv)
			c.initialize()
			go io.Copy(io.Discard, c.out)
			c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"zz_block","arguments":{}}}`)
			<-entered
			if end == "close" {
				e.srv.Close()
			} else {
				cancel()
			}
			// Canceled, not the deadline of a call that ran on to its
			// own end.
			if err := <-cancelled; !errors.Is(err, context.Canceled) {
				t.Errorf("the running call ended with %v when the session ended (%s), want it cancelled", err, end)
			}
			<-c.done
			c.p.clientOut.Close()
			e.srv.stdioCallsMu.Lock()
			n := len(e.srv.stdioCalls)
			e.srv.stdioCallsMu.Unlock()
			if n != 0 {
				t.Errorf("%d sessions' calls still tracked after ServeStdio returned", n)
			}
		})
	}
}

// TestStdioFastPathClose: closing the Server ends a session whose call is
// running on the fast path: the call is cancelled and ServeStdio returns
// (goleak, in TestMain, checks that nothing is left running).
func TestStdioFastPathClose(t *testing.T) {
	e := newEnv(t)
	c := serveRawStdio(t, context.Background(), e.srv)
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"echo started; sleep 600"}}}`)
	// The ping's answer comes after the call started (calls are read in order).
	c.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if l := c.recv(); !strings.Contains(l, `"id":2`) {
		t.Fatalf("ping: %q", l)
	}
	go io.Copy(io.Discard, c.out) // whatever the cancelled call answers
	e.srv.Close()
	if err := <-c.done; !errors.Is(err, ErrClosed) {
		t.Errorf("ServeStdio after Close: %v, want ErrClosed", err)
	}
	c.p.clientOut.Close()
	if n := e.srv.fastCalls.Load(); n != 1 {
		t.Errorf("fast path answered %d calls, want 1", n)
	}
}

// TestStdioSessionEndWithStdoutBlocked: a client that stops reading stdout
// (its reply's write blocks) cannot keep its session alive: Close, or the
// cancellation of ServeStdio's context, still makes ServeStdio return, on
// the fast path and on the SDK's. The write left blocked ends once the test
// reads stdout (goleak, in TestMain).
func TestStdioSessionEndWithStdoutBlocked(t *testing.T) {
	for _, sdk := range []bool{false, true} {
		for _, end := range []string{"close", "context"} {
			t.Run(fmt.Sprintf("sdk=%v/%s", sdk, end), func(t *testing.T) {
				e := newEnv(t)
				e.srv.noFastPath = sdk
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				p := newStdioPipes()
				writing := make(chan struct{}, 1)
				out := writeSignal{w: p.serverOut, mark: `"id":1,`, writing: writing}
				done := make(chan error, 1)
				go func() { done <- e.srv.ServeStdio(ctx, p.serverIn, out) }()
				c := &rawStdio{t: t, p: p, out: bufio.NewReader(p.clientIn)}
				c.initialize()
				// Not read: io.Pipe holds no byte, so the reply's write blocks.
				c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"echo blocked"}}}`)
				<-writing
				if end == "close" {
					e.srv.Close()
				} else {
					cancel()
				}
				select {
				case <-done:
				case <-time.After(time.Minute): // a guard, not a figure
					t.Error("ServeStdio still running a minute after the session was ended, its stdout unread")
					go io.Copy(io.Discard, c.out)
					<-done
				}
				c.p.clientOut.Close()
				p.serverOut.Close()
				io.Copy(io.Discard, c.out)
			})
		}
	}
}

// writeSignal is a stdout that says when a write holding mark begins.
type writeSignal struct {
	w       io.Writer
	mark    string
	writing chan<- struct{}
}

func (s writeSignal) Write(p []byte) (int, error) {
	if strings.Contains(string(p), s.mark) {
		select {
		case s.writing <- struct{}{}:
		default:
		}
	}
	return s.w.Write(p)
}

// TestStdioFastPathLeavesToSDKWhatItReadsOtherwise: lines the fast path's
// decoding (encoding/json: keys matched without case, any depth, any space
// after the message) reads as a call the SDK reads otherwise: the SDK
// matches keys exactly (an "ID" is no id, a "Name" no name), refuses more
// than 1000 levels of nesting, and ends the session on anything but a
// newline or a carriage return after a message. Each line goes to a fresh
// session with the fast path and to one without, and the replies up to a
// ping's must be the same.
func TestStdioFastPathLeavesToSDKWhatItReadsOtherwise(t *testing.T) {
	args := `"arguments":{"path":"a.txt"}`
	deep := strings.Repeat("[", 1001) + strings.Repeat("]", 1001)
	for _, line := range []string{
		`{"jsonrpc":"2.0","ID":1,"method":"tools/call","params":{"name":"read_text_file",` + args + `}}`,
		`{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"read_text_file",` + args + `}}`,
		`{"JSONRPC":"2.0","id":1,"method":"tools/call","params":{"name":"read_text_file",` + args + `}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","Params":{"name":"read_text_file",` + args + `}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"read_text_file",` + args + `}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_text_file","Arguments":{"path":"a.txt"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"a.txt","x":` + deep + `}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_text_file",` + args + `}} `,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_text_file",` + args + "}}\t",
	} {
		var got [2]string
		for i, sdk := range []bool{false, true} {
			e := newEnv(t)
			e.srv.noFastPath = sdk
			c := serveRawStdio(t, context.Background(), e.srv)
			c.initialize()
			c.send(line)
			// The end of stdin waits for the line's answer, if any: no
			// later request may be answered before it (calls run
			// concurrently).
			c.p.clientOut.Close()
			rest, _ := io.ReadAll(c.out)
			got[i] = normalize(string(rest), e.root)
			if err := <-c.done; err != nil {
				got[i] += "(" + err.Error() + ")"
			}
			if n := e.srv.fastCalls.Load(); n != 0 {
				t.Errorf("%s: the fast path answered it", line)
			}
		}
		if got[0] != got[1] {
			t.Errorf("%s:\nfast %s\nsdk  %s", line, got[0], got[1])
		}
	}
}

// TestStdioFastPathIDInUse: a call whose id is that of a call still running
// on the fast path is dropped unanswered and not run, as the SDK drops a
// request whose id is in use, where it went to the SDK, which knew nothing
// of the first and ran it too.
func TestStdioFastPathIDInUse(t *testing.T) {
	var got [2]string
	for i, sdk := range []bool{false, true} {
		e := newEnv(t)
		e.srv.noFastPath = sdk
		c := serveRawStdio(t, context.Background(), e.srv)
		c.initialize()
		c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 0.3; echo first"}}}`)
		c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"second.txt","content":"x"}}}`)
		c.p.clientOut.Close()
		rest, _ := io.ReadAll(c.out)
		got[i] = string(rest)
		if err := <-c.done; err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
		if _, err := os.Stat(filepath.Join(e.root, "second.txt")); err == nil {
			t.Errorf("sdk=%v: the call with an id in use ran", sdk)
		}
	}
	if got[0] != got[1] || strings.Count(got[0], `"id":1`) != 1 {
		t.Errorf("a call with an id in use:\nfast %s\nsdk  %s", got[0], got[1])
	}
}

package mcphttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pipePair is one direction of a stdio connection.
type stdioPipes struct {
	serverIn  *io.PipeReader // server's stdin
	clientOut *io.PipeWriter // client writes here
	clientIn  *io.PipeReader // client reads here
	serverOut *io.PipeWriter // server's stdout
}

func newStdioPipes() *stdioPipes {
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	return &stdioPipes{serverIn: sr, clientOut: cw, clientIn: cr, serverOut: sw}
}

// connectStdio serves srv on in-memory pipes and returns a go-sdk client
// session over them, as LocalFilesystemBackend's stdio client would talk to
// `agent-backend daemon --local-only`.
func connectStdio(t *testing.T, srv *Server) *mcp.ClientSession {
	t.Helper()
	return connectStdioWith(t, srv, nil)
}

// connectStdioWith is connectStdio with the client's options.
func connectStdioWith(t *testing.T, srv *Server, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	p := newStdioPipes()
	done := make(chan error, 1)
	go func() {
		done <- srv.ServeStdio(context.Background(), p.serverIn, p.serverOut)
		p.serverOut.Close()
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: p.clientIn, Writer: p.clientOut}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		p.clientOut.Close()
		if err := <-done; err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("ServeStdio: %v", err)
		}
	})
	return cs
}

func TestStdio(t *testing.T) {
	e := newEnv(t)
	cs := connectStdio(t, e.srv)
	if n := len(toolNames(t, cs)); n != 15 {
		t.Errorf("%d tools over stdio, want 15", n)
	}
	if got := call(t, cs, "read_text_file", map[string]any{"path": "a.txt"}); got != "text:\nline1\nline2\nline3\n\n" {
		t.Errorf("read: %q", got)
	}
	if got := call(t, cs, "exec", map[string]any{"command": "echo $((6*7))"}); got != "text:\n42\n" {
		t.Errorf("exec: %q", got)
	}
	if got := call(t, cs, "read_text_file", map[string]any{"path": "../x"}); !strings.HasPrefix(got, "isError: true") {
		t.Errorf("escape: %q", got)
	}
}

// TestStdioEOF: the session ends cleanly (nil) when stdin closes.
func TestStdioEOF(t *testing.T) {
	e := newEnv(t)
	p := newStdioPipes()
	done := make(chan error, 1)
	go func() { done <- e.srv.ServeStdio(context.Background(), p.serverIn, p.serverOut) }()
	go io.Copy(io.Discard, p.clientIn)
	p.clientOut.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n"))
	p.clientOut.Close()
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio after EOF: %v", err)
	}
	p.serverOut.Close()
}

// TestStdioCancel: cancelling the context ends a session blocked on stdin,
// and Close ends another one.
func TestStdioCancel(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	p1, p2 := newStdioPipes(), newStdioPipes()
	d1, d2 := make(chan error, 1), make(chan error, 1)
	go func() { d1 <- e.srv.ServeStdio(ctx, p1.serverIn, p1.serverOut) }()
	go func() { d2 <- e.srv.ServeStdio(context.Background(), p2.serverIn, p2.serverOut) }()
	go io.Copy(io.Discard, p1.clientIn)
	go io.Copy(io.Discard, p2.clientIn)
	cancel()
	if err := <-d1; !errors.Is(err, context.Canceled) {
		t.Errorf("after cancel: %v", err)
	}
	// Close ends the second session whether or not it has registered yet
	// (registered: closed; not yet: refused).
	e.srv.Close()
	if err := <-d2; !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	for _, p := range []*stdioPipes{p1, p2} {
		p.clientOut.Close()
		p.serverOut.Close()
	}
}

// serveStdio serves a fresh env's Server on pipes; done yields ServeStdio's
// result, after which the server's stdout is closed.
func serveStdio(t *testing.T) (*stdioPipes, <-chan error) {
	e := newEnv(t)
	p := newStdioPipes()
	done := make(chan error, 1)
	go func() {
		done <- e.srv.ServeStdio(context.Background(), p.serverIn, p.serverOut)
		p.serverOut.Close()
	}()
	return p, done
}

// TestStdioEOFAnswersPendingRequests: a client that writes its requests and
// closes stdin at once (a script, a pipe) still gets every answer, including
// one that takes a while, before ServeStdio returns.
func TestStdioEOFAnswersPendingRequests(t *testing.T) {
	p, done := serveStdio(t)
	out := make(chan string, 1)
	go func() { b, _ := io.ReadAll(p.clientIn); out <- string(b) }()
	requests := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 0.3; echo slow-answer"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"ping"}`,
	}
	p.clientOut.Write([]byte(strings.Join(requests, "\n"))) // no final newline either
	p.clientOut.Close()
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio after EOF: %v", err)
	}
	got := <-out
	for _, want := range []string{`"id":1,"result"`, `"id":2,"result"`, `"id":3,"result"`, "slow-answer", `"id":4,"result"`} {
		if !strings.Contains(got, want) {
			t.Errorf("stdout lacks %s:\n%s", want, got)
		}
	}
}

// TestStdioEOFDoesNotWaitForCancelledRequests: a request the client
// cancelled before closing stdin is not waited for.
func TestStdioEOFDoesNotWaitForCancelledRequests(t *testing.T) {
	p, done := serveStdio(t)
	go io.Copy(io.Discard, p.clientIn)
	p.clientOut.Write([]byte(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 600"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`,
	}, "\n") + "\n"))
	p.clientOut.Close()
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio after EOF: %v", err)
	}
}

// TestStdioEOFWaitsForEachRequest: at the end of stdin the session waits for
// the answer of each request read, by its id, on the fast path and on the
// SDK's: a notifications/cancelled lets go of the call it names only (one
// naming another call, or no call, or naming it twice, does not end the
// wait for the others), and a request the SDK never answers (an id already
// in use, which it drops; an "ID" key, which it does not read as an id) is
// not waited for.
func TestStdioEOFWaitsForEachRequest(t *testing.T) {
	slow := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 0.3; echo second-answer"}}}`
	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"cancel another", []string{
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 600"}}}`,
			slow,
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		}, "second-answer"},
		{"cancel no call", []string{
			slow,
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`,
		}, "second-answer"},
		{"id in use", []string{
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 0.3; echo first-answer"}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		}, "first-answer"},
		{"ID key", []string{
			`{"jsonrpc":"2.0","ID":5,"method":"ping"}`,
			`{"jsonrpc":"2.0","id":6,"method":"ping"}`,
		}, `"id":6`},
	} {
		for _, sdk := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sdk=%v", c.name, sdk), func(t *testing.T) {
				e := newEnv(t)
				e.srv.noFastPath = sdk
				p, done, out := serveStdioAll(e)
				lines := append([]string{
					`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
					`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
				}, c.lines...)
				p.clientOut.Write([]byte(strings.Join(lines, "\n") + "\n"))
				p.clientOut.Close()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("ServeStdio after EOF: %v", err)
					}
				case <-time.After(time.Minute): // a guard, not a figure
					t.Error("ServeStdio still waiting a minute after EOF")
					e.srv.Close()
					<-done
				}
				if got := <-out; !strings.Contains(got, c.want) {
					t.Errorf("stdout lacks %s:\n%s", c.want, got)
				}
			})
		}
	}
}

// TestStdioEOFWithStdoutGone: a client that goes away (stdin and stdout
// both closed, as when its process dies) while a call runs does not keep
// the session waiting at EOF for an answer that can no longer be written.
func TestStdioEOFWithStdoutGone(t *testing.T) {
	for _, sdk := range []bool{false, true} {
		t.Run(fmt.Sprintf("sdk=%v", sdk), func(t *testing.T) {
			e := newEnv(t)
			e.srv.noFastPath = sdk
			c := serveRawStdio(t, context.Background(), e.srv)
			c.initialize()
			c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 0.3; echo late"}}}`)
			c.p.clientIn.Close()
			c.p.clientOut.Close()
			select {
			case <-c.done:
			case <-time.After(time.Minute): // a guard, not a figure
				t.Error("ServeStdio still waiting a minute after its client went away")
				e.srv.Close()
				<-c.done
			}
		})
	}
}

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pipedServer runs an in-process MCP server on the go-sdk's own stdio
// framing and returns a client session on it through the transport that
// mk builds over the server's stdout (r) and stdin (w).
func pipedServer(tb testing.TB, mk func(r io.ReadCloser, w io.WriteCloser) mcp.Transport) *mcp.ClientSession {
	tb.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "piped", Version: "1"}, nil)
	type bigArgs struct {
		N int `json:"n"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "big", Description: "answers n bytes"}, func(_ context.Context, _ *mcp.CallToolRequest, a bigArgs) (*mcp.CallToolResult, any, error) {
		return text(strings.Repeat("é", a.N/2)), nil, nil
	})
	type out struct {
		Sum int `json:"sum"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "sum", Description: "structured"}, func(_ context.Context, _ *mcp.CallToolRequest, a struct{ A, B int }) (*mcp.CallToolResult, out, error) {
		return nil, out{a.A + a.B}, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "a tool error"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, io.ErrUnexpectedEOF
	})
	inR, inW := io.Pipe()   // the server's stdin
	outR, outW := io.Pipe() // its stdout
	ctx, cancel := context.WithCancel(context.Background())
	ss, err := srv.Connect(ctx, &mcp.IOTransport{Reader: inR, Writer: outW}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, mk(outR, inW), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cs.Close()
		ss.Close()
		cancel()
		ss.Wait()
	})
	return cs
}

func sdkTransport(r io.ReadCloser, w io.WriteCloser) mcp.Transport {
	return &mcp.IOTransport{Reader: r, Writer: w}
}

func ourTransport(r io.ReadCloser, w io.WriteCloser) mcp.Transport {
	return newTransport(r, w, DefaultMaxMessage, slog.New(slog.DiscardHandler))
}

// TestTransportMatchesSDK: the daemon's framing (transport.go) and the
// go-sdk's IOTransport give the same answers to the same calls (the tool
// list, text up to 8 MiB, structured content, tool errors, unknown tools),
// as JSON.
func TestTransportMatchesSDK(t *testing.T) {
	sdk, ours := pipedServer(t, sdkTransport), pipedServer(t, ourTransport)
	ctx := context.Background()
	enc := func(v any, err error) string {
		if err != nil {
			return "error: " + err.Error()
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	if a, b := enc(sdk.ListTools(ctx, nil)), enc(ours.ListTools(ctx, nil)); a != b {
		t.Errorf("tools/list:\n sdk %s\nours %s", a, b)
	}
	for _, p := range []*mcp.CallToolParams{
		{Name: "big", Arguments: map[string]any{"n": 0}},
		{Name: "big", Arguments: map[string]any{"n": 1000}},
		{Name: "big", Arguments: map[string]any{"n": 8 << 20}},
		{Name: "sum", Arguments: map[string]any{"A": 2, "B": 3}},
		{Name: "fail"},
		{Name: "nope"},
	} {
		a, b := enc(sdk.CallTool(ctx, p)), enc(ours.CallTool(ctx, p))
		if a != b {
			t.Errorf("%s %v:\n sdk %.300s\nours %.300s", p.Name, p.Arguments, a, b)
		}
	}
}

// BenchmarkUpstreamTransport is one tools/call round trip to an in-process
// server through the go-sdk's IOTransport and through the daemon's framing,
// with answers of 1 KiB and 1 MiB. Run:
//
//	go test -run '^$' -bench UpstreamTransport -benchmem ./upstream/
func BenchmarkUpstreamTransport(b *testing.B) {
	for _, tr := range []struct {
		name string
		mk   func(io.ReadCloser, io.WriteCloser) mcp.Transport
	}{{"sdk", sdkTransport}, {"daemon", ourTransport}} {
		for _, n := range []int{1 << 10, 1 << 20} {
			b.Run(tr.name+"/"+byteSize(n), func(b *testing.B) {
				cs := pipedServer(b, tr.mk)
				p := &mcp.CallToolParams{Name: "big", Arguments: map[string]any{"n": n}}
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := cs.CallTool(context.Background(), p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// readMethods reads n messages from c and returns their methods (requests
// and notifications) in order.
func readMethods(t *testing.T, c mcp.Connection, n int) []string {
	t.Helper()
	var got []string
	for range n {
		m, err := c.Read(context.Background())
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		r, ok := m.(*jsonrpc.Request)
		if !ok {
			t.Fatalf("after %q: %#v, want a notification", got, m)
		}
		got = append(got, r.Method)
	}
	return got
}

// TestTransportEnds: the transport reads the upstream's stdout itself
// (conn.Read): lines, a batch given one message at a time, a last line
// without a newline counted at the end of the output, after which the
// stream is dead with io.EOF; exited lets the session read what the
// process wrote before it exited and waits for that end; and a stream held
// open past exited's grace is cut (io.EOF) and its pipe closed.
func TestTransportEnds(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	outR, outW := io.Pipe()
	_, stdinW := io.Pipe()
	tr := newTransport(outR, stdinW, DefaultMaxMessage, log)
	c, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		io.WriteString(outW, `{"jsonrpc":"2.0","method":"notifications/a"}`+"\n"+`[{"jsonrpc":"2.0","method":"notifications/b"},{"jsonrpc":"2.0","method":"notifications/c"}]`+"\n"+`{"jsonrpc":"2.0","method":"notifications/d"}`)
		outW.Close()
	}()
	exited := make(chan struct{})
	go func() {
		tr.exited(time.Hour) // the stream's end, not the grace, ends it
		close(exited)
	}()
	if got := readMethods(t, c, 4); strings.Join(got, " ") != "notifications/a notifications/b notifications/c notifications/d" {
		t.Fatalf("read %q", got)
	}
	if _, err := c.Read(context.Background()); err != io.EOF {
		t.Fatalf("after the output ended: %v, want io.EOF", err)
	}
	<-exited
	if err := tr.err(); err != io.EOF {
		t.Fatalf("the stream ended with %v, want io.EOF", err)
	}

	// A pipe held open after the exit (a process that escaped the kill):
	// what was written is read, then the grace ends the stream.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tr2 := newTransport(r, stdinW, DefaultMaxMessage, log)
	c2, err := tr2.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, `{"jsonrpc":"2.0","method":"notifications/e"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if got := readMethods(t, c2, 1); got[0] != "notifications/e" {
		t.Fatalf("read %q", got)
	}
	tr2.exited(time.Millisecond)
	if _, err := c2.Read(context.Background()); err != io.EOF {
		t.Fatalf("a stream held open past the grace: %v, want io.EOF", err)
	}
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("the pipe after exited: %v, want it closed", err)
	}
}

// TestTransportKillWakesRead: a Read blocked on the upstream's stdout
// (an *os.File, as the sandbox hands it out) ends when the stream is
// killed (a write to its stdin failed), with the kill's reason, as the
// session's calls then must; Close ends one with the connection closed.
func TestTransportKillWakesRead(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, how := range []string{"kill", "close"} {
		t.Run(how, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			_, stdinW := io.Pipe()
			tr := newTransport(r, stdinW, DefaultMaxMessage, log)
			c, err := tr.Connect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			read := make(chan error, 1)
			go func() {
				_, err := c.Read(context.Background())
				read <- err
			}()
			waitBlockedInRead(t)
			broken := errors.New("writing to its stdin: broken")
			want := broken
			if how == "kill" {
				tr.kill(broken)
			} else {
				c.Close()
				want = mcp.ErrConnectionClosed
			}
			select {
			case err := <-read:
				if !errors.Is(err, want) {
					t.Fatalf("Read after %s: %v, want %v", how, err, want)
				}
			case <-time.After(60 * time.Second): // a guard against hanging, not a measure
				t.Fatalf("Read still blocked after %s", how)
			}
		})
	}
}

// waitBlockedInRead waits until a goroutine is blocked in conn.Read on
// its pipe (in Go's poller), so what ends it is known to wake it.
func waitBlockedInRead(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for range 10000 { // a guard against hanging, not a measure
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "[IO wait") && strings.Contains(g, "upstream.(*conn).Read(") {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no goroutine blocked in conn.Read")
}

// stdinFunc is an upstream's stdin that calls write for each line.
type stdinFunc func(p []byte) (int, error)

func (f stdinFunc) Write(p []byte) (int, error) { return f(p) }
func (f stdinFunc) Close() error                { return nil }

// TestWriteCompletedAsItsCallerLeft: a caller whose context ends the
// moment after its line was written (a client that went away just then)
// leaves the stream whole: the write completed, so the server, which reads
// its stdin, is not restarted for it. Here the context ends inside the
// write, after the line was taken, and the write returns some time later.
func TestWriteCompletedAsItsCallerLeft(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tr := newTransport(io.NopCloser(strings.NewReader("")), stdinFunc(func(p []byte) (int, error) {
		cancel()                          // the caller leaves as the line is taken
		time.Sleep(50 * time.Millisecond) // and the write says so a moment later
		return len(p), nil
	}), DefaultMaxMessage, slog.New(slog.DiscardHandler))
	c, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, &jsonrpc.Request{Method: "notifications/x"}); err != nil {
		t.Fatalf("a write that completed: %v", err)
	}
	time.Sleep(writeGrace + 200*time.Millisecond) // past the grace a blocked write gets
	select {
	case <-tr.dead:
		t.Fatalf("the stream was broken for a write that completed: %v", tr.deadErr)
	default:
	}
}

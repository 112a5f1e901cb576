package upstream

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

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

// TestPushTransportEnds: what the upstream writes before the session
// connects waits for it and arrives; a last line without a newline counts
// at the end of the output, after which the stream is dead with io.EOF;
// and once the connection is closed, nothing more is taken, not even a
// partial line.
func TestPushTransportEnds(t *testing.T) {
	_, stdinW := io.Pipe()
	tr := newPushTransport(stdinW, DefaultMaxMessage, slog.New(slog.DiscardHandler))
	wrote := make(chan error, 1)
	go func() {
		_, err := tr.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/a"}` + "\n" + `{"jsonrpc":"2.0","method":"notifications/b"}`))
		if err == nil {
			tr.OutputEnded()
		}
		wrote <- err
	}()
	c, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"notifications/a", "notifications/b"} {
		m, err := c.Read(context.Background())
		if err != nil {
			t.Fatalf("reading %s: %v", want, err)
		}
		if r, ok := m.(*jsonrpc.Request); !ok || r.Method != want {
			t.Fatalf("got %#v, want %s", m, want)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(context.Background()); err != io.EOF {
		t.Fatalf("after the output ended: %v, want io.EOF", err)
	}

	_, stdinW2 := io.Pipe()
	tr2 := newPushTransport(stdinW2, DefaultMaxMessage, slog.New(slog.DiscardHandler))
	c2, err := tr2.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()
	if n, err := tr2.Write([]byte(`{"partial`)); err == nil || n != 0 || tr2.fr.size != 0 {
		t.Fatalf("a write after Close: %d, %v, %d bytes kept", n, err, tr2.fr.size)
	}
}

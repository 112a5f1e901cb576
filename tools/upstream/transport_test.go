package upstream

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

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

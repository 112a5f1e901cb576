package mcphttp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
)

// Benchmarks of one tools/call read_text_file of a 4 KiB file over loopback
// HTTP, with the plain net/http JSON-RPC handler that answers the same bytes
// as the floor. Run:
//
//	go test -run '^$' -bench . -benchmem ./face/mcphttp/
//
// The client side (net/http, one keep-alive connection) is the same in every
// case, so differences are the server's.

var benchFile = strings.Repeat("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n", 64) // 4096 bytes

const benchCallRead = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"bench.txt"}}}`

func benchPost(b *testing.B, url, accept string) { benchPostAs(b, url, accept, "") }

// benchPostAs is benchPost with "Authorization: Bearer token" ("" none).
func benchPostAs(b *testing.B, url, accept, token string) {
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	body := []byte(benchCallRead)
	// One call outside the loop checks the answer.
	check := func(resp *http.Response) {
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(out, []byte("0123456789abcdef")) {
			b.Fatalf("status %d: %.300s", resp.StatusCode, out)
		}
	}
	do := func() *http.Response {
		req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", accept)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		return resp
	}
	check(do())
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp := do()
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

func benchEnv(b *testing.B, opts ...envOpt) (*env, string) {
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "bench.txt"), []byte(benchFile), 0o644); err != nil {
		b.Fatal(err)
	}
	e := newEnvAt(b, root, opts...)
	return e, e.url()
}

// BenchmarkReadTextFile is the daemon's path: the checks, then the fast
// path (fastpath.go), reply as JSON (what clients accepting both get) or as
// SSE (clients accepting only SSE).
func BenchmarkReadTextFile(b *testing.B) {
	b.Run("json", func(b *testing.B) {
		_, url := benchEnv(b)
		benchPost(b, url, "application/json, text/event-stream")
	})
	b.Run("sse", func(b *testing.B) {
		_, url := benchEnv(b)
		benchPost(b, url, "text/event-stream")
	})
	// json-token is json with the daemon's token, and json-tokenfile with
	// a token of the token file (--tokens): admission looks it up, and
	// the call is that caller's.
	b.Run("json-token", func(b *testing.B) {
		_, url := benchEnv(b, func(o *Options) { o.AuthToken = "bench-token" })
		benchPostAs(b, url, "application/json, text/event-stream", "bench-token")
	})
	b.Run("json-tokenfile", func(b *testing.B) {
		sum := sha256.Sum256([]byte("file-token"))
		set, err := httpguard.ParseTokens("tokens.json", []byte(`{"tokens":[{"name":"bench","sha256":"`+hex.EncodeToString(sum[:])+`"}]}`))
		if err != nil {
			b.Fatal(err)
		}
		tokens := new(atomic.Pointer[httpguard.TokenSet])
		tokens.Store(set)
		_, url := benchEnv(b, func(o *Options) { o.AuthToken, o.Tokens = "bench-token", tokens })
		benchPostAs(b, url, "application/json, text/event-stream", "file-token")
	})
	// sdk-path is the same server with the fast path off: every request
	// through the SDK's stateless handler (one shared mcp.Server), which is
	// what every request would take without fastpath.go.
	b.Run("sdk-path", func(b *testing.B) {
		e, url := benchEnv(b)
		e.srv.noFastPath = true
		benchPost(b, url, "application/json, text/event-stream")
	})
	// naive is the reference daemon's design, for comparison: a new MCP
	// server (tool table, schemas) built for every request, SSE replies.
	// The request is handed to the SDK as the server's own SDK path hands
	// it (serveSDK, with the caller admission named: here the loopback's).
	b.Run("naive-server-per-request", func(b *testing.B) {
		e, _ := benchEnv(b)
		opts := e.srv.opts
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s, err := New(opts)
			if err != nil {
				b.Fatal(err)
			}
			s.serveSDK(s.sseH, w, r, admit.Local)
		})
		hs := httptest.NewServer(h)
		defer hs.Close()
		benchPost(b, hs.URL, "application/json, text/event-stream")
	})
}

// BenchmarkEchoFloor is a plain net/http JSON-RPC handler that reads the
// same file through the same Workspace and answers the same result: the
// floor for any MCP server on net/http.
func BenchmarkEchoFloor(b *testing.B) {
	root := b.TempDir()
	os.WriteFile(filepath.Join(root, "bench.txt"), []byte(benchFile), 0o644)
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	type rpc struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			Arguments struct {
				Path string `json:"path"`
			} `json:"arguments"`
		} `json:"params"`
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req rpc
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		lines, err := ws.ReadLines(context.Background(), req.Params.Arguments.Path, fsops.LineRange{})
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"jsonrpc": "2.0", "id": req.ID,
			"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Join(lines.Lines, "\n")}}},
		})
	})
	hs := httptest.NewServer(h)
	defer hs.Close()
	benchPost(b, hs.URL, "application/json")
}

// benchCallBody posts one tools/call per iteration.
func benchCall(b *testing.B, url, body string, parallel int) {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	post := func() {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || bytes.Contains(out, []byte(`"isError":true`)) {
			b.Fatalf("status %d: %.300s", resp.StatusCode, out)
		}
	}
	post()
	b.ReportAllocs()
	b.ResetTimer()
	if parallel <= 1 {
		for b.Loop() {
			post()
		}
		return
	}
	b.SetParallelism(parallel) // goroutines per GOMAXPROCS
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			post()
		}
	})
}

// BenchmarkTools: the other hot calls of docs/performance.md's comparison, and
// read_text_file from 8 concurrent clients per CPU.
func BenchmarkTools(b *testing.B) {
	root := b.TempDir()
	os.WriteFile(filepath.Join(root, "bench.txt"), []byte(benchFile), 0o644)
	os.MkdirAll(filepath.Join(root, "hundred"), 0o755)
	for i := range 100 {
		os.WriteFile(filepath.Join(root, "hundred", "f"+itoa(i)+".txt"), []byte("x"), 0o644)
	}
	e := newEnvAt(b, root)
	b.Run("read_text_file-8-concurrent", func(b *testing.B) { benchCall(b, e.url(), benchCall4K, 8) })
	b.Run("list_directory-100", func(b *testing.B) {
		benchCall(b, e.url(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_directory","arguments":{"path":"hundred"}}}`, 1)
	})
	b.Run("exec-true", func(b *testing.B) {
		benchCall(b, e.url(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"true"}}}`, 1)
	})
}

const benchCall4K = benchCallRead

// BenchmarkExecFirstProgress measures, over streamable HTTP with a go-sdk
// client, how long after an exec call starts its first progress
// notification arrives (first-progress-ms) for a command that prints at
// once and then runs 50 ms more, against the whole call (ns/op). Run:
//
//	go test -run '^$' -bench ExecFirstProgress -benchtime 50x ./face/mcphttp/
func BenchmarkExecFirstProgress(b *testing.B) {
	e := newEnv(b)
	first := make(chan time.Time, 64)
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			select {
			case first <- time.Now():
			default:
			}
		}})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.url()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	var total time.Duration
	n := 0
	for b.Loop() {
		for len(first) > 0 {
			<-first
		}
		params := &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "echo ready; sleep 0.05"}}
		params.SetProgressToken(n)
		start := time.Now()
		res, err := cs.CallTool(context.Background(), params)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
		select {
		case t := <-first:
			total += t.Sub(start)
			n++
		default:
			b.Fatal("no progress notification before the result")
		}
	}
	b.ReportMetric(float64(total.Microseconds())/float64(n)/1000, "first-progress-ms")
}

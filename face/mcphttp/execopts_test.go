package mcphttp

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestExecOptions: exec's optional timeout, cwd and stderr; without them
// exec answers as always (the differential interop suite pins that).
func TestExecOptions(t *testing.T) {
	e := newEnv(t)
	cs := e.connect(t, nil)
	if err := os.MkdirAll(filepath.Join(e.root, "sub/dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	callRes := func(args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	text := func(r *mcp.CallToolResult) string { return r.Content[0].(*mcp.TextContent).Text }

	if r := callRes(map[string]any{"command": "pwd", "cwd": "sub/dir"}); r.IsError || strings.TrimSpace(text(r)) != filepath.Join(e.root, "sub/dir") {
		t.Errorf("cwd: %v %q", r.IsError, text(r))
	}
	for _, bad := range []string{"..", "../..", "/etc", "sub/missing", "hello.txt"} {
		if r := callRes(map[string]any{"command": "pwd", "cwd": bad}); !r.IsError || (!strings.HasPrefix(text(r), "Invalid cwd") && !strings.HasPrefix(text(r), "Path escapes")) {
			t.Errorf("cwd %q: %v %q", bad, r.IsError, text(r))
		}
	}
	if r := callRes(map[string]any{"command": "sleep 5", "timeout": 1}); !r.IsError || !strings.Contains(text(r), "timed out after 1s") {
		t.Errorf("timeout: %v %q", r.IsError, text(r))
	}
	if r := callRes(map[string]any{"command": "true", "timeout": 100000}); !r.IsError || !strings.Contains(text(r), "Invalid timeout 100000") {
		t.Errorf("a timeout over the daemon's: %v %q", r.IsError, text(r))
	}
	var sep struct {
		ExitCode       int `json:"exitCode"`
		Stdout, Stderr string
	}
	r := callRes(map[string]any{"command": "echo out; echo err >&2; exit 3", "stderr": "separate"})
	if err := json.Unmarshal([]byte(text(r)), &sep); err != nil || !r.IsError || sep.ExitCode != 3 || sep.Stdout != "out\n" || sep.Stderr != "err\n" {
		t.Errorf("stderr separate: %v %q", r.IsError, text(r))
	}
	var mer struct {
		ExitCode int `json:"exitCode"`
		Output   string
	}
	r = callRes(map[string]any{"command": "echo a; echo b >&2; echo c", "stderr": "merged"})
	if err := json.Unmarshal([]byte(text(r)), &mer); err != nil || r.IsError || mer.Output != "a\nb\nc\n" {
		t.Errorf("stderr merged: %v %q", r.IsError, text(r))
	}
	if r := callRes(map[string]any{"command": "true", "stderr": "both"}); !r.IsError {
		t.Errorf("stderr both: %q", text(r))
	}
}

// TestExecProgress: with a progress token, exec's output arrives as
// progress notifications while the command runs, each with more progress
// than the last, carrying the whole output, over streamable HTTP and over
// stdio with the go-sdk client. (The client runs notification handlers on
// goroutines of their own, so when they run says nothing about the wire's
// order; TestExecProgressWireOrder checks that.)
func TestExecProgress(t *testing.T) {
	const script = `for i in 1 2 3 4 5; do echo line$i; sleep 0.15; done; echo done >&2`
	check := func(t *testing.T, connect func(opts *mcp.ClientOptions) *mcp.ClientSession) {
		var mu sync.Mutex
		var msgs []string
		var last float64
		ordered := true
		cs := connect(&mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			if req.Params.Progress <= last {
				ordered = false
			}
			last = req.Params.Progress
			msgs = append(msgs, req.Params.Message)
		}})
		params := &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": script}}
		params.SetProgressToken("tok-1")
		res, err := cs.CallTool(context.Background(), params)
		if err != nil || res.IsError {
			t.Fatalf("exec: %v %+v", err, res)
		}
		want := "line1\nline2\nline3\nline4\nline5\n"
		var got string
		var n int
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			got, n = strings.Join(msgs, ""), len(msgs)
			mu.Unlock()
			if strings.Contains(got, "done") {
				break
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if !ordered || n < 2 {
			t.Errorf("%d notifications, increasing %v: %q", n, ordered, msgs)
		}
		if !strings.HasPrefix(got, want) || !strings.Contains(got, "done") {
			t.Errorf("the notifications carried %q", got)
		}
	}
	t.Run("http", func(t *testing.T) {
		e := newEnv(t)
		check(t, func(opts *mcp.ClientOptions) *mcp.ClientSession {
			c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
			cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.url()}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			return cs
		})
	})
	t.Run("stdio", func(t *testing.T) {
		e := newEnv(t)
		check(t, func(opts *mcp.ClientOptions) *mcp.ClientSession { return connectStdioWith(t, e.srv, opts) })
	})
}

// TestExecProgressWireOrder reads a progress-token call's SSE response as
// the bytes arrive: every notification comes before the result.
func TestExecProgressWireOrder(t *testing.T) {
	e := newEnv(t)
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"exec","arguments":{"command":"echo a; sleep 0.2; echo b; sleep 0.2; echo c >&2"},"_meta":{"progressToken":"w"}}}`
	resp, got := rawPost(t, e.url(), "POST", body, map[string]string{"Accept": "application/json, text/event-stream"})
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), got)
	}
	result := strings.Index(got, `"id":7`)
	lastNote := strings.LastIndex(got, `"notifications/progress"`)
	if result < 0 || lastNote < 0 || lastNote > result || strings.Count(got, `"notifications/progress"`) < 2 {
		t.Fatalf("notifications and the result out of order:\n%s", got)
	}
	for _, want := range []string{`"message":"a\n"`, `"message":"b\n"`, `c\n`} {
		if !strings.Contains(got[:result], want) {
			t.Errorf("no notification with %s before the result:\n%s", want, got)
		}
	}
}

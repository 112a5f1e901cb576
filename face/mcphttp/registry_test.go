package mcphttp

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// testTool is a tool of the "test" provider that answers text, or blocks
// until release is closed when it is not nil.
func testTool(name, text string, release chan struct{}) registry.Tool {
	return blockingTool(name, text, nil, release)
}

// blockingTool is testTool that also signals entered when a call starts.
func blockingTool(name, text string, entered, release chan struct{}) registry.Tool {
	return registry.Tool{
		Name: name, Title: "Test " + name, Description: "A tool of the test provider.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{}},
		Handler: func(ctx context.Context, _ registry.Call) *mcp.CallToolResult {
			if entered != nil {
				entered <- struct{}{}
			}
			if release != nil {
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
		},
	}
}

// TestListChangedStdio: a provider that adds and then removes a tool while a
// stdio client is connected; the client gets
// notifications/tools/list_changed each time and then sees the new list,
// and can call the new tool.
func TestListChangedStdio(t *testing.T) {
	e := newEnv(t)
	reg := e.srv.reg
	changed := make(chan struct{}, 8)
	p := newStdioPipes()
	done := make(chan error, 1)
	go func() {
		done <- e.srv.ServeStdio(context.Background(), p.serverIn, p.serverOut)
		p.serverOut.Close()
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: p.clientIn, Writer: p.clientOut}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cs.Close()
		p.clientOut.Close()
		<-done
	}()
	before := toolNames(t, cs)

	for _, step := range []struct {
		name  string
		tools []registry.Tool
		want  []string
	}{
		{"add", []registry.Tool{testTool("zz_ping", "pong", nil)}, append(slices.Clone(before), "zz_ping")},
		{"remove", nil, before},
	} {
		if err := reg.Set("test", step.tools); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no notifications/tools/list_changed", step.name)
		}
		got := toolNames(t, cs)
		slices.Sort(got)
		want := slices.Sorted(slices.Values(step.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s: tools %v, want %v", step.name, got, want)
		}
		if step.name == "add" {
			if got := call(t, cs, "zz_ping", map[string]any{}); got != "text:pong\n" && !strings.Contains(got, "pong") {
				t.Errorf("zz_ping: %q", got)
			}
		}
	}
}

// TestFastPathListFollowsRegistry: the fast path's tools/list, cached, is
// rebuilt when the registry changes, and stays equal to the SDK's answer.
func TestFastPathListFollowsRegistry(t *testing.T) {
	e := newEnv(t)
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	list := func(fast bool) string {
		e.srv.noFastPath = !fast
		defer func() { e.srv.noFastPath = false }()
		resp, got := rawPost(t, e.url(), "POST", body, map[string]string{"Accept": "application/json"})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, got)
		}
		return got
	}
	first := list(true)
	if strings.Contains(first, "zz_ping") {
		t.Fatal("zz_ping listed before it was added")
	}
	if err := e.srv.reg.Set("test", []registry.Tool{testTool("zz_ping", "pong", nil)}); err != nil {
		t.Fatal(err)
	}
	fast, sdk := list(true), list(false)
	if !strings.Contains(fast, `"name":"zz_ping"`) {
		t.Errorf("fast path's tools/list after the change lacks zz_ping: %s", fast)
	}
	if fast != sdk {
		t.Errorf("fast path and SDK differ:\nfast: %s\n sdk: %s", fast, sdk)
	}
	if err := e.srv.reg.Set("test", nil); err != nil {
		t.Fatal(err)
	}
	if got := list(true); got != first {
		t.Errorf("after removing zz_ping: %s\nwant %s", got, first)
	}
}

// TestRegistryBusy: a call past the registry's concurrency cap (and its
// queue wait) is an isError result saying the server is busy and which
// limit, on both the fast path and the SDK's.
func TestRegistryBusy(t *testing.T) {
	for _, fast := range []bool{true, false} {
		reg := registry.New(registry.Options{MaxConcurrent: 1, QueueWait: 50 * time.Millisecond})
		entered, release := make(chan struct{}, 1), make(chan struct{})
		if err := reg.Set("test", []registry.Tool{blockingTool("block", "done", entered, release)}); err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, func(o *Options) { o.Registry = reg; o.MaxInflightPerIP = -1 })
		e.srv.noFastPath = !fast
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","arguments":{}}}`
		hdr := map[string]string{"Accept": "application/json, text/event-stream"}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", e.url(), strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", hdr["Accept"])
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		select {
		case <-entered: // the first call holds the only slot
		case <-time.After(5 * time.Second):
			t.Fatal("the first call never started")
		}
		_, got := rawPost(t, e.url(), "POST", body, hdr)
		close(release)
		wg.Wait()
		var env struct {
			Result mcp.CallToolResult `json:"result"`
		}
		if i := strings.Index(got, "{"); i >= 0 {
			_ = json.Unmarshal([]byte(got[i:]), &env)
		}
		if !env.Result.IsError || !strings.Contains(got, "Server busy, retry") || !strings.Contains(got, "concurrent tool calls") {
			t.Errorf("fast=%v: a call past the cap answered %s; want an isError result naming the limit", fast, got)
		}
	}
}

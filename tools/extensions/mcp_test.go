package extensions

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/face/mcphttp"
)

// TestMCPListChanged: over the daemon's MCP server (stdio) with the go-sdk
// client: the extension's tools are listed and called, an edit reaches the
// client as notifications/tools/list_changed and the new version answers.
func TestMCPListChanged(t *testing.T) {
	v1 := "def h(p):\n    return 'one'\ndef describe_extension():\n    return Extension(name='live', tools=[Tool(name='v', description='version', handler=h)])\n"
	f := start(t, map[string]string{"live.star": v1}, nil)
	srv, err := mcphttp.New(mcphttp.Options{Workspace: f.ws, Registry: f.reg, RootDir: f.ws.Root()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	changed := make(chan struct{}, 8)
	toSrvR, toSrvW := io.Pipe()
	fromSrvR, fromSrvW := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeStdio(context.Background(), toSrvR, fromSrvW)
		fromSrvW.Close()
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(context.Background(), &mcp.IOTransport{Reader: fromSrvR, Writer: toSrvW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cs.Close(); toSrvW.Close(); <-done }()
	call := func() string {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "live__v", Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	if got := call(); got != "one" {
		t.Fatalf("v1: %q", got)
	}
	write(t, f.dir, "live.star", strings.Replace(v1, "'one'", "'two'", 1))
	select {
	case <-changed:
	case <-time.After(20 * time.Second): // a hang guard
		t.Fatal("no notifications/tools/list_changed after the edit")
	}
	if got := call(); got != "two" {
		t.Errorf("after list_changed: %q", got)
	}
}

// TestSQLiteOverMCP: the sqlite module end to end, over the daemon's MCP
// server (stdio) with the go-sdk client: a table made and filled by one
// tool, read back by another, and a refused path is an error result.
func TestSQLiteOverMCP(t *testing.T) {
	f := start(t, map[string]string{"db.star": sqliteExt}, nil)
	srv, err := mcphttp.New(mcphttp.Options{Workspace: f.ws, Registry: f.reg, RootDir: f.ws.Root()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	toSrvR, toSrvW := io.Pipe()
	fromSrvR, fromSrvW := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeStdio(context.Background(), toSrvR, fromSrvW)
		fromSrvW.Close()
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.IOTransport{Reader: fromSrvR, Writer: toSrvW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cs.Close(); toSrvW.Close(); <-done }()
	call := func(tool string, args map[string]any) (string, bool) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	for _, step := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"db__execute", map[string]any{"path": "m.db", "sql": "CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)"}, `{"last_insert_id":0,"rows_affected":0}`},
		{"db__execute", map[string]any{"path": "m.db", "sql": "INSERT INTO kv VALUES (?, ?), (?, ?)", "params": []any{"a", "1", "b", nil}}, `{"last_insert_id":2,"rows_affected":2}`},
		{"db__query", map[string]any{"path": "m.db", "sql": "SELECT k, v FROM kv ORDER BY k"}, `[{"k":"a","v":"1"},{"k":"b","v":null}]`},
		{"db__tables", map[string]any{"path": "m.db"}, `[{"name":"kv"}]`},
	} {
		if txt, isErr := call(step.tool, step.args); isErr || txt != step.want {
			t.Errorf("%s %v: %q isError=%v; want %q", step.tool, step.args, txt, isErr, step.want)
		}
	}
	if txt, isErr := call("db__query", map[string]any{"path": "../m.db", "sql": "SELECT 1"}); !isErr || !strings.Contains(txt, "sqlite.query: ") {
		t.Errorf("../m.db over MCP: %q isError=%v", txt, isErr)
	}
}

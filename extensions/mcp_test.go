package extensions

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/mcphttp"
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

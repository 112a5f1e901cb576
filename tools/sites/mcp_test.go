package sites

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/face/mcphttp"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// TestMCPEndToEnd: the site's tools through the daemon's MCP server and the
// go-sdk client: listed, instructions given, read_page and run_command
// answering as GET and POST do, refusals as isError.
func TestMCPEndToEnd(t *testing.T) {
	s, _ := exampleSite(t, nil)
	reg := registry.New(registry.Options{})
	if err := reg.Set("site", s.Tools()); err != nil {
		t.Fatal(err)
	}
	srv, err := mcphttp.New(mcphttp.Options{Workspace: s.ws, Registry: reg, RootDir: s.ws.Root(), Instructions: Instructions})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	cs, closeAll := stdioSession(t, srv)
	defer closeAll()
	if got := cs.InitializeResult().Instructions; !strings.Contains(got, "This server also serves a tool site") {
		t.Errorf("instructions: %q", got)
	}
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "read_page,run_command" {
		t.Errorf("tools: %v", names)
	}
	call := func(name string, args map[string]any) (string, bool) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	if txt, isErr := call("read_page", map[string]any{"path": "data"}); isErr || !strings.Contains(txt, "# Data") {
		t.Errorf("read_page: %q %v", txt, isErr)
	}
	txt, isErr := call("run_command", map[string]any{"path": "data", "command": []string{"head", "-n", "2", "cities.csv"}})
	var res ActionResponse
	if err := json.Unmarshal([]byte(txt), &res); err != nil || isErr || res.Stdout != "name,country,population\nTokyo,JP,37400068\n" {
		t.Errorf("run_command: %q %v", txt, isErr)
	}
	if txt, isErr := call("run_command", map[string]any{"path": "", "command": []string{"rm", "-rf", "."}}); !isErr || !strings.Contains(txt, "command not allowed") {
		t.Errorf("a refused command: %q %v", txt, isErr)
	}
	if txt, isErr := call("read_page", map[string]any{"path": "../etc/passwd"}); !isErr || !strings.Contains(txt, "path traversal") {
		t.Errorf("a traversal: %q %v", txt, isErr)
	}
}

// stdioSession connects a go-sdk client to srv's stdio entry point over a
// pair of pipes.
func stdioSession(t *testing.T, srv *mcphttp.Server) (*mcp.ClientSession, func()) {
	t.Helper()
	toSrvR, toSrvW := io.Pipe()
	fromSrvR, fromSrvW := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeStdio(context.Background(), toSrvR, fromSrvW)
		fromSrvW.Close()
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).
		Connect(context.Background(), &mcp.IOTransport{Reader: fromSrvR, Writer: toSrvW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs, func() { cs.Close(); toSrvW.Close(); <-done }
}

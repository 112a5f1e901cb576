package workspace

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// TestWriteFileAbsolutePath: write_file of /etc/passwd writes etc/passwd
// inside the workspace (directory and memory), answers with the reference's
// exact text naming the path as given, leaves the host's file alone, and
// the tool's description tells the agent so before it writes.
func TestWriteFileAbsolutePath(t *testing.T) {
	host, hostErr := os.ReadFile("/etc/passwd")
	dir, err := fsops.NewDir(t.TempDir(), fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	mem := fsops.NewMemory("/srv/ws", fsops.Options{})
	defer mem.Close()
	for name, ws := range map[string]fsops.Workspace{"dir": dir, "memory": mem} {
		t.Run(name, func(t *testing.T) {
			tools := Tools(ws, ExecEnv{})
			reg := registry.New(registry.Options{})
			if err := reg.Set("workspace", tools); err != nil {
				t.Fatal(err)
			}
			for _, tl := range tools {
				if tl.Name == "write_file" && !strings.Contains(tl.Description, "(/etc/passwd writes etc/passwd in the workspace)") {
					t.Errorf("write_file's description does not say where an absolute path lands: %q", tl.Description)
				}
			}
			args, _ := json.Marshal(map[string]string{"path": "/etc/passwd", "content": "mine\n"})
			res, err := reg.Call(context.Background(), "write_file", registry.Call{Args: args, Workspace: ws})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; res.IsError || got != "Successfully wrote to /etc/passwd" {
				t.Errorf("write_file /etc/passwd answered %q (isError %v), want the reference's text", got, res.IsError)
			}
			if b, err := ws.ReadFile("etc/passwd"); err != nil || string(b) != "mine\n" {
				t.Errorf("workspace etc/passwd: %q, %v", b, err)
			}
		})
	}
	if now, err := os.ReadFile("/etc/passwd"); hostErr == nil && (err != nil || string(now) != string(host)) {
		t.Errorf("the host's /etc/passwd changed")
	}
}

package workspace

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// TestExecOutlivesRegistryDeadline: exec's registry deadline is its own
// time limit plus execGrace, so a command that runs too long is answered by
// exec's kill-and-report (with what it printed), never by the registry's
// shorter default deadline.
func TestExecOutlivesRegistryDeadline(t *testing.T) {
	ws, err := fsops.NewDir(t.TempDir(), fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ex, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: ws.Root()})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	for _, tt := range []struct {
		timeout, want time.Duration
	}{
		{time.Second, time.Second + execGrace},
		{0, sandbox.DefaultTimeout + execGrace},
	} {
		for _, tl := range Tools(ws, ExecEnv{Executor: ex, Timeout: tt.timeout}) {
			if tl.Name == "exec" && tl.Timeout != tt.want {
				t.Errorf("exec timeout %v: registry deadline %v, want %v", tt.timeout, tl.Timeout, tt.want)
			}
		}
	}

	reg := registry.New(registry.Options{DefaultTimeout: 300 * time.Millisecond})
	if err := reg.Set("workspace", Tools(ws, ExecEnv{Executor: ex, Timeout: time.Second})); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"command": "echo started; sleep 5"})
	res, err := reg.Call(context.Background(), "exec", registry.Call{Args: args, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !res.IsError || !strings.Contains(text, "Command timed out after") || !strings.Contains(text, "started") {
		t.Errorf("exec past its limit answered %q; want exec's own timeout report with its output", text)
	}
}

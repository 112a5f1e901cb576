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

// TestExecTimeoutBounds: exec's timeout argument is a whole number of
// seconds from 1 to the daemon's limit. Values whose nanoseconds would
// overflow an int64 in exec's own check (9223372037 s would come out
// negative, 18446744074 s as a few seconds, 2^55 s as 0, "the default")
// are refused before it, by the argument validation's integer bound.
func TestExecTimeoutBounds(t *testing.T) {
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
	reg := registry.New(registry.Options{})
	if err := reg.Set("workspace", Tools(ws, ExecEnv{Executor: ex, Timeout: 10 * time.Second})); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		timeout int64
		refused bool
	}{
		{1, false}, {10, false}, {0, true}, {-1, true}, {11, true},
		{9223372037, true}, {18446744074, true}, {36028797018963968, true},
	} {
		args, _ := json.Marshal(map[string]any{"command": "echo ran", "timeout": tc.timeout})
		res, err := reg.Call(context.Background(), "exec", registry.Call{Args: args, Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if refused := res.IsError && !strings.Contains(text, "ran"); refused != tc.refused {
			t.Errorf("timeout %d: error %v %q, want refused %v", tc.timeout, res.IsError, text, tc.refused)
		}
	}
}

package client

import (
	"context"
	"path"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/internal/testbin"
)

func TestLocalContract(t *testing.T) {
	for _, iso := range []string{"bwrap", "software", "none"} {
		t.Run(iso, func(t *testing.T) {
			runContract(t, func(t *testing.T) Backend {
				l, err := NewLocal(LocalOptions{Root: t.TempDir(), Isolation: iso})
				if err != nil {
					t.Fatal(err)
				}
				return l
			}, true)
		})
	}
}

func TestMemoryContract(t *testing.T) {
	runContract(t, func(t *testing.T) Backend {
		m, err := NewMemory(MemoryOptions{RootPrefix: "/mem", Data: map[string][]byte{"seed.txt": []byte("seed")}})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}, false)
}

// TestLocalSpawnedMCP: without InProcess, a local backend's MCP client is
// the agent-backend binary spawned over stdio on the backend's root (or
// a scope of it), with the backend's isolation; a memory backend says to
// use InProcess.
func TestLocalSpawnedMCP(t *testing.T) {
	ctx := context.Background()
	l, err := NewLocal(LocalOptions{Root: t.TempDir(), Isolation: "software", DaemonBinary: testbin.Path(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Destroy()
	for _, scope := range []string{"", "proj"} {
		cs, err := l.MCPClient(ctx, MCPOptions{ScopePath: scope})
		if err != nil {
			t.Fatal(err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": "spawned.txt", "content": "via " + scope}})
		if err != nil || res.IsError {
			t.Fatalf("scope %q: write over the spawned binary: %v %+v", scope, err, res)
		}
		if got, err := l.Read(ctx, path.Join(scope, "spawned.txt")); err != nil || string(got) != "via "+scope {
			t.Errorf("scope %q: the write did not land in the backend: %q %v", scope, got, err)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "sudo id"}})
		if err != nil || !res.IsError {
			t.Errorf("the spawned daemon does not apply the policy: %v %+v", err, res)
		}
	}
	if _, err := l.MCPClient(ctx, MCPOptions{ScopePath: "../out"}); !errcode.Is(err, errcode.PathEscapeAttempt) {
		t.Errorf("a scope path outside: %v", err)
	}
	missing, _ := NewLocal(LocalOptions{Root: t.TempDir(), DaemonBinary: "/nonexistent/agent-backend"})
	defer missing.Destroy()
	if _, err := missing.MCPClient(ctx, MCPOptions{}); !errcode.Is(err, errcode.MissingUtilities) {
		t.Errorf("a missing binary: %v", err)
	}
	m, _ := NewMemory(MemoryOptions{RootPrefix: "/mem"})
	defer m.Destroy()
	if _, err := m.MCPClient(ctx, MCPOptions{}); !errcode.Is(err, errcode.NotImplemented) || !strings.Contains(err.Error(), "InProcess") {
		t.Errorf("memory without InProcess: %v", err)
	}
}

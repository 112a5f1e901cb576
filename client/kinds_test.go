package client

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/internal/testbin"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

func TestLocalContract(t *testing.T) {
	for _, iso := range []string{"bwrap", "software", "none"} {
		t.Run(iso, func(t *testing.T) {
			if iso == "bwrap" {
				testenv.Bwrap(t)
			}
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
// a scope of it), with the backend's isolation; a memory backend spawns
// `--backend memory`, a tree of its own.
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
	// A memory backend spawns `--backend memory`, whose tree is its own.
	m, _ := NewMemory(MemoryOptions{RootPrefix: "/mem", DaemonBinary: testbin.Path(t), Data: map[string][]byte{"mine.txt": []byte("x")}})
	defer m.Destroy()
	cs, err := m.MCPClient(ctx, MCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": "theirs.txt", "content": "y"}})
	if err != nil || res.IsError {
		t.Fatalf("write over the spawned memory daemon: %v %+v", err, res)
	}
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": "theirs.txt"}})
	if res == nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "y" {
		t.Errorf("read over the spawned memory daemon: %+v", res)
	}
	if ok, _ := m.Exists(ctx, "theirs.txt"); ok {
		t.Error("the spawned memory daemon's tree is this backend's")
	}
}

// TestLocalDaemonBinaryInsideRootRefused: the agent-backend binary a local
// backend spawns for MCPClient runs outside the sandbox, so one inside the
// workspace (named by DaemonBinary, or found on a PATH that leads there),
// which the agent's commands can replace, is refused and never run.
func TestLocalDaemonBinaryInsideRootRefused(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	marker := filepath.Join(t.TempDir(), "ran")
	bin := filepath.Join(root, "bin", "agent-backend")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := NewLocal(LocalOptions{Root: root, Isolation: "software", DaemonBinary: bin})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Destroy()
	if _, err := l.MCPClient(ctx, MCPOptions{}); !errcode.Is(err, errcode.InvalidConfiguration) || !strings.Contains(err.Error(), "inside the workspace") {
		t.Errorf("DaemonBinary inside the root: %v; want INVALID_CONFIGURATION", err)
	}
	t.Setenv("PATH", filepath.Dir(bin))
	l2, err := NewLocal(LocalOptions{Root: root, Isolation: "software"})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Destroy()
	if _, err := l2.MCPClient(ctx, MCPOptions{}); !errcode.Is(err, errcode.InvalidConfiguration) {
		t.Errorf("agent-backend found on a PATH into the root: %v; want INVALID_CONFIGURATION", err)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the binary inside the workspace ran")
	}
}

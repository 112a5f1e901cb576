package checkpoints

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/fsops/checkpoint"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

func setup(t *testing.T) (*registry.Registry, *Provider, fsops.Workspace, string) {
	t.Helper()
	root := t.TempDir()
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	st, err := checkpoint.Open(checkpoint.Options{Dir: filepath.Join(t.TempDir(), "cp"), WorkspaceRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := New(Options{Store: st})
	reg := registry.New(registry.Options{})
	if err := reg.Set("checkpoints", p.Tools()); err != nil {
		t.Fatal(err)
	}
	return reg, p, ws, root
}

func call(t *testing.T, reg *registry.Registry, ws fsops.Workspace, tool, args string) (string, bool) {
	t.Helper()
	res, err := reg.Call(context.Background(), tool, registry.Call{Args: json.RawMessage(args), Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

// TestToolArguments: bad arguments are refused naming what is wrong, and
// only list and diff are read-only.
func TestToolArguments(t *testing.T) {
	reg, p, ws, _ := setup(t)
	for _, tc := range []struct{ tool, args, want string }{
		{Create, `{"label":"` + strings.Repeat("x", maxLabel+1) + `"}`, "label is 201 bytes; the limit is 200"},
		{Create, `{"other":1}`, "unknown field"},
		{Diff, `{}`, "from is required"},
		{Restore, `{}`, "id is required"},
		{Restore, `{"id":"cp1-000000"}`, "no checkpoint of this workspace has this id"},
	} {
		text, isErr := call(t, reg, ws, tc.tool, tc.args)
		if !isErr || !strings.Contains(text, tc.want) {
			t.Errorf("%s %s: %q, want an error containing %q", tc.tool, tc.args, text, tc.want)
		}
	}
	for _, tool := range p.Tools() {
		ro := tool.Annotations != nil && tool.Annotations.ReadOnlyHint
		if ro != (tool.Name == List || tool.Name == Diff) {
			t.Errorf("%s: readOnlyHint %v", tool.Name, ro)
		}
	}
}

// TestBeforeChangeTakesOne: the auto hook checkpoints before a tool that
// can change the workspace, not before checkpoint_create itself, and an
// unchanged workspace reuses the newest checkpoint.
func TestBeforeChangeTakesOne(t *testing.T) {
	_, p, ws, root := setup(t)
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.BeforeChange(ctx, registry.Tool{Name: Create}, registry.Call{Workspace: ws}); err != nil {
		t.Fatal(err)
	}
	if n := len(p.st.List(ws)); n != 0 {
		t.Fatalf("a checkpoint before checkpoint_create: %d", n)
	}
	for range 2 {
		if err := p.BeforeChange(ctx, registry.Tool{Name: "write_file"}, registry.Call{Workspace: ws}); err != nil {
			t.Fatal(err)
		}
	}
	list := p.st.List(ws)
	if len(list) != 1 || list[0].Label != "before write_file" || !list[0].Auto {
		t.Fatalf("list %+v", list)
	}
}

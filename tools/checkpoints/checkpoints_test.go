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

// With --checkpoints auto and a full store, the automatic checkpoint taken
// before checkpoint_restore does not prune the checkpoint being restored
// (the oldest one): undoing all the way back works.
func TestAutoCheckpointKeepsTheRestoreTarget(t *testing.T) {
	root := t.TempDir()
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	st, err := checkpoint.Open(checkpoint.Options{Dir: filepath.Join(t.TempDir(), "cp"), WorkspaceRoot: root, MaxCount: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := New(Options{Store: st})
	reg := registry.New(registry.Options{})
	if err := reg.Set("checkpoints", p.Tools()); err != nil {
		t.Fatal(err)
	}
	reg.SetBeforeChange(p.BeforeChange)
	var first string
	for i, content := range []string{"good\n", "worse\n", "broken\n"} {
		os.WriteFile(filepath.Join(root, "main.go"), []byte(content), 0o644)
		info, err := st.Create(context.Background(), ws, checkpoint.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = info.ID
		}
	}
	os.WriteFile(filepath.Join(root, "main.go"), []byte("worst\n"), 0o644)
	res, err := reg.Call(context.Background(), Restore, registry.Call{Args: json.RawMessage(`{"id":"` + first + `"}`), Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		t.Fatalf("restoring the oldest checkpoint %s under --checkpoints auto: %s", first, strings.TrimSpace(text))
	}
	if b, _ := os.ReadFile(filepath.Join(root, "main.go")); string(b) != "good\n" {
		t.Fatalf("main.go = %q", b)
	}
	// The automatic checkpoint (of "worst") was taken: the undo of the
	// restore is there too, and the store is back within its count at the
	// next create.
	l := st.List(ws)
	if len(l) < 2 || l[0].ID != first || !l[len(l)-1].Auto {
		t.Fatalf("checkpoints after the restore: %+v", l)
	}
	if _, err := st.Create(context.Background(), ws, checkpoint.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := st.Stats().Count; n > 3 {
		t.Fatalf("the store holds %d checkpoints, bound 3", n)
	}
}

// TestAnswerFields: checkpoint_create's answer always carries took_ms
// (issue 36's {id, files, bytes, took_ms}), 0 included; checkpoint_list's
// entries carry none, since the store does not keep how long each took,
// and a 0 there would read as a measurement.
func TestAnswerFields(t *testing.T) {
	reg, _, ws, root := setup(t)
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	text, isErr := call(t, reg, ws, Create, `{"label":"one"}`)
	if isErr {
		t.Fatal(text)
	}
	var created map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &created); err != nil {
		t.Fatalf("%v: %s", err, text)
	}
	for _, k := range []string{"id", "files", "bytes", "took_ms", "created", "label"} {
		if _, ok := created[k]; !ok {
			t.Errorf("checkpoint_create's answer lacks %q: %s", k, text)
		}
	}
	text, isErr = call(t, reg, ws, List, `{}`)
	if isErr {
		t.Fatal(text)
	}
	var list struct {
		Checkpoints []map[string]json.RawMessage `json:"checkpoints"`
	}
	if err := json.Unmarshal([]byte(text), &list); err != nil || len(list.Checkpoints) != 1 {
		t.Fatalf("checkpoint_list: %v, %s", err, text)
	}
	if v, ok := list.Checkpoints[0]["took_ms"]; ok {
		t.Errorf("checkpoint_list's entry has took_ms %s, which the store does not keep: %s", v, text)
	}
	if string(list.Checkpoints[0]["id"]) != string(created["id"]) {
		t.Errorf("checkpoint_list's id %s, want %s", list.Checkpoints[0]["id"], created["id"])
	}
}

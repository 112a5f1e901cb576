package workspace

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// TestExecTransactionOnlyWithTransact: exec's schema offers `transaction`
// only when ExecEnv.Transact is set, and then hands a transaction to it;
// without it, a call asking for one in any form is refused naming
// --transactions and the command does not run, while `transaction: false`
// (or null) runs as a plain exec.
func TestExecTransactionOnlyWithTransact(t *testing.T) {
	dir := t.TempDir()
	ws, err := fsops.NewDir(dir, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ex, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: ws.Root()})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	var handed []string
	transact := func(_ context.Context, _ fsops.Workspace, req sandbox.Request) *mcp.CallToolResult {
		handed = append(handed, req.Command)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "as a transaction"}}}
	}
	call := func(env ExecEnv, args string) (string, bool) {
		t.Helper()
		reg := registry.New(registry.Options{})
		if err := reg.Set("workspace", Tools(ws, env)); err != nil {
			t.Fatal(err)
		}
		res, err := reg.Call(context.Background(), "exec", registry.Call{Args: json.RawMessage(args), Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	hasProp := func(env ExecEnv) bool {
		for _, tl := range Tools(ws, env) {
			if tl.Name == "exec" {
				_, ok := tl.InputSchema.(schema)["properties"].(schema)["transaction"]
				return ok
			}
		}
		t.Fatal("no exec")
		return false
	}

	off := ExecEnv{Executor: ex}
	if hasProp(off) {
		t.Error("exec offers transaction without Transact")
	}
	for i, tx := range []string{`true`, `"yes"`, `1`, `{}`} {
		name := "ran" + string(rune('a'+i))
		text, isErr := call(off, `{"command":"touch `+name+`","transaction":`+tx+`}`)
		if !isErr || !strings.Contains(text, "--transactions") || !strings.Contains(text, "did not run") {
			t.Errorf("transaction %s: error %v: %s", tx, isErr, text)
		}
		if _, err := os.Lstat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("transaction %s: the command ran on the workspace", tx)
		}
	}
	for _, tx := range []string{`false`, `null`} {
		if text, isErr := call(off, `{"command":"touch plain-`+tx+`","transaction":`+tx+`}`); isErr {
			t.Errorf("transaction %s: %s", tx, text)
		}
		if _, err := os.Lstat(filepath.Join(dir, "plain-"+tx)); err != nil {
			t.Errorf("transaction %s: %v", tx, err)
		}
	}

	on := ExecEnv{Executor: ex, Transact: transact}
	if !hasProp(on) {
		t.Error("exec does not offer transaction with Transact")
	}
	if text, isErr := call(on, `{"command":"touch viaTx","transaction":true}`); isErr || text != "as a transaction" || len(handed) != 1 || handed[0] != "touch viaTx" {
		t.Errorf("transaction true: error %v: %s (handed %v)", isErr, text, handed)
	}
	if text, isErr := call(on, `{"command":"touch x","transaction":"yes"}`); !isErr || !strings.Contains(text, "transaction") || len(handed) != 1 {
		t.Errorf("transaction \"yes\" with transactions on: error %v: %s", isErr, text)
	}
}

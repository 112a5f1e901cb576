package mcphttp

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// toolSetConfigs are the configurations that decide the tool set: a
// directory workspace with an executor (every tool), one without (no exec),
// and the memory workspace (file tools only).
var toolSetConfigs = []struct {
	name string
	open func(t *testing.T) (fsops.Workspace, sandbox.Executor)
}{
	{"dir_exec", func(t *testing.T) (fsops.Workspace, sandbox.Executor) {
		ws := openDir(t)
		ex, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: ws.Root()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ex.Close() })
		return ws, ex
	}},
	{"dir", func(t *testing.T) (fsops.Workspace, sandbox.Executor) { return openDir(t), nil }},
	{"memory", func(t *testing.T) (fsops.Workspace, sandbox.Executor) {
		ws := fsops.NewMemory("/mem", fsops.Options{})
		t.Cleanup(func() { ws.Close() })
		return ws, nil
	}},
}

func openDir(t *testing.T) fsops.Workspace {
	ws, err := fsops.NewDir(t.TempDir(), fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// TestToolsListGolden pins the tools/list reply of each configuration, byte
// for byte, to testdata/golden/tools_list_<config>.json: the tool set, its
// order, and every name, title, description, schema and annotation. Both
// the SDK's answer and the fast path's must equal it.
func TestToolsListGolden(t *testing.T) {
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, c := range toolSetConfigs {
		t.Run(c.name, func(t *testing.T) {
			ws, ex := c.open(t)
			file := filepath.Join("testdata", "golden", "tools_list_"+c.name+".json")
			for _, fast := range []bool{false, true} {
				srv, err := New(Options{Workspace: ws, Executor: ex, RootDir: ws.Root(), Version: "test"})
				if err != nil {
					t.Fatal(err)
				}
				srv.noFastPath = !fast
				hs := httptest.NewServer(srv.Handler())
				resp, got := rawPost(t, hs.URL, "POST", body, map[string]string{"Accept": "application/json"})
				hs.Close()
				srv.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("fast=%v: status %d: %s", fast, resp.StatusCode, got)
				}
				if n := srv.fastCalls.Load(); (n == 1) != fast {
					t.Fatalf("fast=%v: fast path answered %d requests", fast, n)
				}
				if *update && !fast {
					if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(file)
				if err != nil {
					t.Fatalf("%v (run go test -run TestToolsListGolden -update to create it)", err)
				}
				if got != string(want) {
					t.Errorf("fast=%v: tools/list differs from %s\n got: %s\nwant: %s", fast, file, got, want)
				}
			}
		})
	}
}

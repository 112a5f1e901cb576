package mcphttp

import (
	"context"
	"encoding/json"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
	"github.com/agentbe/agentbe-daemon/tools/workspace"
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
				srv, err := New(Options{Workspace: ws, Registry: wsRegistry(ws, ex, 0), RootDir: ws.Root(), Version: "test"})
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

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// TestToolValues checks every tool value of every configuration: a valid,
// unique name; a title, a description and annotations (whose title is the
// tool's); an object input schema whose required arguments are properties
// and whose properties each have a type and a description. The Server
// registers exactly that list.
func TestToolValues(t *testing.T) {
	for _, c := range toolSetConfigs {
		t.Run(c.name, func(t *testing.T) {
			ws, ex := c.open(t)
			list := workspace.Tools(ws, workspace.ExecEnv{Executor: ex})
			if len(list) == 0 {
				t.Fatal("no tools")
			}
			seen := map[string]bool{}
			for _, tl := range list {
				if !toolNameRE.MatchString(tl.Name) {
					t.Errorf("tool name %q: want 1-64 of letters, digits, _ - .", tl.Name)
				}
				if seen[tl.Name] {
					t.Errorf("tool %q is listed twice", tl.Name)
				}
				seen[tl.Name] = true
				if tl.Title == "" || tl.Description == "" {
					t.Errorf("%s: title %q, description %q: both must be set", tl.Name, tl.Title, tl.Description)
				}
				if tl.Annotations == nil || tl.Annotations.Title != tl.Title {
					t.Errorf("%s: annotations %+v, want set, with the title %q", tl.Name, tl.Annotations, tl.Title)
				}
				in, _ := tl.InputSchema.(map[string]any)
				if in["type"] != "object" {
					t.Errorf("%s: input schema type %v, want object", tl.Name, in["type"])
				}
				props, ok := in["properties"].(map[string]any)
				if !ok {
					t.Errorf("%s: input schema has no properties map", tl.Name)
				}
				req, _ := in["required"].([]string)
				for _, r := range req {
					if _, ok := props[r]; !ok {
						t.Errorf("%s: required argument %q is not a property", tl.Name, r)
					}
				}
				for name, p := range props {
					ps, _ := p.(map[string]any)
					if ps["type"] == nil || ps["description"] == nil {
						t.Errorf("%s: property %q needs a type and a description: %v", tl.Name, name, ps)
					}
				}
				if _, err := json.Marshal(&mcp.Tool{Name: tl.Name, Title: tl.Title, Description: tl.Description, Annotations: tl.Annotations, InputSchema: tl.InputSchema}); err != nil {
					t.Errorf("%s: %v", tl.Name, err)
				}
			}

			srv, err := New(Options{Workspace: ws, Registry: wsRegistry(ws, ex, 0)})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			if len(srv.served) != len(seen) {
				t.Errorf("the Server registered %d tools, workspace.Tools has %d", len(srv.served), len(seen))
			}
			for name := range seen {
				if !srv.served[name] {
					t.Errorf("the Server did not register %s", name)
				}
			}
		})
	}
}

// TestToolValuesWithoutServer calls tool values directly, with a workspace
// and (for exec) an execEnv but no Server, and requires the result a client
// gets for the same call through a Server over HTTP.
func TestToolValuesWithoutServer(t *testing.T) {
	root := t.TempDir()
	writeFixture(t, root)
	e := newEnvAt(t, root)
	cs := e.connect(t, nil)
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	tools := map[string]registry.Tool{}
	for _, tl := range workspace.Tools(ws, workspace.ExecEnv{Executor: e.ex, Timeout: 20 * time.Second}) {
		tools[tl.Name] = tl
	}
	for _, c := range []toolCase{
		{"read_text_file", map[string]any{"path": "a.txt", "limit": 2}},
		{"read_text_file", map[string]any{"path": "a.txt", "offset": 0}},
		{"list_directory", map[string]any{"path": "sub"}},
		{"list_allowed_directories", map[string]any{}},
		{"exec", map[string]any{"command": "echo hi; cat a.txt"}},
		{"exec", map[string]any{"command": "exit 3"}},
		{"grep", map[string]any{"pattern": "line", "outputMode": "count"}},
	} {
		args, _ := json.Marshal(c.args)
		tl, ok := tools[c.tool]
		if !ok {
			t.Fatalf("%s is not in the tool list", c.tool)
		}
		got := render(tl.Handler(context.Background(), registry.Call{Args: args, Workspace: ws}))
		if want := call(t, cs, c.tool, c.args); got != want {
			t.Errorf("%s %s:\ndirect: %q\nserver: %q", c.tool, args, got, want)
		}
	}
}

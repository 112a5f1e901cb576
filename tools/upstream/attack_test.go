package upstream

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/face/mcphttp"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

func startHostile(t *testing.T, sc hostileScript, mod func(*Server), tm timing) *fixture {
	t.Helper()
	root := t.TempDir()
	writeScript(t, root, sc)
	return startAt(t, root, "hostile", sandbox.ModeSoftware, mod, tm)
}

// served is the names of the tools the registry serves for server t.
func (f *fixture) served() []string {
	var out []string
	for _, tl := range f.reg.List() {
		if strings.HasPrefix(tl.Name, "t"+Separator) {
			out = append(out, tl.Name)
		}
	}
	return out
}

// TestAttackToolSchemas: an upstream's tools whose input schema is not a
// JSON object of type "object" (a string type, none, an array, null, a
// type list) are left out and the others served; the MCP face, whose SDK
// panics on such a schema (mcp.Server.AddTool), keeps serving. Before the
// fix the face's panic ended the daemon.
func TestAttackToolSchemas(t *testing.T) {
	deep := strings.Repeat(`{"type":"object","properties":{"a":`, 400) + `{"type":"string"}` + strings.Repeat(`}}`, 400)
	f := startHostile(t, hostileScript{Tools: []byte(`[
		{"name":"emit","inputSchema":{"type":"object"}},
		{"name":"str","inputSchema":{"type":"string"}},
		{"name":"none"},
		{"name":"arr","inputSchema":[1,2]},
		{"name":"nul","inputSchema":null},
		{"name":"list","inputSchema":{"type":["object"]}},
		{"name":"deep","inputSchema":` + deep + `}]`)}, nil, fastTiming)
	srv, err := mcphttp.New(mcphttp.Options{Workspace: f.ws, Registry: f.reg})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := f.running(t)
	if got := f.served(); !slices.Equal(got, []string{"t__deep", "t__emit"}) || h.Tools != 2 {
		t.Errorf("served %v (health %d tools); want t__deep and t__emit", got, h.Tools)
	}
	if txt, isErr, _ := f.call(t, nil, "t__emit", `{"x":1}`); isErr || txt != `{"x":1}` {
		t.Errorf("t__emit: %q %v", txt, isErr)
	}
}

// TestAttackToolNames: tool names the registry cannot serve (a slash,
// "../x", control characters, a terminal escape, 1 MiB, a name that is too
// long once prefixed, an empty one, one listed twice) are left out one by
// one; the server runs and serves the rest. Before the fix one such name
// failed the whole listing: the server was restarted until failed, and a
// 1 MiB name went whole into /health's last_error. ".." is a valid tool
// name (registry.ValidName: a name is never a path) and is served.
func TestAttackToolNames(t *testing.T) {
	huge := strings.Repeat("n", 1<<20)
	names := []string{"ok", "a/b", "..", "../x", "a\x00b", "a\nb", "\x1b[2Jx", huge, strings.Repeat("l", 62), "", "ok", "dot.ted"}
	var tools []map[string]any
	for _, n := range names {
		tools = append(tools, map[string]any{"name": n, "description": strings.Repeat("d", 1<<20), "inputSchema": map[string]any{"type": "object"}})
	}
	raw, _ := json.Marshal(tools)
	f := startHostile(t, hostileScript{Tools: raw}, nil, fastTiming)
	h := f.running(t)
	if got := f.served(); !slices.Equal(got, []string{"t__..", "t__dot.ted", "t__ok"}) || h.Tools != 3 || h.Restarts != 0 {
		t.Errorf("served %v, health %+v; want t__.., t__dot.ted and t__ok, no restart", got, h)
	}
	if len(h.LastError) > lastErrorMaxSize {
		t.Errorf("last_error is %d bytes", len(h.LastError))
	}
}

// TestAttackToolListHuge: 100,000 tools in one page, and a list whose
// nextCursor never ends, are cut at maxTools tools and maxToolPages pages;
// the server runs and serves the first maxTools.
func TestAttackToolListHuge(t *testing.T) {
	var b strings.Builder
	b.WriteByte('[')
	for i := range 100000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"t%d","inputSchema":{"type":"object"}}`, i)
	}
	b.WriteByte(']')
	for _, cursor := range []string{"", "again"} {
		t.Run("cursor="+cursor, func(t *testing.T) {
			tools := b.String()
			if cursor != "" {
				tools = `[{"name":"emit","inputSchema":{"type":"object"}}]`
			}
			f := startHostile(t, hostileScript{Tools: []byte(tools), NextCursor: cursor}, nil, fastTiming)
			h := f.running(t)
			want := maxTools
			if cursor != "" {
				want = 1 // the same tool on every page: listed twice from page 2 on
			}
			if h.Tools != want || len(f.served()) != want {
				t.Errorf("health %+v, %d served; want %d", h, len(f.served()), want)
			}
			if cursor != "" {
				if n := strings.Count(f.recorded(), "request tools/list"); n != maxToolPages {
					t.Errorf("%d tools/list requests; want %d", n, maxToolPages)
				}
			}
		})
	}
}

package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// npmServer is the entry point of a published MCP server installed by the
// interop suite's lockfile (`cd interop && npm ci`, which .ci/run does);
// node, which runs it, must be on PATH too.
func npmServer(t testing.TB, pkg string) string {
	t.Helper()
	testenv.Command(t, "nodejs", "node")
	p, err := filepath.Abs(filepath.Join("..", "interop", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	return testenv.File(t, p, "cd interop && npm ci")
}

// TestPublishedUpstreams runs the published filesystem and everything
// servers as upstreams, under bwrap and in software mode, and reaches their
// tools through the REST face and MCP: the filesystem server learns the
// workspace from its MCP root (it is given no directory), reads a file of
// the workspace, and never sees a path that leaves it.
func TestPublishedUpstreams(t *testing.T) {
	fsServer, everything := npmServer(t, "server-filesystem"), npmServer(t, "server-everything")
	for _, iso := range []string{"bwrap", "landlock", "software"} {
		t.Run(iso, func(t *testing.T) {
			c := testConfig(t)
			c.Isolation = iso
			if err := os.WriteFile(filepath.Join(c.Root, "a.txt"), []byte("from the workspace\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			cfgFile := filepath.Join(t.TempDir(), "mcp_servers.json")
			servers := fmt.Sprintf(`{"servers":[
				{"name":"fs","command":"node","args":[%q],"timeout":30},
				{"name":"everything","command":"node","args":[%q,"stdio"],"allow":["echo","get-sum"]}
			]}`, fsServer, everything)
			if err := os.WriteFile(cfgFile, []byte(servers), 0o600); err != nil {
				t.Fatal(err)
			}
			c.Upstreams = cfgFile
			c.UpstreamCacheDir = t.TempDir()
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			r := start(t, c, nil)
			waitUpstreams(t, r.url, "fs", "everything")

			post := func(body string) (int, map[string]any) {
				resp, err := http.Post(r.url+"/execute", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var out map[string]any
				b, _ := io.ReadAll(resp.Body)
				if err := json.Unmarshal(b, &out); err != nil {
					t.Fatalf("%s: %v", b, err)
				}
				return resp.StatusCode, out
			}
			// The root the filesystem server took from MCP roots. It asks
			// for them after the handshake, so the first calls may come
			// before it has them: poll a little.
			for deadline := time.Now().Add(15 * time.Second); ; {
				code, out := post(`{"tool_name":"fs__list_allowed_directories","arguments":{}}`)
				if code == 200 && strings.Contains(fmt.Sprint(out["output"]), c.Root) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("allowed directories: %d %v; want the workspace %s", code, out, c.Root)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if code, out := post(`{"tool_name":"fs__read_text_file","arguments":{"path":"` + c.Root + `/a.txt"}}`); code != 200 || out["status"] != "success" || out["output"] != "from the workspace\n" {
				t.Errorf("read: %d %v", code, out)
			}
			if code, out := post(`{"tool_name":"fs__read_text_file","arguments":{"path":"/etc/passwd"}}`); code != 400 || !strings.Contains(fmt.Sprint(out["error"]), "outside the workspace") {
				t.Errorf("escape: %d %v; want 400 naming the workspace", code, out)
			}
			if code, out := post(`{"tool_name":"everything__get-sum","arguments":{"a":2,"b":3}}`); code != 200 || !strings.Contains(fmt.Sprint(out["output"]), "5") {
				t.Errorf("get-sum: %d %v", code, out)
			}
			if code, _ := post(`{"tool_name":"everything__printEnv","arguments":{}}`); code != 404 {
				t.Errorf("a tool outside the allow list: %d, want 404", code)
			}
			// The same tools over MCP.
			code, body := mcpCall(t, r.url, "everything__echo", `{"message":"hi there"}`)
			if code != 200 || !strings.Contains(body, "hi there") {
				t.Errorf("MCP echo: %d %s", code, body)
			}
			// And over /gateway.
			ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(r.url, "http")+"/gateway", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":7,"method":"tools.invoke","params":{"toolId":"everything__echo","sessionId":"s","args":{"message":"over the gateway"}}}`)); err != nil {
				t.Fatal(err)
			}
			_, msg, err := ws.ReadMessage()
			if err != nil || !strings.Contains(string(msg), "over the gateway") || strings.Contains(string(msg), `"error"`) {
				t.Errorf("gateway echo: %s %v", msg, err)
			}
		})
	}
}

func mcpCall(t *testing.T, url, tool, args string) (int, string) {
	t.Helper()
	return send(t, http.MethodPost, url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`,
		map[string]string{"Accept": "application/json, text/event-stream"})
}

// waitUpstreams waits until /health/servers says each server is running.
func waitUpstreams(t testing.TB, url string, names ...string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // node start-up on a loaded machine; a hang guard
	for {
		_, b := get(t, url+"/health/servers")
		var h struct{ Servers map[string]string }
		_ = json.Unmarshal(b, &h)
		ok := true
		for _, n := range names {
			ok = ok && h.Servers[n] == "running"
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			_, full := get(t, url+"/health")
			t.Fatalf("upstreams not running: %s\n/health: %s", b, full)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

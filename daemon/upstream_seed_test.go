package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// TestUpstreamBareNamesAndServers holds the execution service's client
// calls (seed 004) on the real endpoints: a tool one upstream server
// serves is callable by its bare name on /execute, /mcp (the fast path
// and the SDK's) and /gateway; a bare name two servers serve answers 409
// on /execute (the MCP and /gateway equivalents on theirs), naming the
// qualified names; the lists keep the qualified names; and /health carries
// the seed's {"servers": {...}} beside the daemon's own fields.
func TestUpstreamBareNamesAndServers(t *testing.T) {
	fsServer, everything := npmServer(t, "server-filesystem"), npmServer(t, "server-everything")
	c := testConfig(t)
	c.Isolation = "software"
	cfgFile := filepath.Join(t.TempDir(), "mcp_servers.json")
	servers := fmt.Sprintf(`{"servers":[
		{"name":"fs","command":"node","args":[%q]},
		{"name":"fs2","command":"node","args":[%q]},
		{"name":"everything","command":"node","args":[%q,"stdio"],"allow":["echo","get-sum"]}
	]}`, fsServer, fsServer, everything)
	must(t, os.WriteFile(cfgFile, []byte(servers), 0o600))
	c.Upstreams = cfgFile
	c.UpstreamCacheDir = t.TempDir()
	must(t, c.Validate())
	r := start(t, c, nil)
	waitUpstreams(t, r.url, "fs", "fs2", "everything")

	// /health: the seed's servers object, and every field of ours still there.
	_, b := get(t, r.url+"/health")
	var health map[string]any
	must(t, json.Unmarshal(b, &health))
	want := map[string]any{"fs": "running", "fs2": "running", "everything": "running"}
	if fmt.Sprint(health["servers"]) != fmt.Sprint(want) {
		t.Errorf("/health servers = %v; want %v", health["servers"], want)
	}
	for _, k := range []string{"status", "version", "rootDir", "transports", "isolation", "tools", "providers", "upstreams"} {
		if _, ok := health[k]; !ok {
			t.Errorf("/health lost %q: %s", k, b)
		}
	}

	// /execute: a bare name one server serves runs; one two serve is a 409.
	code, body := send(t, "POST", r.url+"/execute", `{"tool_name":"echo","arguments":{"message":"bare"}}`, nil)
	if code != 200 || !strings.Contains(body, `"status":"success"`) || !strings.Contains(body, "bare") {
		t.Errorf("/execute echo: %d %s", code, body)
	}
	code, body = send(t, "POST", r.url+"/execute", `{"tool_name":"get-sum","arguments":{"a":2,"b":3}}`, nil)
	if code != 200 || !strings.Contains(body, "5") {
		t.Errorf("/execute get-sum: %d %s", code, body)
	}
	code, body = send(t, "POST", r.url+"/execute", `{"tool_name":"read_file","arguments":{"path":"a.txt"}}`, nil)
	var conflict struct {
		Error, Message string
		Tools          []string
	}
	_ = json.Unmarshal([]byte(body), &conflict)
	if code != 409 || !slices.Equal(conflict.Tools, []string{"fs2__read_file", "fs__read_file"}) ||
		!strings.Contains(conflict.Message, "fs2__read_file, fs__read_file") {
		t.Errorf("/execute read_file with two servers: %d %s; want 409 naming both", code, body)
	}
	if code, body := send(t, "POST", r.url+"/execute", `{"tool_name":"printEnv","arguments":{}}`, nil); code != 404 {
		t.Errorf("/execute of a tool the allow list leaves out, by its bare name: %d %s; want 404", code, body)
	}

	// /mcp, the fast path and the SDK's (a request with _meta).
	for _, meta := range []string{"", `,"_meta":{"note":"sdk path"}`} {
		call := func(tool, args string) (int, string) {
			return send(t, "POST", r.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+meta+`}}`,
				map[string]string{"Accept": "application/json, text/event-stream"})
		}
		if code, body := call("echo", `{"message":"over mcp"}`); code != 200 || !strings.Contains(body, "over mcp") || strings.Contains(body, `"isError":true`) {
			t.Errorf("MCP echo (meta %q): %d %s", meta, code, body)
		}
		code, body := call("read_file", `{"path":"a.txt"}`)
		if code != 200 || !strings.Contains(body, `"code":-32602`) || !strings.Contains(body, `is ambiguous: fs2__read_file, fs__read_file`) ||
			!strings.Contains(body, `"data":{"tools":["fs2__read_file","fs__read_file"]}`) {
			t.Errorf("MCP read_file with two servers (meta %q): %d %s; want -32602 naming both", meta, code, body)
		}
	}

	// /gateway.
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(r.url, "http")+"/gateway", nil)
	must(t, err)
	defer ws.Close()
	invoke := func(tool, args string) string {
		must(t, ws.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":7,"method":"tools.invoke","params":{"toolId":"`+tool+`","sessionId":"s","args":`+args+`}}`)))
		_, msg, err := ws.ReadMessage()
		must(t, err)
		return string(msg)
	}
	if msg := invoke("echo", `{"message":"over the gateway"}`); !strings.Contains(msg, "over the gateway") || strings.Contains(msg, `"error"`) {
		t.Errorf("gateway echo: %s", msg)
	}
	if msg := invoke("read_file", `{"path":"a.txt"}`); !strings.Contains(msg, `"code":-32005`) ||
		!strings.Contains(msg, `"data":{"tools":["fs2__read_file","fs__read_file"]}`) {
		t.Errorf("gateway read_file with two servers: %s; want -32005 naming both", msg)
	}

	// The lists keep the qualified names.
	for _, path := range []string{"/tools"} {
		_, b := get(t, r.url+path)
		if !strings.Contains(string(b), `"everything__echo"`) || strings.Contains(string(b), `"name":"echo"`) {
			t.Errorf("%s lists a bare name, or not the qualified one: %s", path, b)
		}
	}
	_, list := send(t, "POST", r.url+"/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, map[string]string{"Accept": "application/json, text/event-stream"})
	if !strings.Contains(list, `"everything__echo"`) || strings.Contains(list, `"name":"echo"`) {
		t.Errorf("MCP tools/list: %s", list)
	}
}

// TestHealthWithoutUpstreams: without --upstreams /health has no servers
// object (and /health/servers an empty one).
func TestHealthWithoutUpstreams(t *testing.T) {
	r := start(t, testConfig(t), nil)
	_, b := get(t, r.url+"/health")
	if strings.Contains(string(b), `"servers"`) {
		t.Errorf("/health without --upstreams: %s", b)
	}
	if _, b := get(t, r.url+"/health/servers"); strings.TrimSpace(string(b)) != `{"servers":{}}` {
		t.Errorf("/health/servers without --upstreams: %s", b)
	}
}

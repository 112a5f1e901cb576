package daemon

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestGatewaySeedCalls holds the gateway tools plan's client calls (seed
// 003) on the real endpoints: a call without a field its schema requires is
// a bad request on /execute (400) and an INVALID_ARGUMENT on /gateway, not
// a call with the field empty; /gateway answers in the plan's ToolResult
// envelope when the call or the connection asks; and the sessionId of
// tools.invoke is in the audit log.
func TestGatewaySeedCalls(t *testing.T) {
	c := testConfig(t)
	c.GatewayTools = true
	c.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	must(t, os.WriteFile(filepath.Join(c.Root, "note.txt"), []byte("hello seed"), 0o644))
	must(t, c.Validate())
	r := start(t, c, nil)

	// required fields on /execute
	for _, tc := range []struct{ tool, args, want string }{
		{"fs.read", `{}`, "missing required argument path"},
		{"fs.read", `{"path":null}`, "missing required argument path"},
		{"fs.write", `{"path":"x.txt"}`, "missing required argument content"},
		{"fs.glob", `{}`, "missing required argument pattern"},
		{"http.download", `{}`, "missing required arguments url, destPath"},
		{"http.request", `{"method":"GET"}`, "missing required argument url (required: url)"},
	} {
		code, body := send(t, "POST", r.url+"/execute", `{"tool_name":"`+tc.tool+`","arguments":`+tc.args+`}`, nil)
		if code != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("/execute %s %s: %d %s; want 400 %q", tc.tool, tc.args, code, body, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(c.Root, "x.txt")); err == nil {
		t.Error("fs.write without content wrote a file")
	}
	if code, body := send(t, "POST", r.url+"/execute", `{"tool_name":"fs.read","arguments":{"path":"note.txt"}}`, nil); code != 200 || !strings.Contains(body, "hello seed") {
		t.Errorf("/execute fs.read with its path: %d %s", code, body)
	}
	if code, body := send(t, "POST", r.url+"/execute", `{"tool_name":"fs.list","arguments":{}}`, nil); code != 200 || !strings.Contains(body, "note.txt") {
		t.Errorf("/execute fs.list {} (nothing required): %d %s", code, body)
	}

	wsURL := "ws" + strings.TrimPrefix(r.url, "http") + "/gateway"
	dial := func(query string) *websocket.Conn {
		ws, _, err := websocket.DefaultDialer.Dial(wsURL+query, nil)
		must(t, err)
		t.Cleanup(func() { ws.Close() })
		return ws
	}
	invoke := func(ws *websocket.Conn, params string) map[string]any {
		t.Helper()
		must(t, ws.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":`+params+`}`)))
		_, msg, err := ws.ReadMessage()
		must(t, err)
		var out map[string]any
		must(t, json.Unmarshal(msg, &out))
		return out
	}
	ws := dial("")
	// The default answer: the MCP result, required fields enforced.
	out := invoke(ws, `{"toolId":"fs.read","sessionId":"sess-a","args":{}}`)
	if res, _ := out["result"].(map[string]any); res["isError"] != true || !strings.Contains(toJSON(res), "missing required argument path") {
		t.Errorf("gateway fs.read {}: %v", out)
	}
	// The envelope, asked for by the call.
	out = invoke(ws, `{"toolId":"fs.read","sessionId":"sess-a","args":{"path":"note.txt"},"resultFormat":"toolResult"}`)
	env, _ := out["result"].(map[string]any)
	data, _ := env["data"].(map[string]any)
	meta, _ := env["meta"].(map[string]any)
	if env["ok"] != true || data["content"] != "hello seed" || data["size"] != float64(10) || env["error"] != nil {
		t.Errorf("envelope of fs.read: %v", out)
	}
	if d, ok := meta["durationMs"].(float64); !ok || d < 0 {
		t.Errorf("envelope meta: %v", meta)
	}
	out = invoke(ws, `{"toolId":"fs.read","sessionId":"sess-a","args":{},"resultFormat":"toolResult"}`)
	env, _ = out["result"].(map[string]any)
	errObj, _ := env["error"].(map[string]any)
	if env["ok"] != false || errObj["code"] != "INVALID_ARGUMENT" || !strings.Contains(fmtString(errObj["message"]), "missing required argument path") || env["data"] != nil {
		t.Errorf("envelope of fs.read {}: %v", out)
	}
	out = invoke(ws, `{"toolId":"fs.read","sessionId":"sess-a","args":{"path":"../../etc/passwd"},"resultFormat":"toolResult"}`)
	env, _ = out["result"].(map[string]any)
	if errObj, _ := env["error"].(map[string]any); env["ok"] != false || errObj["code"] != "PATH_ESCAPE_ATTEMPT" {
		t.Errorf("envelope of an escape: %v", out)
	}
	out = invoke(ws, `{"toolId":"fs.read","args":{"path":"note.txt"},"resultFormat":"yaml"}`)
	if e, _ := out["error"].(map[string]any); e["code"] != float64(-32602) || !strings.Contains(fmtString(e["message"]), `resultFormat "yaml"`) {
		t.Errorf("a bad resultFormat: %v", out)
	}
	out = invoke(ws, `{"toolId":"fs.read","sessionId":"`+strings.Repeat("s", 129)+`","args":{"path":"note.txt"}}`)
	if e, _ := out["error"].(map[string]any); e["code"] != float64(-32602) || !strings.Contains(fmtString(e["message"]), "the limit is 128") {
		t.Errorf("a sessionId over the limit: %v", out)
	}

	// The envelope as the connection's default, and a call that asks for MCP.
	ws2 := dial("?resultFormat=toolResult")
	out = invoke(ws2, `{"toolId":"fs.list","sessionId":"sess-b","args":{}}`)
	if env, _ := out["result"].(map[string]any); env["ok"] != true || !strings.Contains(toJSON(env["data"]), "note.txt") {
		t.Errorf("envelope by the connection: %v", out)
	}
	out = invoke(ws2, `{"toolId":"fs.list","sessionId":"sess-b","args":{},"resultFormat":"mcp"}`)
	if res, _ := out["result"].(map[string]any); res["content"] == nil || res["ok"] != nil {
		t.Errorf("mcp by the call on an envelope connection: %v", out)
	}
	if resp, err := http.Get(r.url + "/gateway?resultFormat=xml"); err != nil || resp.StatusCode != 400 {
		t.Errorf("upgrade with a bad resultFormat: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// The audit log: the gateway's calls carry their sessionId, REST's none.
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(c.AuditLog)
		var sessA, sessB, rest int
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue
			}
			switch {
			case rec["face"] == "gateway" && rec["session"] == "sess-a":
				sessA++
			case rec["face"] == "gateway" && rec["session"] == "sess-b":
				sessB++
			case rec["face"] == "rest":
				if _, has := rec["session"]; has {
					t.Fatalf("a REST line with a session: %s", line)
				}
				rest++
			}
		}
		if sessA == 4 && sessB == 2 && rest == 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit log: %d lines of sess-a (want 4), %d of sess-b (want 2), %d REST (want 8):\n%s", sessA, sessB, rest, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func fmtString(v any) string {
	s, _ := v.(string)
	return s
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

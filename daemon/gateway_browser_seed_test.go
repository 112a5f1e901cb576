package daemon

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/tools/browser"
)

// TestGatewaySessionKeysBrowser: /gateway's JSON-RPC sessionId keys the
// browser sessions, as the gateway tools plan isolates them per session: a
// sessionKey reuses the browser of its own JSON-RPC session only, and a
// browser another session started is not there for it, on the same token.
func TestGatewaySessionKeysBrowser(t *testing.T) {
	testenv.Command(t, "chromium", "chromium")
	// Under /tmp, whatever TMPDIR is.
	tmp := testenv.SharedTempDir(t)
	must(t, os.Chmod(tmp, 0o711)) // Chromium may run as nobody
	c := testConfig(t)
	c.BrowserTools = true
	must(t, c.Validate())
	r := startWith(t, c, Options{browserTweak: func(o *browser.Options) { o.TempDir = tmp }})

	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(r.url, "http")+"/gateway?resultFormat=toolResult", nil)
	must(t, err)
	defer ws.Close()
	invoke := func(session, tool, args string) (ok bool, data map[string]any, text string) {
		t.Helper()
		must(t, ws.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":{"toolId":"`+tool+`","sessionId":"`+session+`","args":`+args+`}}`)))
		_, msg, err := ws.ReadMessage()
		must(t, err)
		var out struct {
			Result struct {
				OK    bool            `json:"ok"`
				Data  json.RawMessage `json:"data"`
				Error struct{ Message string }
			}
		}
		must(t, json.Unmarshal(msg, &out))
		_ = json.Unmarshal(out.Result.Data, &data)
		return out.Result.OK, data, string(msg)
	}
	okA, a, msg := invoke("agent-a", "browser.start", `{"sessionKey":"main"}`)
	if !okA || a["sessionId"] == "" {
		t.Fatalf("browser.start for agent-a: %s", msg)
	}
	browserA := a["sessionId"].(string)
	defer invoke("agent-a", "browser.close", `{"sessionId":"`+browserA+`"}`)
	okB, b, msg := invoke("agent-b", "browser.start", `{"sessionKey":"main"}`)
	if !okB || b["sessionId"] == browserA || b["reused"] != false {
		t.Fatalf("browser.start for agent-b with agent-a's key: %s; want a browser of its own", msg)
	}
	defer invoke("agent-b", "browser.close", `{"sessionId":"`+b["sessionId"].(string)+`"}`)
	if ok, again, msg := invoke("agent-a", "browser.start", `{"sessionKey":"main"}`); !ok || again["sessionId"] != browserA || again["reused"] != true {
		t.Errorf("browser.start for agent-a again: %s; want its browser reused", msg)
	}
	if ok, _, msg := invoke("agent-b", "browser.snapshot", `{"sessionId":"`+browserA+`"}`); ok || !strings.Contains(msg, "no such browser session") {
		t.Errorf("agent-b on agent-a's browser: %s; want no such session", msg)
	}
	if ok, _, msg := invoke("agent-a", "browser.snapshot", `{"sessionId":"`+browserA+`"}`); !ok {
		t.Errorf("agent-a on its browser: %s", msg)
	}
}

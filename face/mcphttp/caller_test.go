package mcphttp

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestSDKPathCallsAsItsRequest: a tool call the SDK answers runs as the
// caller its own request was admitted as, the one token lookup of
// admission (serveSDK hands the caller over): in a stateless request, and
// in a session, where each POST brings its own credential (a session
// admits only the token that opened it: TestSessionBoundToItsToken); a
// client's X-Agentbe-Caller header is never taken.
func TestSDKPathCallsAsItsRequest(t *testing.T) {
	tokens := u1Tokens(t)
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_allowed_directories","arguments":{}}}`
	do := func(url, token, session, body string) (string, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set(headerCaller, "1") // a client's value: replaced
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		return string(b), resp.Header.Get("Mcp-Session-Id")
	}
	for _, sessions := range []bool{false, true} {
		e := newEnv(t, func(o *Options) { o.AuthToken, o.Tokens, o.Sessions = "daemon-token", tokens, sessions })
		e.srv.noFastPath = true
		session := map[string]string{}
		for _, token := range []string{"u1-token", "daemon-token"} {
			if sessions {
				if _, session[token] = do(e.url(), token, "", initBody); session[token] == "" {
					t.Fatal("no session")
				}
			}
		}
		if got, _ := do(e.url(), "u1-token", session["u1-token"], list); !strings.Contains(got, `- `+e.root+`/users/u1"`) {
			t.Errorf("sessions %v, the bound token's call: %s", sessions, got)
		}
		if got, _ := do(e.url(), "daemon-token", session["daemon-token"], list); !strings.Contains(got, `- `+e.root+`"`) {
			t.Errorf("sessions %v, the daemon token's call: %s", sessions, got)
		}
		for token, id := range session {
			req, _ := http.NewRequest("DELETE", e.url(), nil)
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Mcp-Session-Id", id)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		if n := e.srv.fastCalls.Load(); n != 0 {
			t.Errorf("%d calls took the fast path", n)
		}
		e.srv.callersMu.Lock()
		left := len(e.srv.callers)
		e.srv.callersMu.Unlock()
		if left != 0 {
			t.Errorf("sessions %v: %d callers left after their requests", sessions, left)
		}
	}
}

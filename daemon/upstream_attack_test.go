package daemon

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackUpstreamTokens: a token bound to a scope is refused an
// upstream server's tool on /mcp, /execute and /gateway, called by its
// qualified name and by its bare name (registry.Tool.WholeRoot: the server
// runs over the whole root); a read-only token and one without exec, of
// the whole root, may call an upstream tool the server annotates
// readOnlyHint (the hint is the server's word: docs/security.md, "Tokens
// bound to scopes"); the daemon's own token may. The upstream is the
// minimal echo server (internal/echomcp), whose echo says readOnlyHint.
func TestAttackUpstreamTokens(t *testing.T) {
	self, err := os.Executable()
	must(t, err)
	c := testConfig(t)
	c.Isolation = "software"
	c.AuthToken = "master-token"
	must(t, os.MkdirAll(filepath.Join(c.Root, "a"), 0o755))
	cfgFile := filepath.Join(t.TempDir(), "mcp_servers.json")
	must(t, os.WriteFile(cfgFile, []byte(fmt.Sprintf(`{"servers":[{"name":"e","command":%q,"env":{%q:"1"}}]}`, self, echoUpstreamEnv)), 0o600))
	c.Upstreams = cfgFile
	c.UpstreamCacheDir = t.TempDir()
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	must(t, os.WriteFile(tokens, []byte(`{"tokens":[`+strings.Join([]string{
		tokenLine("alice", "alice-token", `,"scope":"a"`),
		tokenLine("ro", "ro-token", `,"readOnly":true`),
		tokenLine("noexec", "noexec-token", `,"exec":false`),
	}, ",")+`]}`), 0o600))
	c.TokensFile = tokens
	must(t, c.Validate())
	r := start(t, c, nil)
	waitUpstreams(t, r.url, "e")

	allowed := func(body string) bool {
		return strings.Contains(body, "hi there") && !strings.Contains(body, "Permission denied")
	}
	for _, tc := range []struct {
		token string
		ok    bool
	}{{"alice-token", false}, {"ro-token", true}, {"noexec-token", true}, {"master-token", true}} {
		for _, tool := range []string{"e__echo", "echo"} {
			code, body := callAs(t, r.url, tc.token, "", tool, `{"text":"hi there"}`)
			if code != http.StatusOK || allowed(body) != tc.ok {
				t.Errorf("/mcp %s %s: %d %.300s", tc.token, tool, code, body)
			}
			code, body = send(t, http.MethodPost, r.url+"/execute", `{"tool_name":"`+tool+`","arguments":{"text":"hi there"}}`, bearer(tc.token))
			if allowed(body) != tc.ok {
				t.Errorf("/execute %s %s: %d %.300s", tc.token, tool, code, body)
			}
			gw := dialGW(t, r.url, tc.token)
			if got := rpcGW(t, gw, `{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":{"sessionId":"s","toolId":"`+tool+`","args":{"text":"hi there"}}}`); allowed(got) != tc.ok {
				t.Errorf("/gateway %s %s: %.300s", tc.token, tool, got)
			}
			gw.Close()
		}
	}
	// The daemon's own token with X-Scope-Path is not bound: it holds the
	// whole root, and the scope narrows the call's path check.
	if code, body := callAs(t, r.url, "master-token", "a", "e__echo", `{"text":"hi there"}`); code != http.StatusOK || !allowed(body) {
		t.Errorf("/mcp master with X-Scope-Path: %d %.300s", code, body)
	}
}

package daemon

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSiteOnDaemon: --site serves the site under /site/ behind the token,
// and as the MCP tools read_page and run_command, whose rules are in the
// initialize instructions.
func TestSiteOnDaemon(t *testing.T) {
	c := testConfig(t)
	c.Site = t.TempDir()
	if err := os.CopyFS(c.Site, os.DirFS("../examples/site")); err != nil {
		t.Fatal(err)
	}
	c.AuthToken = "site-token-42"
	c.TokensFile = filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(c.TokensFile, []byte(`{"tokens":[`+tokenLine("reader", "reader-token", `,"readOnly":true`)+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	req := func(method, path, body, token string) (int, string) {
		t.Helper()
		hdr := bearer(token)
		hdr["Accept"] = "application/json, text/event-stream"
		return send(t, method, r.url+path, body, hdr)
	}
	if code, _ := req("GET", "/site/", "", ""); code != 401 {
		t.Errorf("without the token: %d", code)
	}
	if code, body := req("GET", "/site/", "", c.AuthToken); code != 200 || !strings.Contains(body, "# Example tool site") {
		t.Errorf("GET /site/: %d %.100s", code, body)
	}
	if code, body := req("POST", "/site/data", `{"command":["head","-n","1","cities.csv"]}`, c.AuthToken); code != 200 || body != `{"stdout":"name,country,population\n","stderr":"","returncode":0}` {
		t.Errorf("POST /site/data: %d %s", code, body)
	}
	// A read-only token reads the site's pages and runs none of its
	// commands, over HTTP and MCP.
	if code, _ := req("GET", "/site/", "", "reader-token"); code != 200 {
		t.Errorf("GET /site/ with a read-only token: %d", code)
	}
	if code, body := req("POST", "/site/data", `{"command":["head","-n","1","cities.csv"]}`, "reader-token"); code != http.StatusForbidden || !strings.Contains(body, `token \"reader\" may not run commands`) {
		t.Errorf("POST /site/data with a read-only token: %d %s", code, body)
	}
	if code, body := req("POST", "/mcp", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_command","arguments":{"path":"data","command":["true"]}}}`, "reader-token"); code != 200 || !strings.Contains(body, "Permission denied") {
		t.Errorf("run_command over MCP with a read-only token: %d %s", code, body)
	}
	code, body := req("POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, c.AuthToken)
	if code != 200 || !strings.Contains(body, "This server also serves a tool site") {
		t.Errorf("initialize instructions: %d %.300s", code, body)
	}
	code, body = req("POST", "/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"path":"data","command":["grep","-c","CN","cities.csv"]}}}`, c.AuthToken)
	if code != 200 || !strings.Contains(body, `\"stdout\":\"1\\n\"`) {
		t.Errorf("run_command over MCP: %d %s", code, body)
	}
	code, body = req("POST", "/execute", `{"tool_name":"read_page","arguments":{"path":"guide"}}`, c.AuthToken)
	if code != 200 || !strings.Contains(body, "Using this site") {
		t.Errorf("read_page over REST: %d %s", code, body)
	}
	code, body = req("POST", "/execute", `{"tool_name":"run_command","arguments":{"path":"","command":["wc","-l","/etc/passwd"]}}`, c.AuthToken)
	if code != 400 || !strings.Contains(body, "absolute path") {
		t.Errorf("a refused command over REST: %d %s", code, body)
	}
}

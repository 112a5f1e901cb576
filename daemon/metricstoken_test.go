package daemon

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMetricsToken: with --metrics-token-file, /metrics answers the
// scraper's token and a trusted caller's (the daemon's token, the
// operator's) and nobody else, a token bound to a scope included; the
// scraper's token opens nothing else; the Origin and Host rules still
// come first. Without the flag /metrics stays open to any caller that
// passes them.
func TestMetricsToken(t *testing.T) {
	c := testConfig(t)
	c.AuthToken = "agent-token"
	c.OperatorToken = "operator-token"
	c.MetricsToken = "scrape-token"
	c.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	must(t, os.WriteFile(tokens, []byte(`{"tokens":[`+tokenLine("alice", "alice-token", `,"scope":"a"`)+`]}`), 0o600))
	c.TokensFile = tokens
	must(t, c.Validate())
	r := start(t, c, nil)

	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"the scraper's token", bearer("scrape-token"), http.StatusOK},
		{"the daemon's token", bearer("agent-token"), http.StatusOK},
		{"the operator's token", bearer("operator-token"), http.StatusOK},
		{"no token", nil, http.StatusUnauthorized},
		{"a wrong token", bearer("nope"), http.StatusUnauthorized},
		{"a token bound to a scope", bearer("alice-token"), http.StatusUnauthorized},
		{"the scraper's token in the query", nil, http.StatusUnauthorized},
		{"the scraper's token from a foreign origin", map[string]string{"Authorization": "Bearer scrape-token", "Origin": "http://evil.example"}, http.StatusForbidden},
	} {
		url := r.url + "/metrics"
		if strings.Contains(tc.name, "query") {
			url += "?token=scrape-token"
		}
		code, body := send(t, http.MethodGet, url, "", tc.hdr)
		if code != tc.want {
			t.Errorf("%s: /metrics answered %d, want %d: %.200s", tc.name, code, tc.want, body)
		}
		if code == http.StatusOK && !strings.Contains(body, "agentbe_http_connections_open") {
			t.Errorf("%s: /metrics answered 200 without the metrics: %.200s", tc.name, body)
		}
		if code == http.StatusUnauthorized && !strings.Contains(body, "--metrics-token-file") {
			t.Errorf("%s: the 401 does not name the flag: %s", tc.name, body)
		}
	}
	// The scraper's token opens nothing but /metrics.
	if code, body := send(t, http.MethodGet, r.url+"/tools", "", bearer("scrape-token")); code != http.StatusUnauthorized {
		t.Errorf("the scraper's token on /tools: %d, want 401: %.200s", code, body)
	}
	if code, body := send(t, http.MethodPost, r.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, bearer("scrape-token")); code != http.StatusUnauthorized {
		t.Errorf("the scraper's token on /mcp: %d, want 401: %.200s", code, body)
	}
	if code, _ := healthAs(t, r.url, bearer("scrape-token")); code != http.StatusOK {
		t.Errorf("/health with the scraper's token: %d", code)
	}
	// A secret like the others: never in the audit log, whatever carried
	// it, nor in a command's environment.
	callAs(t, r.url, "agent-token", "", "write_file", `{"path":"n.txt","content":"scrape-token"}`)
	if _, body := callAs(t, r.url, "agent-token", "", "exec", `{"command":"env","env":{"SCRAPE":"scrape-token"}}`); strings.Contains(body, "SCRAPE=scrape-token") {
		t.Errorf("the scraper's token reached a command's environment: %.300s", body)
	}
	must(t, r.stop()) // the audit log written to the end: its writer is a goroutine of its own
	if b, err := os.ReadFile(c.AuditLog); err != nil || strings.Contains(string(b), "scrape-token") || !strings.Contains(string(b), "write_file") {
		t.Errorf("the audit log (%v) holds the scraper's token, or not the call: %s", err, b)
	}

	open := testConfig(t)
	open.AuthToken = "agent-token"
	must(t, open.Validate())
	ro := start(t, open, nil)
	if code, body := send(t, http.MethodGet, ro.url+"/metrics", "", nil); code != http.StatusOK {
		t.Errorf("without --metrics-token-file, /metrics answered %d: %.200s", code, body)
	}
}

package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/config"
)

// TestApprovalFlow: system.run of a command off the allowlist waits; the
// agent's token cannot see or decide approvals; the operator approves over
// REST; the agent runs the approved request by its id; the decision is in
// the audit log.
func TestApprovalFlow(t *testing.T) {
	c := testConfig(t)
	dir := t.TempDir()
	c.GatewayTools = true
	c.AuthToken = "agent-token-1"
	c.OperatorToken = "operator-token-2"
	c.ExecApprovals = filepath.Join(dir, "approvals.json")
	c.AuditLog = filepath.Join(dir, "audit.log")
	if err := os.WriteFile(c.ExecApprovals, []byte(`{"allowlist":{"commands":["echo"]},"denylist":{"patterns":["sudo"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	do := func(method, path, body, token string) (int, string) {
		t.Helper()
		return send(t, method, r.url+path, body, map[string]string{"Authorization": "Bearer " + token})
	}
	exec := func(args string) map[string]any {
		t.Helper()
		_, body := do("POST", "/execute", `{"tool_name":"system.run","arguments":`+args+`}`, c.AuthToken)
		var out map[string]any
		json.Unmarshal([]byte(body), &out)
		return out
	}
	if out := exec(`{"argv":["echo","direct"]}`); out["status"] != "success" || !strings.Contains(out["output"].(string), `"stdout":"direct\n"`) {
		t.Errorf("allowlisted: %v", out)
	}
	out := exec(`{"argv":["printf","%s","needs approval"]}`)
	first := strings.SplitN(out["output"].(string), "\n", 2)[0]
	var pend struct{ Status, RequestID string }
	if err := json.Unmarshal([]byte(first), &pend); err != nil || pend.Status != "approval-pending" {
		t.Fatalf("pending: %v", out)
	}
	for _, tc := range []struct{ method, path, token string }{
		{"GET", "/approvals", c.AuthToken},
		{"POST", "/approvals/" + pend.RequestID, c.AuthToken},
		{"GET", "/approvals", ""},
	} {
		if code, body := do(tc.method, tc.path, `{"approved":true}`, tc.token); code != 401 {
			t.Errorf("%s %s with token %q: %d %s", tc.method, tc.path, tc.token, code, body)
		}
	}
	if code, body := do("GET", "/approvals", "", c.OperatorToken); code != 200 || !strings.Contains(body, pend.RequestID) || !strings.Contains(body, "needs approval") {
		t.Errorf("list: %d %s", code, body)
	}
	if code, body := do("POST", "/approvals/"+pend.RequestID, `{"approved":true}`, c.OperatorToken); code != 200 || !strings.Contains(body, `"state":"approved"`) {
		t.Errorf("approve: %d %s", code, body)
	}
	if code, _ := do("POST", "/approvals/nope", `{"approved":true}`, c.OperatorToken); code != 404 {
		t.Errorf("unknown id: %d", code)
	}
	if out := exec(`{"requestId":"` + pend.RequestID + `"}`); out["status"] != "success" || !strings.Contains(out["output"].(string), `"stdout":"needs approval"`) {
		t.Errorf("approved run: %v", out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(c.AuditLog)
		if strings.Contains(string(b), `"tool":"approval","command":"printf %s needs approval","outcome":"approved"`) {
			if strings.Contains(string(b), c.OperatorToken) || strings.Contains(string(b), c.AuthToken) {
				t.Errorf("a token in the audit log:\n%s", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no approval line in the audit log:\n%s", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNetAllowFlags: the operator's --net-allow-* flags reach the network
// door of the tools that go out. http.request at a loopback server is
// refused by default (loopback and a port other than 80/443), and answered
// once the operator admits the address and the port.
func TestNetAllowFlags(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "internal answer")
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	call := func(c config.Config) string {
		t.Helper()
		c.GatewayTools = true
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		r := start(t, c, nil)
		_, body := send(t, "POST", r.url+"/execute", `{"tool_name":"http.request","arguments":{"url":"`+srv.URL+`/x"}}`, nil)
		return body
	}
	if body := call(testConfig(t)); !strings.Contains(body, "refused") || strings.Contains(body, "internal answer") {
		t.Errorf("by default: %s", body)
	}
	onlyAddr := testConfig(t)
	onlyAddr.NetAllowCIDRs = []string{"127.0.0.1/32"}
	if body := call(onlyAddr); !strings.Contains(body, "port "+u.Port()+" is not allowed") {
		t.Errorf("address admitted, port not: %s", body)
	}
	both := testConfig(t)
	both.NetAllowCIDRs = []string{"127.0.0.1/32"}
	both.NetAllowPorts = []string{u.Port()}
	if body := call(both); !strings.Contains(body, "internal answer") {
		t.Errorf("admitted: %s", body)
	}
}

// TestSystemRunJudgedFileOverREST: an allowlisted git with env PATH into
// the workspace, where a bin/git was planted, waits for the operator;
// GET /approvals shows the file it resolved to and its content's digest;
// "always" on it is taken as once (the answer says why, the policy file
// is unchanged, the audit line says "approved"); and every run's audit line
// (system.run.exec) and the daemon log name the absolute file that ran.
func TestSystemRunJudgedFileOverREST(t *testing.T) {
	c := testConfig(t)
	dir := t.TempDir()
	c.GatewayTools = true
	c.AuthToken = "agent-token-1"
	c.OperatorToken = "operator-token-2"
	c.ExecApprovals = filepath.Join(dir, "approvals.json")
	c.AuditLog = filepath.Join(dir, "audit.log")
	policy := `{"allowlist":{"commands":["git","echo"]}}`
	if err := os.WriteFile(c.ExecApprovals, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(c.Root)
	if err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(root, "bin", "git")
	os.MkdirAll(filepath.Dir(planted), 0o755)
	if err := os.WriteFile(planted, []byte("#!/bin/sh\necho planted\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	do := func(method, path, body, token string) (int, string) {
		t.Helper()
		return send(t, method, r.url+path, body, map[string]string{"Authorization": "Bearer " + token})
	}
	exec := func(args string) string {
		t.Helper()
		_, body := do("POST", "/execute", `{"tool_name":"system.run","arguments":`+args+`}`, c.AuthToken)
		var out struct{ Output string }
		json.Unmarshal([]byte(body), &out)
		return out.Output
	}
	echo := ""
	for _, d := range []string{"/usr/local/bin", "/usr/bin", "/bin"} {
		if p, err := filepath.EvalSymlinks(filepath.Join(d, "echo")); err == nil {
			echo = p
			break
		}
	}
	if out := exec(`{"argv":["echo","direct"]}`); !strings.Contains(out, `"stdout":"direct\n"`) {
		t.Fatalf("allowlisted: %s", out)
	}
	out := exec(`{"argv":["git","--version"],"env":{"PATH":"` + root + `/bin:/usr/bin:/bin"}}`)
	if strings.Contains(out, "planted") {
		t.Fatalf("the planted git ran without approval: %s", out)
	}
	var pend struct{ Status, RequestID string }
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &pend); err != nil || pend.Status != "approval-pending" {
		t.Fatalf("pending: %s", out)
	}
	if code, body := do("GET", "/approvals", "", c.OperatorToken); code != 200 || !strings.Contains(body, `"executable":"`+planted+`"`) || !strings.Contains(body, `"digest":"sha256:`) {
		t.Errorf("the operator is not shown the planted file and its digest: %d %s", code, body)
	}
	if code, body := do("POST", "/approvals/"+pend.RequestID, `{"approved":true,"always":true}`, c.OperatorToken); code != 200 || !strings.Contains(body, "approved once") {
		t.Errorf("always on a workspace program: %d %s", code, body)
	}
	if saved, _ := os.ReadFile(c.ExecApprovals); string(saved) != policy {
		t.Errorf("the policy file changed:\n%s", saved)
	}
	if out := exec(`{"requestId":"` + pend.RequestID + `"}`); !strings.Contains(out, `"stdout":"planted\n"`) {
		t.Errorf("approved run: %s", out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(c.AuditLog)
		s := string(b)
		if strings.Contains(s, `"tool":"system.run.exec","command":"`+echo+` direct","outcome":"exit 0"`) &&
			strings.Contains(s, `"tool":"system.run.exec","command":"`+planted+` --version # sha256:`) &&
			strings.Contains(s, `"tool":"approval","command":"git --version","outcome":"approved"`) {
			if strings.Contains(s, "approved-always") {
				t.Errorf("the audit log says approved-always:\n%s", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit log does not name the files that ran:\n%s", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if logs := r.logs.String(); !strings.Contains(logs, "executable="+planted) || !strings.Contains(logs, "executable="+echo) {
		t.Errorf("the daemon log does not name the files that ran:\n%s", logs)
	}
}

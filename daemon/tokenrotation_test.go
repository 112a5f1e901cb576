package daemon

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestTokenFilesRotateOnReload: a reload (SIGHUP) reads --auth-token-file,
// --operator-token-file and --metrics-token-file again. Each new token
// admits from then on and its old one admits no one, on every face (/mcp,
// /gateway, /ssh, /metrics); a /gateway connection opened with an old
// token is closed with 4001 and a reason that names the file, and one of
// a token the reload left as it was stays open. The new tokens are
// secrets at once: the daemon's log, the audit log and a command's
// environment never show them, nor the old ones. A reload whose file is
// empty or repeats another token changes nothing and names the file.
func TestTokenFilesRotateOnReload(t *testing.T) {
	const (
		agent1, agent2 = "agent-one-7Kq2", "agent-two-9Wx4"
		op1, op2       = "operator-one-3Hn8", "operator-two-5Rz1"
		scrape1        = "scrape-one-2Lm6"
		scrape2        = "scrape-two-8Pv3"
	)
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, []byte(content+"\n"), 0o600))
		return p
	}
	c := testConfig(t)
	c.AuthTokenFile, c.AuthToken = write("agent", agent1), agent1
	c.OperatorTokenFile, c.OperatorToken = write("operator", op1), op1
	c.MetricsTokenFile, c.MetricsToken = write("scrape", scrape1), scrape1
	c.GatewayTools = true
	c.ExecApprovals = filepath.Join(t.TempDir(), "approvals.json")
	must(t, os.WriteFile(c.ExecApprovals, []byte(`{}`), 0o600))
	c.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	c.ProcessTools = true
	must(t, c.Validate())
	r := start(t, c, nil)

	agentGW, opGW := dialGW(t, r.url, agent1), dialGW(t, r.url, op1)
	list := `{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":{"sessionId":"s","toolId":"list_directory","args":{"path":"."}}}`
	if got := rpcGW(t, agentGW, list); strings.Contains(got, `"error"`) {
		t.Fatalf("the agent's connection before the reload: %.300s", got)
	}
	sshOld := sshAs(t, r.url, agent1)
	sshOldEnded := make(chan error, 1)
	go func() { sshOldEnded <- sshOld.Wait() }()

	// The agent's and the operator's files change; the scraper's not yet.
	write("agent", agent2)
	write("operator", op2)
	got, err := r.d.ReloadTokens()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Rotated, " ") != "--auth-token-file --operator-token-file" || got.Ended < 3 {
		t.Errorf("ReloadTokens = %+v, want the agent's and the operator's files rotated and the three connections ended", got)
	}
	for name, ws := range map[string]*websocket.Conn{"--auth-token-file": agentGW, "--operator-token-file": opGW} {
		_ = ws.WriteMessage(websocket.TextMessage, []byte(gwWrite))
		if ce := gwClosed(t, ws); ce != nil && (ce.Code != 4001 || !strings.Contains(ce.Text, name)) {
			t.Errorf("the connection of the token %s held: closed %d %q, want 4001 naming the file", name, ce.Code, ce.Text)
		}
	}
	if _, err := os.Stat(filepath.Join(c.Root, "after.txt")); err == nil {
		t.Error("a connection of a rotated-out token wrote after the reload")
	}
	select {
	case <-sshOldEnded:
	case <-time.After(30 * time.Second):
		t.Error("the /ssh connection of the agent's old token is open 30 s after the reload")
	}

	for _, tc := range []struct {
		token string
		want  int
	}{{agent1, http.StatusUnauthorized}, {agent2, http.StatusOK}, {op2, http.StatusUnauthorized}} {
		if code, body := send(t, http.MethodPost, r.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, bearer(tc.token)); code != tc.want {
			t.Errorf("/mcp with %s after the reload: %d, want %d: %.200s", tc.token, code, tc.want, body)
		}
	}
	// A WebSocket endpoint refuses a token after the upgrade, with 4001.
	if ce := gwClosed(t, dialGW(t, r.url, op1)); ce != nil && ce.Code != 4001 {
		t.Errorf("the operator's old token on /gateway after the reload: closed %d %q, want 4001", ce.Code, ce.Text)
	}
	approve := `{"jsonrpc":"2.0","id":2,"method":"tools.approve","params":{"requestId":"nope","approved":true}}`
	if got := rpcGW(t, dialGW(t, r.url, op2), approve); strings.Contains(got, "-32004") {
		t.Errorf("the operator's new token is not the operator's: %s", got)
	}
	if got := rpcGW(t, dialGW(t, r.url, agent2), list); strings.Contains(got, `"error"`) {
		t.Errorf("the agent's new token on /gateway: %.300s", got)
	}
	sess, err := sshAs(t, r.url, agent2).NewSession()
	must(t, err)
	if out, err := sess.Output("echo via-ssh"); err != nil || string(out) != "via-ssh\n" {
		t.Errorf("/ssh with the agent's new token: %q %v", out, err)
	}

	// The scraper's file changes alone; the other connections stay.
	kept := dialGW(t, r.url, agent2)
	write("scrape", scrape2)
	if got, err := r.d.ReloadTokens(); err != nil || strings.Join(got.Rotated, " ") != "--metrics-token-file" {
		t.Fatalf("ReloadTokens = %+v, %v", got, err)
	}
	for _, tc := range []struct {
		token string
		want  int
	}{{scrape1, http.StatusUnauthorized}, {scrape2, http.StatusOK}} {
		if code, body := send(t, http.MethodGet, r.url+"/metrics", "", bearer(tc.token)); code != tc.want {
			t.Errorf("/metrics with %s: %d, want %d: %.200s", tc.token, code, tc.want, body)
		}
	}
	if got := rpcGW(t, kept, list); strings.Contains(got, `"error"`) {
		t.Errorf("a connection whose token the reload left as it was: %.300s", got)
	}

	// The new tokens are secrets, the old ones too: a command that
	// carries them is logged with them replaced, and its environment
	// does not get them.
	all := []string{agent1, agent2, op1, op2, scrape1, scrape2}
	code, body := callAs(t, r.url, agent2, "", "process_start", `{"command":"echo `+strings.Join(all, " ")+`","name":"`+op2+`"}`)
	if code != http.StatusOK || strings.Contains(body, `"isError":true`) {
		t.Fatalf("process_start: %d %.300s", code, body)
	}
	waitFor(t, "the log line of the process", func() bool { return strings.Contains(r.logs.String(), "background process started") })
	env := `{"command":"env","env":{"A":"` + agent2 + `","O":"x` + op2 + `","S":"` + scrape2 + `","K":"kept"}}`
	if code, body := callAs(t, r.url, agent2, "", "exec", env); code != http.StatusOK || !strings.Contains(body, "K=kept") {
		t.Fatalf("exec env: %d %.300s", code, body)
	} else if strings.Contains(body, "A=") || strings.Contains(body, "O=") || strings.Contains(body, "S=") {
		t.Errorf("a new token reached a command's environment: %.400s", body)
	}
	// Both calls' lines, the exec's carrying the tokens in its env, once
	// the audit log's writer has written them.
	audit := auditText(t, c.AuditLog, `"tool":"process_start"`, `"tool":"exec"`)
	logs := r.logs.String()
	for _, secret := range all {
		if strings.Contains(logs, secret) {
			i := strings.Index(logs, secret)
			t.Errorf("the daemon's log holds %q: …%.200s…", secret, logs[max(0, i-100):])
		}
		if strings.Contains(audit, secret) {
			t.Errorf("the audit log holds %q", secret)
		}
	}
	if !strings.Contains(audit, "process_start") {
		t.Errorf("the audit log lacks the call whose secrets it should hide: %s", audit)
	}

	// A reload that fails changes nothing, and says which file.
	for _, bad := range []struct{ file, content, want string }{
		{"agent", "", `--auth-token-file "` + c.AuthTokenFile + `" is empty`},
		{"operator", agent2, "--operator-token-file holds the agent's token"},
	} {
		write(bad.file, bad.content)
		if _, err := r.d.ReloadTokens(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s holding %q: %v, want %q", bad.file, bad.content, err, bad.want)
		}
		write("agent", agent2)
		write("operator", op2)
		if code, _ := send(t, http.MethodPost, r.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, bearer(agent2)); code != http.StatusOK {
			t.Errorf("after the failed reload (%s), the agent's token in force: %d", bad.file, code)
		}
	}
	if got := rpcGW(t, kept, list); strings.Contains(got, `"error"`) {
		t.Errorf("a failed reload closed a connection: %.300s", got)
	}
}

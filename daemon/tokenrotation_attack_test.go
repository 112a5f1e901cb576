package daemon

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentbe/agentbe-daemon/config"
)

// rotationDaemon is a daemon whose three tokens come from files in a
// directory of the test's, with /gateway's tools and the operator's
// approvals; write replaces one file ("agent", "operator", "scrape").
func rotationDaemon(t *testing.T, agent, op, scrape string, tweak func(*config.Config)) (r *running, c config.Config, write func(name, content string)) {
	t.Helper()
	dir := t.TempDir()
	write = func(name, content string) {
		t.Helper()
		must(t, os.WriteFile(filepath.Join(dir, name), []byte(content+"\n"), 0o600))
	}
	write("agent", agent)
	write("operator", op)
	write("scrape", scrape)
	c = testConfig(t)
	c.AuthTokenFile, c.AuthToken = filepath.Join(dir, "agent"), agent
	c.OperatorTokenFile, c.OperatorToken = filepath.Join(dir, "operator"), op
	c.MetricsTokenFile, c.MetricsToken = filepath.Join(dir, "scrape"), scrape
	c.GatewayTools = true
	c.ExecApprovals = filepath.Join(t.TempDir(), "approvals.json")
	must(t, os.WriteFile(c.ExecApprovals, []byte(`{}`), 0o600))
	if tweak != nil {
		tweak(&c)
	}
	must(t, c.Validate())
	return start(t, c, nil), c, write
}

// TestAttackTokenMovedToAnotherRole: a reload may not give one role a
// token another role holds or held. The agent keeps its old token (in
// its configuration, a script, its memory): if the operator's file were
// reloaded with it, the agent could approve its own commands; the
// scraper's, and the agent would read /metrics; the agent's made the
// operator's old token, and whoever kept that one would be the agent.
// Each such reload is refused, names both files and changes nothing; a
// token going back to the role that held it is a rotation like any other.
// Without the check the operator's file holding the agent's old token
// made the agent's old token the operator's.
func TestAttackTokenMovedToAnotherRole(t *testing.T) {
	const (
		agent1, agent2, agent3 = "agent-one-Q7wz", "agent-two-M3kd", "agent-three-J8rp"
		op1                    = "operator-one-B2xv"
		scrape1                = "scrape-one-T5nc"
	)
	r, _, write := rotationDaemon(t, agent1, op1, scrape1, nil)
	write("agent", agent2)
	if got, err := r.d.ReloadTokens(); err != nil || len(got.Rotated) != 1 {
		t.Fatalf("the agent's rotation: %+v %v", got, err)
	}
	approve := `{"jsonrpc":"2.0","id":2,"method":"tools.approve","params":{"requestId":"nope","approved":true}}`
	isOperator := func(token string) bool {
		t.Helper()
		code, _ := send(t, http.MethodGet, r.url+"/approvals", "", bearer(token))
		ws := dialGW(t, r.url, token)
		defer ws.Close()
		if err := ws.WriteMessage(websocket.TextMessage, []byte(approve)); err != nil {
			return code == http.StatusOK
		}
		ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, reply, err := ws.ReadMessage()
		viaGW := err == nil && !strings.Contains(string(reply), "-32004") && !strings.Contains(string(reply), "-32001")
		return code == http.StatusOK || viaGW
	}
	for _, tc := range []struct {
		name               string
		agent, op, scrape  string
		want               string // in the error
		operatorAfterwards string // the token that must still be the operator's
	}{
		{"the operator's file holds the agent's token in force", agent2, agent2, scrape1, "--operator-token-file holds the agent's token", op1},
		{"the operator's file holds the agent's old token", agent3, agent1, scrape1, "--operator-token-file holds a token that --auth-token-file held", op1},
		{"the scraper's file holds the agent's old token", agent2, op1, agent1, "--metrics-token-file holds a token that --auth-token-file held", op1},
		{"the agent's file holds the operator's token, the operator's a new one", op1, "operator-two-H4ty", scrape1, "--auth-token-file holds a token that --operator-token-file held", op1},
		{"the agent's and the scraper's tokens swapped", scrape1, op1, agent2, "--auth-token-file holds a token that --metrics-token-file held", op1},
	} {
		write("agent", tc.agent)
		write("operator", tc.op)
		write("scrape", tc.scrape)
		got, err := r.d.ReloadTokens()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ReloadTokens = %+v, %v; want an error %q", tc.name, got, err, tc.want)
		}
		if err != nil {
			for _, v := range []string{agent1, agent2, agent3, op1, scrape1} {
				if strings.Contains(err.Error(), v) {
					t.Errorf("%s: the error shows a token: %v", tc.name, err)
				}
			}
		}
		if isOperator(agent1) || isOperator(agent2) {
			t.Errorf("%s: an agent's token is the operator's", tc.name)
		}
		if !isOperator(tc.operatorAfterwards) {
			t.Errorf("%s: the operator's token in force is no longer the operator's", tc.name)
		}
		for _, s := range []string{agent1, op1} {
			if code, _ := send(t, http.MethodGet, r.url+"/metrics", "", bearer(s)); code == http.StatusOK && s == agent1 {
				t.Errorf("%s: the agent's old token reads /metrics", tc.name)
			}
		}
		if code, _ := send(t, http.MethodPost, r.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, bearer(agent2)); code != http.StatusOK {
			t.Errorf("%s: the agent's token in force after the refused reload: %d", tc.name, code)
		}
	}
	// Back to the role that held it: the agent's first token again.
	write("agent", agent1)
	write("operator", op1)
	write("scrape", scrape1)
	if got, err := r.d.ReloadTokens(); err != nil || strings.Join(got.Rotated, " ") != "--auth-token-file" {
		t.Errorf("the agent's file back to its first token: %+v %v", got, err)
	}
	if code, _ := send(t, http.MethodPost, r.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, bearer(agent1)); code != http.StatusOK {
		t.Errorf("the agent's first token, back in force: %d", code)
	}
}

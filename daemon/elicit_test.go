package daemon

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSystemRunAsksTheClient: with --exec-ask-client, a system.run that
// waits for approval asks the MCP client's user through elicitation (here
// a go-sdk client with a session): an approval runs the command at once, a
// decline refuses it, and both are in the audit log. Without the flag, or
// with a client that cannot be asked, the request waits for the operator.
func TestSystemRunAsksTheClient(t *testing.T) {
	dir := t.TempDir()
	c := testConfig(t)
	c.GatewayTools = true
	c.MCPSessions = true
	c.ExecAskClient = true
	c.AuthToken = "agent-token-1"
	c.OperatorToken = "operator-token-2"
	c.ExecApprovals = filepath.Join(dir, "approvals.json")
	c.AuditLog = filepath.Join(dir, "audit.log")
	os.WriteFile(c.ExecApprovals, []byte(`{"allowlist":{"commands":["echo"]}}`), 0o600)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	hdr := http.Header{"Authorization": {"Bearer " + c.AuthToken}}

	var answer atomic.Value // "approve", "decline"
	var asked atomic.Int32
	var lastMessage atomic.Value
	connect := func(elicit bool) *mcp.ClientSession {
		opts := &mcp.ClientOptions{}
		if elicit {
			opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked.Add(1)
				lastMessage.Store(req.Params.Message)
				if answer.Load() == "approve" {
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
				}
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "elicit", Version: "1"}, opts).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: r.url + "/mcp", HTTPClient: &http.Client{Transport: headerRT{hdr}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	run := func(cs *mcp.ClientSession, text string) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "system.run", Arguments: map[string]any{"argv": []string{"printf", "%s", text}}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}

	cs := connect(true)
	answer.Store("approve")
	if txt, isErr := run(cs, "approved by the user"); isErr || !strings.Contains(txt, `"stdout":"approved by the user"`) {
		t.Fatalf("approved through elicitation: %s", txt)
	}
	if m, _ := lastMessage.Load().(string); !strings.Contains(m, `"printf" "%s" "approved by the user"`) || !strings.Contains(m, "not in the allowlist") {
		t.Errorf("the question put to the user: %q", m)
	}
	answer.Store("decline")
	if txt, isErr := run(cs, "declined"); !isErr || !strings.Contains(txt, "did not approve") {
		t.Fatalf("declined through elicitation: %s", txt)
	}
	if asked.Load() != 2 {
		t.Errorf("asked %d times, want 2", asked.Load())
	}
	// An allowlisted command is not asked about.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "system.run", Arguments: map[string]any{"argv": []string{"echo", "listed"}}})
	if err != nil || res.IsError || asked.Load() != 2 {
		t.Errorf("an allowlisted command: %v %+v, asked %d times", err, res, asked.Load())
	}
	// A client without elicitation: the request waits for the operator.
	plain := connect(false)
	if txt, isErr := run(plain, "waits"); isErr || !strings.Contains(txt, "approval-pending") {
		t.Fatalf("a client that cannot be asked: %s", txt)
	}
	audit := auditText(t, c.AuditLog, `"outcome":"approved"`, `"outcome":"denied"`, "mcp-client:")
	if !strings.Contains(audit, `"outcome":"approved"`) || !strings.Contains(audit, `"outcome":"denied"`) || !strings.Contains(audit, "mcp-client:") {
		t.Errorf("the audit log lacks the client's decisions:\n%s", audit)
	}
}

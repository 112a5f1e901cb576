package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestExecNoNetworkExplained: served without a token, the daemon gives
// bwrap commands no network (TestExecNetworkWithoutToken). A command that
// then fails for want of it says so in its own result, over MCP (the go-sdk
// client) and REST alike, naming the settings that give commands the
// network; a failure that has nothing to do with the network gets no such
// line, and neither does a command refused by a local server that is not
// running. With --exec-network=false the line names that flag.
func TestExecNoNetworkExplained(t *testing.T) {
	testenv.Bwrap(t)
	testenv.Command(t, "git", "git")
	for _, tc := range []struct {
		network, token, wantFlag string
	}{
		{"auto", "", "--auth-token-file FILE"},
		{"false", "s3cret-token", "--exec-network=true"},
	} {
		t.Run(tc.network, func(t *testing.T) {
			c := testConfig(t)
			c.Isolation = "bwrap"
			c.BlockDangerous = false // /dev/tcp is the probe here, not the policy's business
			c.ExecNetwork = tc.network
			c.AuthToken = tc.token
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			r := start(t, c, nil)
			hdr := http.Header{}
			if tc.token != "" {
				hdr.Set("Authorization", "Bearer "+tc.token)
			}
			hc := &http.Client{Transport: headerRT{hdr}}
			defer hc.CloseIdleConnections()
			ctx := context.Background()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "nethint", Version: "1"}, nil).Connect(ctx,
				&mcp.StreamableClientTransport{Endpoint: r.url + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			viaMCP := func(command string) (string, bool) {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": command}})
				if err != nil {
					t.Fatal(err)
				}
				return res.Content[0].(*mcp.TextContent).Text, res.IsError
			}
			viaREST := func(command string) (string, bool) {
				args, _ := json.Marshal(map[string]string{"command": command})
				h := map[string]string{}
				if tc.token != "" {
					h["Authorization"] = "Bearer " + tc.token
				}
				_, body := send(t, http.MethodPost, r.url+"/execute", `{"tool_name":"exec","arguments":`+string(args)+`}`, h)
				var out struct{ Status, Output, Error string }
				if err := json.Unmarshal([]byte(body), &out); err != nil {
					t.Fatalf("/execute: %v: %s", err, body)
				}
				return out.Output + out.Error, out.Status != "success"
			}
			const line = "[agentbe] This command ran without network access"
			for _, call := range []struct {
				face string
				do   func(string) (string, bool)
			}{{"mcp", viaMCP}, {"rest", viaREST}} {
				for _, cmd := range []struct {
					command string
					explain bool
				}{
					{"git ls-remote https://example.com/x.git", true}, // Could not resolve host
					{"exec 3<>/dev/tcp/10.255.255.1/80", true},        // Network is unreachable
					{"exec 3<>/dev/tcp/127.0.0.1/1", false},           // a local port nobody serves: refused, not the network
					{"ls /no/such/dir", false},
					{"echo 'Could not resolve host: github.com'", false}, // succeeded: its output is untouched
				} {
					text, isErr := call.do(cmd.command)
					got := strings.Contains(text, line)
					if got != cmd.explain {
						t.Errorf("%s %q (error %v): network line %v, want %v:\n%s", call.face, cmd.command, isErr, got, cmd.explain, text)
						continue
					}
					if got && (!isErr || !strings.Contains(text, tc.wantFlag)) {
						t.Errorf("%s %q: error %v, the line does not name %s:\n%s", call.face, cmd.command, isErr, tc.wantFlag, text)
					}
				}
			}
		})
	}
}

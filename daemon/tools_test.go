package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/ssh/wsclient"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

func okTool(name string) registry.Tool {
	return registry.Tool{Name: name, InputSchema: map[string]any{"type": "object"},
		Handler: func(context.Context, registry.Call) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}
		}}
}

// TestToolsInHealthMetricsAndAudit serves two providers' tools from the
// daemon's registry, calls them (and a name nobody serves), and reads
// /health, /metrics and the audit log over a real loopback server.
func TestToolsInHealthMetricsAndAudit(t *testing.T) {
	c := testConfig(t)
	c.AuthToken = "daemon-token-5a1c9e"
	c.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	r := start(t, c, nil)
	reg := r.d.Tools()
	if err := reg.Set("files", []registry.Tool{okTool("test_read"), okTool("test_write")}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Set("gateway", []registry.Tool{okTool("up__echo")}); err != nil {
		t.Fatal(err)
	}
	reg.SetState("gateway", "degraded", "upstream down")
	ctx := context.Background()
	for _, name := range []string{"test_read", "test_write", "client_chosen_label_x"} {
		_, err := reg.Call(ctx, name, registry.Call{Face: "mcp-http", Remote: "127.0.0.1:1",
			Args: json.RawMessage(`{"path":"a","content":"` + c.AuthToken + `","env":{"K":"env-secret-77"}}`)})
		if err != nil && name != "client_chosen_label_x" {
			t.Fatal(err)
		}
	}

	authGet := func(path string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, r.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+c.AuthToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		return resp.StatusCode, b.String()
	}

	// The details of /health are for a caller with the token.
	code, body := authGet("/health")
	if code != http.StatusOK {
		t.Fatalf("/health: %d %s", code, body)
	}
	var h struct {
		Status    string                  `json:"status"`
		Tools     int                     `json:"tools"`
		Providers []registry.ProviderInfo `json:"providers"`
	}
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatal(err)
	}
	// The daemon's own provider (the workspace tools) comes first; its
	// transactions are off by default (--transactions).
	ws := len(wstoolsNames(reg))
	if h.Status != "ok" || ws == 0 || h.Tools != ws+3 || len(h.Providers) != 3 ||
		h.Providers[0] != (registry.ProviderInfo{Name: "workspace", State: "ready", Tools: ws}) ||
		h.Providers[1] != (registry.ProviderInfo{Name: "files", State: "ready", Tools: 2}) ||
		h.Providers[2].Name != "gateway" || h.Providers[2].State != "degraded" || h.Providers[2].Tools != 1 {
		t.Errorf("/health = %s", body)
	}

	code, metrics := authGet("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`agentbe_tool_calls_total{outcome="ok",tool="test_read"} 1`,
		`agentbe_tool_calls_total{outcome="ok",tool="test_write"} 1`,
		`agentbe_tool_calls_total{outcome="unknown",tool="_unknown"} 1`,
		`agentbe_tool_errors_total{tool="_unknown"} 1`,
		`agentbe_tool_call_duration_seconds_count{tool="test_read"} 1`,
		`agentbe_audit_dropped_total 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, "client_chosen_label_x") {
		t.Errorf("a client's tool name became a label value")
	}

	// logrotate: rename, SIGHUP (ReopenAuditLog), the next line goes to the new file.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(c.AuditLog)
		if strings.Count(string(b), "\n") == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := os.Rename(c.AuditLog, c.AuditLog+".1"); err != nil {
		t.Fatal(err)
	}
	if err := r.d.ReopenAuditLog(); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Call(ctx, "up__echo", registry.Call{Face: "rest"}); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(c.AuditLog + ".1")
	cur, _ := os.ReadFile(c.AuditLog)
	if n := strings.Count(string(old), "\n"); n != 3 {
		t.Errorf("rotated file has %d lines, want 3:\n%s", n, old)
	}
	if !strings.Contains(string(cur), `"tool":"up__echo"`) || strings.Count(string(cur), "\n") != 1 {
		t.Errorf("reopened file: %s", cur)
	}
	all := string(old) + string(cur)
	for _, secret := range []string{c.AuthToken, "env-secret-77"} {
		if strings.Contains(all, secret) {
			t.Errorf("audit log holds %q:\n%s", secret, all)
		}
	}
	for _, ln := range strings.Split(strings.TrimSpace(all), "\n") {
		if !json.Valid([]byte(ln)) {
			t.Errorf("not JSON: %s", ln)
		}
	}
}

// TestAuditLogOffByDefault: without --audit-log nothing is opened and no
// dropped-lines metric is exported.
func TestAuditLogOffByDefault(t *testing.T) {
	r := start(t, testConfig(t), nil)
	if r.d.audit != nil {
		t.Fatal("audit log opened without --audit-log")
	}
	if err := r.d.ReopenAuditLog(); err != nil {
		t.Fatal(err)
	}
}

// auditText is the audit log at path once it holds every one of want, or
// as it is after 30 s (a hang guard): the log's lines are written by a
// goroutine of its own (internal/audit), so a call can be answered before
// its line is in the file. The caller makes its checks on what it returns.
func auditText(t *testing.T, path string, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		all := true
		for _, w := range want {
			all = all && strings.Contains(string(b), w)
		}
		if all || time.Now().After(deadline) {
			return string(b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAuditLogsSSHSessions runs an SSH exec over the daemon's /ssh
// WebSocket and finds its line, command included and token scrubbed, in
// the audit log.
func TestAuditLogsSSHSessions(t *testing.T) {
	c := testConfig(t)
	c.AuthToken = "ssh-token-0b7d21"
	c.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	r := start(t, c, nil)
	conn, err := wsclient.Dial(context.Background(), "ws"+strings.TrimPrefix(r.url, "http")+"/ssh", c.AuthToken)
	if err != nil {
		t.Fatal(err)
	}
	cc, chans, reqs, err := gossh.NewClientConn(conn, "ws", &gossh.ClientConfig{
		User: "agent", Auth: []gossh.AuthMethod{gossh.Password(c.AuthToken)}, HostKeyCallback: gossh.InsecureIgnoreHostKey(),
	})
	if err != nil {
		t.Fatal(err)
	}
	client := gossh.NewClient(cc, chans, reqs)
	s, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Output("echo hi # " + c.AuthToken)
	if err != nil || string(out) != "hi\n" {
		t.Fatalf("exec: %q %v", out, err)
	}
	client.Close()
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(c.AuditLog)
	var e struct {
		Face, Tool, Command, Outcome, Remote string
		BytesOut                             int64 `json:"bytes_out"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("audit log %q: %v", b, err)
	}
	if e.Face != "ssh" || e.Tool != "ssh.exec" || e.Command != "echo hi # [redacted]" || e.Outcome != "ok" || e.Remote == "" || e.BytesOut != 3 {
		t.Errorf("audit line: %s", b)
	}
	if strings.Contains(string(b), c.AuthToken) {
		t.Errorf("audit log holds the token: %s", b)
	}
}

// wstoolsNames lists the registry's tools that are not the test's.
func wstoolsNames(reg *registry.Registry) []string {
	var names []string
	for _, t := range reg.List() {
		switch t.Name {
		case "test_read", "test_write", "up__echo":
		default:
			names = append(names, t.Name)
		}
	}
	return names
}

// TestWorkspaceToolsOnRESTAndMCP: the daemon's own tools, called over
// POST /execute and /mcp. REST answers an escape and bad arguments with 400
// (the tool marks its result with the errcode) and a missing file with 200
// and status "error"; MCP gives the same text with no trace of the mark.
func TestWorkspaceToolsOnRESTAndMCP(t *testing.T) {
	c := testConfig(t)
	if err := os.WriteFile(filepath.Join(c.Root, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	post := func(path, body string, hdr map[string]string) (int, string) {
		return send(t, http.MethodPost, r.url+path, body, hdr)
	}
	for _, tt := range []struct {
		name     string
		args     string
		status   int
		outcome  string
		wantText string
	}{
		{"read", `{"path":"a.txt"}`, 200, "success", "hello\n"},
		{"escape", `{"path":"../etc/passwd"}`, 400, "error", "Path escapes scope boundary: ../etc/passwd"},
		{"bad arguments", `{"pathx":1}`, 400, "error", `Input validation error: Invalid arguments for tool read_text_file: missing required argument "path"`},
		{"missing file", `{"path":"missing.txt"}`, 200, "error", "Failed to read file: missing.txt - no such file or directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := post("/execute", `{"tool_name":"read_text_file","arguments":`+tt.args+`}`, nil)
			var rest struct {
				Status, Output string
			}
			if err := json.Unmarshal([]byte(body), &rest); err != nil || code != tt.status || rest.Status != tt.outcome || rest.Output != tt.wantText {
				t.Errorf("/execute: %d %s; want %d %s %q", code, body, tt.status, tt.outcome, tt.wantText)
			}
			code, body = post("/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_text_file","arguments":`+tt.args+`}}`,
				map[string]string{"Accept": "application/json"})
			var rpc struct {
				Result struct {
					Content []struct{ Text string }
					IsError bool
				}
			}
			if err := json.Unmarshal([]byte(body), &rpc); err != nil || code != 200 || len(rpc.Result.Content) != 1 ||
				rpc.Result.Content[0].Text != tt.wantText || rpc.Result.IsError != (tt.outcome == "error") {
				t.Errorf("/mcp: %d %s; want the text %q", code, body, tt.wantText)
			}
			if strings.Contains(body, "_meta") || strings.Contains(body, "agentbe/errcode") {
				t.Errorf("/mcp result carries the REST mark: %s", body)
			}
		})
	}
}

// TestAuditLogInsideWorkspaceRefused: the daemon refuses to start with an
// audit log the agent could reach, however the path is spelled (directly, in
// a directory that does not exist yet, through a symlink from outside, or
// with the root itself behind a symlink), and accepts one outside.
func TestAuditLogInsideWorkspaceRefused(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "ws")
	outside := filepath.Join(base, "logs")
	for _, d := range []string{root, outside, filepath.Join(base, "ws2")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(root, filepath.Join(base, "link-to-ws")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, root, log string
		refused         bool
	}{
		{"in the root", root, filepath.Join(root, "audit.log"), true},
		{"in a directory not made yet", root, filepath.Join(root, "a", "b", "audit.log"), true},
		{"through a symlink from outside", root, filepath.Join(base, "link-to-ws", "audit.log"), true},
		{"root behind a symlink", filepath.Join(base, "link-to-ws"), filepath.Join(root, "audit.log"), true},
		{"dot-dot back in", root, filepath.Join(outside, "..", "ws", "audit.log"), true},
		{"outside", root, filepath.Join(outside, "audit.log"), false},
		{"sibling with the root's name as prefix", root, filepath.Join(base, "ws2", "audit.log"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t)
			c.Root = tc.root
			c.AuditLog = tc.log
			d, err := New(c, Options{})
			if err == nil {
				defer d.Close()
			}
			if tc.refused {
				if err == nil || !strings.Contains(err.Error(), "--audit-log") || !strings.Contains(err.Error(), "inside the workspace") {
					t.Fatalf("New: %v; want a refusal naming --audit-log", err)
				}
				if _, serr := os.Stat(tc.log); serr == nil {
					t.Errorf("the refused log %s was created", tc.log)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
		})
	}
}

// TestAuditWriteErrorsMetric: lines the audit log could not write are in
// /metrics (here /dev/full fails every write, as a full disk does).
func TestAuditWriteErrorsMetric(t *testing.T) {
	c := testConfig(t)
	c.AuditLog = "/dev/full"
	r := start(t, c, nil)
	resp, err := http.Post(r.url+"/execute", "application/json", strings.NewReader(`{"tool_name":"read_text_file","arguments":{"path":"nope"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, m := get(t, r.url+"/metrics")
		if strings.Contains(string(m), "agentbe_audit_write_errors_total 1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks agentbe_audit_write_errors_total 1:\n%s", m)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAuditRemoteOnTheSDKPath: a tools/call the MCP SDK answers (here one
// asking for progress, which the fast path leaves to it) is audited with the
// caller's real address, and a client cannot put another address there by
// sending the header that carries it inside the daemon.
func TestAuditRemoteOnTheSDKPath(t *testing.T) {
	c := testConfig(t)
	c.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	r := start(t, c, nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_directory","arguments":{"path":"."},"_meta":{"progressToken":"p1"}}}`
	for _, hdr := range []map[string]string{
		{"Accept": "text/event-stream"},
		{"Accept": "text/event-stream", "X-Agentbe-Remote-Addr": "203.0.113.9:4444"},
	} {
		if code, out := send(t, "POST", r.url+"/mcp", body, hdr); code != 200 || !strings.Contains(out, `"result"`) {
			t.Fatalf("tools/call %v: %d %s", hdr, code, out)
		}
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(c.AuditLog)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("audit log: %q", b)
	}
	for _, ln := range lines {
		var e struct{ Face, Tool, Remote string }
		if err := json.Unmarshal([]byte(ln), &e); err != nil {
			t.Fatal(err)
		}
		if e.Face != "mcp-http" || e.Tool != "list_directory" || !strings.HasPrefix(e.Remote, "127.0.0.1:") {
			t.Errorf("audit line %s: want face mcp-http, tool list_directory and the peer's 127.0.0.1 address", ln)
		}
	}
}

// TestAuditUnknownToolOnEveryFace: a call of a tool nobody serves leaves
// one audit line with outcome "unknown" on every face, the MCP ones
// included, where the SDK answers it without a handler (the SSE path, a
// batch).
func TestAuditUnknownToolOnEveryFace(t *testing.T) {
	c := testConfig(t)
	c.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	r := start(t, c, nil)
	call := func(id int, name string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, name)
	}
	for _, tc := range []struct {
		body string
		hdr  map[string]string
	}{
		{call(1, "nosuch_json"), nil},
		{call(2, "nosuch_sse"), map[string]string{"Accept": "text/event-stream"}},
		{"[" + call(3, "nosuch_batch1") + "," + call(4, "nosuch_batch2") + "]", nil},
	} {
		code, out := send(t, "POST", r.url+"/mcp", tc.body, tc.hdr)
		if code != 200 && code != 400 {
			t.Fatalf("%s: %d %s", tc.body, code, out)
		}
		if !strings.Contains(out, "nosuch") {
			t.Errorf("%s: the answer does not name the tool: %s", tc.body, out)
		}
	}
	if code, out := send(t, "POST", r.url+"/execute", `{"tool_name":"nosuch_rest","arguments":{}}`, nil); code != 404 {
		t.Fatalf("/execute of an unknown tool: %d %s", code, out)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(c.AuditLog)
	got := map[string]string{}
	for _, ln := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct{ Face, Tool, Outcome, Remote string }
		if err := json.Unmarshal([]byte(ln), &e); err != nil {
			t.Fatalf("%v: %s", err, ln)
		}
		if e.Outcome != "unknown" {
			t.Errorf("audit line %s: want outcome unknown", ln)
		}
		got[e.Tool] = e.Face
	}
	for tool, face := range map[string]string{"nosuch_json": "mcp-http", "nosuch_sse": "mcp-http", "nosuch_batch1": "mcp-http",
		"nosuch_batch2": "mcp-http", "nosuch_rest": "rest"} {
		if got[tool] != face {
			t.Errorf("audit of %s: face %q, want %q (all lines: %v)", tool, got[tool], face, got)
		}
	}
	if len(got) != 5 {
		t.Errorf("audit lines for %d tools, want 5: %v", len(got), got)
	}
}

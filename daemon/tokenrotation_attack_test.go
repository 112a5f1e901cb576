package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/internal/clip"
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

// TestAttackRotatedTokenHeldThings: what the daemon's old token holds
// open past its admission ends when a reload rotates it: a stateful MCP
// session (its GET stream ends, a POST to it with the new token is told
// the session is gone), a WebSocket proxied through /preview/, and a
// /gateway connection opened with ?token= rather than the header. What
// the old token started in the workspace (the preview server, a
// background process) belongs to the scope and serves the new token.
func TestAttackRotatedTokenHeldThings(t *testing.T) {
	const agent1, agent2 = "agent-one-Zp4d", "agent-two-Ke8m"
	r, c, write := rotationDaemon(t, agent1, "operator-one-Wq3s", "scrape-one-Yv6b", func(c *config.Config) {
		c.MCPSessions, c.Previews, c.ProcessTools, c.ExecNetwork = true, true, true, "false"
	})
	port := startPreviewServerAs(t, r, c.Root, bearer(agent1))
	post := func(token, session, body string) (int, string) {
		t.Helper()
		hdr := bearer(token)
		hdr["Accept"] = "application/json, text/event-stream"
		hdr["MCP-Protocol-Version"] = "2025-06-18"
		if session != "" {
			hdr["Mcp-Session-Id"] = session
		}
		req, _ := http.NewRequest(http.MethodPost, r.url+"/mcp", strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if session == "" {
			return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
		}
		return resp.StatusCode, string(b)
	}
	code, sess := post(agent1, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"rot","version":"1"}}}`)
	if code != http.StatusOK || sess == "" {
		t.Fatalf("initialize: %d %q", code, sess)
	}
	if code, body := post(agent1, sess, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	req, _ := http.NewRequest(http.MethodGet, r.url+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+agent1)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sess)
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the GET stream: %d", resp.StatusCode)
	}
	streamEnded := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		streamEnded <- err
	}()
	pws, _, err := websocket.DefaultDialer.Dial(fmt.Sprintf("ws%s/preview/%d/echo", strings.TrimPrefix(r.url, "http"), port),
		http.Header{"Authorization": {"Bearer " + agent1}})
	must(t, err)
	t.Cleanup(func() { pws.Close() })
	echo(t, pws, "before")
	qws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(r.url, "http")+"/gateway?token="+agent1, nil)
	must(t, err)
	t.Cleanup(func() { qws.Close() })
	list := `{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":{"sessionId":"s","toolId":"list_directory","args":{"path":"."}}}`
	if got := rpcGW(t, qws, list); strings.Contains(got, `"error"`) {
		t.Fatalf("/gateway?token=: %.300s", got)
	}

	write("agent", agent2)
	// Ended is not checked: the session's hold is registered just after
	// initialize is answered, and one registered after the reload ends at
	// once, uncounted.
	if got, err := r.d.ReloadTokens(); err != nil || len(got.Rotated) != 1 {
		t.Fatalf("ReloadTokens = %+v, %v", got, err)
	}
	select {
	case <-streamEnded:
	case <-time.After(30 * time.Second):
		t.Error("the MCP GET stream of the old token is open 30 s after the reload")
	}
	if code, body := post(agent1, sess, list); code != http.StatusUnauthorized {
		t.Errorf("the old token's session, with the old token: %d %.200s, want 401", code, body)
	}
	writeCall := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"after.txt","content":"x"}}}`
	if code, body := post(agent2, sess, writeCall); code != http.StatusNotFound {
		t.Errorf("the old token's session, with the new token: %d %.200s, want 404 (closed)", code, body)
	}
	_ = pws.WriteMessage(websocket.TextMessage, []byte("after"))
	pws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, m, err := pws.ReadMessage(); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Errorf("the proxied WebSocket of the old token after the reload: %q %v", m, err)
	}
	_ = qws.WriteMessage(websocket.TextMessage, []byte(gwWrite))
	if ce := gwClosed(t, qws); ce != nil && ce.Code != 4001 {
		t.Errorf("/gateway?token= of the old token: closed %d %q, want 4001", ce.Code, ce.Text)
	}
	if _, err := os.Stat(filepath.Join(c.Root, "after.txt")); err == nil {
		t.Error("a connection of the old token wrote after the reload")
	}
	// The server the old token started is the scope's: the new token
	// reaches it, the old one does not.
	nws, _, err := websocket.DefaultDialer.Dial(fmt.Sprintf("ws%s/preview/%d/echo", strings.TrimPrefix(r.url, "http"), port),
		http.Header{"Authorization": {"Bearer " + agent2}})
	must(t, err)
	t.Cleanup(func() { nws.Close() })
	echo(t, nws, "after")
	if code, _ := send(t, http.MethodGet, fmt.Sprintf("%s/preview/%d/", r.url, port), "", bearer(agent1)); code != http.StatusUnauthorized {
		t.Errorf("/preview/ with the old token: %d, want 401", code)
	}
}

// TestAttackRotatedTokenEveryEndpoint: after a reload rotates the three
// tokens, each old one is refused wherever the daemon compares a token,
// not only on the faces: /execute, /tools, /preview/, /approvals,
// /metrics, and /health, whose details go to a trusted caller only; the
// new ones are taken there. Every endpoint reads the one token the
// reload rotated (httpguard.Token's shared digest): a copy built again
// from the configuration would keep the old token.
func TestAttackRotatedTokenEveryEndpoint(t *testing.T) {
	const (
		agent1, agent2 = "agent-one-Rk2w", "agent-two-Gs7q"
		op1, op2       = "operator-one-Pn5x", "operator-two-Vc9h"
		scrape1        = "scrape-one-Lm3j"
		scrape2        = "scrape-two-Dt6f"
	)
	r, _, write := rotationDaemon(t, agent1, op1, scrape1, func(c *config.Config) { c.Previews, c.ProcessTools = true, true })
	write("agent", agent2)
	write("operator", op2)
	write("scrape", scrape2)
	if got, err := r.d.ReloadTokens(); err != nil || len(got.Rotated) != 3 {
		t.Fatalf("ReloadTokens = %+v, %v", got, err)
	}
	exec := `{"tool_name":"list_directory","arguments":{"path":"."}}`
	for _, tc := range []struct {
		what, method, path, body, token string
		want                            int
	}{
		{"/execute, the agent's old token", http.MethodPost, "/execute", exec, agent1, http.StatusUnauthorized},
		{"/execute, the agent's new token", http.MethodPost, "/execute", exec, agent2, http.StatusOK},
		{"/tools, the agent's old token", http.MethodGet, "/tools", "", agent1, http.StatusUnauthorized},
		{"/tools, the agent's new token", http.MethodGet, "/tools", "", agent2, http.StatusOK},
		{"/preview/, the agent's old token", http.MethodGet, "/preview/", "", agent1, http.StatusUnauthorized},
		{"/preview/, the agent's new token", http.MethodGet, "/preview/", "", agent2, http.StatusOK},
		{"/approvals, the operator's old token", http.MethodGet, "/approvals", "", op1, http.StatusUnauthorized},
		{"/approvals, the operator's new token", http.MethodGet, "/approvals", "", op2, http.StatusOK},
		{"/metrics, the scraper's old token", http.MethodGet, "/metrics", "", scrape1, http.StatusUnauthorized},
		{"/metrics, the agent's old token", http.MethodGet, "/metrics", "", agent1, http.StatusUnauthorized},
		{"/metrics, the operator's old token", http.MethodGet, "/metrics", "", op1, http.StatusUnauthorized},
		{"/metrics, the scraper's new token", http.MethodGet, "/metrics", "", scrape2, http.StatusOK},
		{"/metrics, the agent's new token", http.MethodGet, "/metrics", "", agent2, http.StatusOK},
	} {
		if code, body := send(t, tc.method, r.url+tc.path, tc.body, bearer(tc.token)); code != tc.want {
			t.Errorf("%s: %d, want %d: %.200s", tc.what, code, tc.want, body)
		}
	}
	for _, tc := range []struct {
		token   string
		trusted bool
	}{{agent1, false}, {op1, false}, {agent2, true}, {op2, true}, {scrape2, false}} {
		_, body := send(t, http.MethodGet, r.url+"/health", "", bearer(tc.token))
		if got := strings.Contains(body, `"isolation"`); got != tc.trusted {
			t.Errorf("/health with %s: details %v, want %v: %.200s", tc.token, got, tc.trusted, body)
		}
	}
}

// TestAttackReloadRacesRequests: reloads that rotate the agent's token
// back and forth, two at once, while requests with either token arrive
// and a /gateway connection is opened with each: every request is
// admitted by the token in force or refused with 401, never anything
// else, and the daemon ends with the file's token in force (run with
// -race: the token's digest, the secrets and the holds are read while
// they change).
func TestAttackReloadRacesRequests(t *testing.T) {
	const agentA, agentB = "agent-a-Hw3k", "agent-b-Nq8z"
	r, _, write := rotationDaemon(t, agentA, "operator-one-Fs2m", "scrape-one-Xc5r", nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	bad := make(chan string, 100)
	for _, tok := range []string{agentA, agentB} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodPost, r.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					bad <- err.Error()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusUnauthorized {
					bad <- fmt.Sprintf("%s: %d", tok, resp.StatusCode)
				}
				ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(r.url, "http")+"/gateway?token="+tok, nil)
				if err == nil {
					ws.Close()
				}
			}
		}()
	}
	for i := range 20 {
		write("agent", []string{agentB, agentA}[i%2])
		var rw sync.WaitGroup
		for range 2 {
			rw.Add(1)
			go func() {
				defer rw.Done()
				if _, err := r.d.ReloadTokens(); err != nil {
					bad <- err.Error()
				}
			}()
		}
		rw.Wait()
	}
	close(stop)
	wg.Wait()
	close(bad)
	for b := range bad {
		t.Error(b)
	}
	// 20 reloads: the file ends with agentA.
	for tok, want := range map[string]int{agentA: http.StatusOK, agentB: http.StatusUnauthorized} {
		if code, _ := send(t, http.MethodPost, r.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, bearer(tok)); code != want {
			t.Errorf("after the reloads, %s: %d, want %d", tok, code, want)
		}
	}
}

// TestAttackReloadUnsafeTokenFile: the agent's token file replaced, before
// a reload, by a FIFO (whose reader would wait for a writer forever), a
// file over the bound, a file its group may write, a symlink into a
// directory others may write, or a directory: the reload is refused at
// once, names the file and changes nothing, and the token in force still
// admits. A symlink to a safe file (a Kubernetes Secret's mount) is read.
func TestAttackReloadUnsafeTokenFile(t *testing.T) {
	const agent1, agent2 = "agent-one-Wb4n", "agent-two-Sj7c"
	r, c, _ := rotationDaemon(t, agent1, "operator-one-Kp2r", "scrape-one-Ht8v", nil)
	path := c.AuthTokenFile
	open := t.TempDir()
	must(t, os.Chmod(open, 0o777))
	must(t, os.WriteFile(filepath.Join(open, "token"), []byte(agent2), 0o600))
	for _, tc := range []struct {
		what  string
		plant func()
		want  string
	}{
		{"a FIFO", func() { must(t, syscall.Mkfifo(path, 0o600)) }, "a FIFO"},
		{"a huge file", func() { must(t, os.WriteFile(path, []byte(strings.Repeat("x", 1<<20)), 0o600)) }, "larger than"},
		{"a group-writable file", func() {
			must(t, os.WriteFile(path, []byte(agent2), 0o620))
			must(t, os.Chmod(path, 0o620))
			if os.Geteuid() == 0 {
				// A group other than root's (nogroup): internal/opfile
				// allows group write by root's group.
				must(t, os.Chown(path, 0, 65534))
			} else {
				// The user's own group may be a private one, which the
				// rule allows: others write it instead.
				must(t, os.Chmod(path, 0o622))
			}
		}, "writable by its group"},
		{"a symlink into a directory others may write", func() { must(t, os.Symlink(filepath.Join(open, "token"), path)) }, "which its group or others may write"},
		{"a directory", func() { must(t, os.Mkdir(path, 0o700)) }, "a directory"},
	} {
		must(t, os.RemoveAll(path))
		tc.plant()
		done := make(chan error, 1)
		go func() {
			_, err := r.d.ReloadTokens()
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "--auth-token-file") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want an error naming the flag and %q", tc.what, err, tc.want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the reload is blocked 30 s", tc.what)
		}
		if code, _ := send(t, http.MethodPost, r.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, bearer(agent1)); code != http.StatusOK {
			t.Errorf("%s: the token in force after the refused reload: %d", tc.what, code)
		}
	}
	must(t, os.RemoveAll(path))
	safe := filepath.Join(t.TempDir(), "token")
	must(t, os.WriteFile(safe, []byte(agent2+"\n"), 0o600))
	must(t, os.Symlink(safe, path))
	if got, err := r.d.ReloadTokens(); err != nil || len(got.Rotated) != 1 {
		t.Errorf("a symlink to a safe file: %+v %v", got, err)
	}
	if code, _ := send(t, http.MethodPost, r.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, bearer(agent2)); code != http.StatusOK {
		t.Errorf("the token read through the symlink: %d", code)
	}
}

// TestAttackRotatedTokenEscapes: a new token with the characters JSON
// and the text log escape (a quote, a backslash, <, >, &, non-ASCII) and
// a new operator's token that is part of the agent's: from the reload
// on, neither shows in the daemon's log or the audit log, raw or in the
// escaped form a JSON line holds (json.Marshal writes < as \u003c), nor
// reaches a command's environment.
func TestAttackRotatedTokenEscapes(t *testing.T) {
	const (
		agent2 = `ag"e\nt<&>é-two-Pq7`
		op2    = `t<&>é-two`
	)
	r, c, write := rotationDaemon(t, "agent-one-Mx5b", "operator-one-Uw2k", "scrape-one-Ea9c", func(c *config.Config) {
		c.ProcessTools = true
		c.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	})
	write("agent", agent2)
	write("operator", op2)
	if got, err := r.d.ReloadTokens(); err != nil || len(got.Rotated) != 2 {
		t.Fatalf("ReloadTokens = %+v, %v", got, err)
	}
	js := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b[1 : len(b)-1])
	}
	arg := js("'" + agent2 + "' '" + op2 + "'")
	code, body := callAs(t, r.url, agent2, "", "process_start", `{"command":"echo `+arg+`","name":"`+js(op2)+`"}`)
	if code != http.StatusOK || strings.Contains(body, `"isError":true`) {
		t.Fatalf("process_start: %d %.300s", code, body)
	}
	// The argument's key too: the audit log keeps keys as they are.
	if code, body := callAs(t, r.url, agent2, "", "list_directory", `{"path":".","`+js(agent2)+`":1}`); code != http.StatusOK {
		t.Fatalf("list_directory: %d %.300s", code, body)
	}
	waitFor(t, "the log line of the process", func() bool { return strings.Contains(r.logs.String(), "background process started") })
	env := `{"command":"env","env":{"A":"` + js(agent2) + `","O":"` + js(op2) + `","K":"kept"}}`
	if code, body := callAs(t, r.url, agent2, "", "exec", env); code != http.StatusOK || !strings.Contains(body, "K=kept") {
		t.Fatalf("exec env: %d %.300s", code, body)
	} else if strings.Contains(body, "A=") || strings.Contains(body, "O=") {
		t.Errorf("a new token reached a command's environment: %.400s", body)
	}
	must(t, r.stop())
	audit, err := os.ReadFile(c.AuditLog)
	must(t, err)
	logs := r.logs.String()
	for _, form := range []string{agent2, op2, js(agent2), js(op2), strconv.Quote(op2), `t\u003c\u0026\u003e`, `t<&>`} {
		if strings.Contains(logs, form) {
			i := strings.Index(logs, form)
			t.Errorf("the daemon's log holds %q: …%.200s…", form, logs[max(0, i-100):])
		}
		if strings.Contains(string(audit), form) {
			t.Errorf("the audit log holds %q: %s", form, audit)
		}
	}
	if !strings.Contains(string(audit), "process_start") || !strings.Contains(string(audit), "list_directory") {
		t.Errorf("the audit log lacks the calls whose secrets it should hide: %s", audit)
	}
}

// TestAttackRotationsPastSecretsBound: the secrets list keeps the newest
// clip.MaxSecrets values. After more rotations of the agent's token than
// that, the tokens in force (the agent's newest, the operator's and the
// scraper's, unchanged since the start) are still hidden, since each
// reload puts the tokens in force first; the agent's first token, which
// has admitted no one for MaxSecrets rotations, is no longer hidden
// (docs/configuration.md, "Rotating a token").
func TestAttackRotationsPastSecretsBound(t *testing.T) {
	const op, scrape = "operator-one-Ry6t", "scrape-one-Ik3o"
	agent := func(i int) string { return fmt.Sprintf("agent-%02d-Fz8u", i) }
	r, _, write := rotationDaemon(t, agent(0), op, scrape, nil)
	n := clip.MaxSecrets + 8
	for i := 1; i <= n; i++ {
		write("agent", agent(i))
		if _, err := r.d.ReloadTokens(); err != nil {
			t.Fatal(err)
		}
	}
	r.d.log.Info("probe", "in_force", agent(n)+" "+op+" "+scrape, "newest_old", agent(n-1), "first", agent(0))
	logs := r.logs.String()
	i := strings.Index(logs, "msg=probe")
	if i < 0 {
		t.Fatalf("no probe line: %s", logs)
	}
	line := logs[i:]
	for _, s := range []string{agent(n), op, scrape, agent(n - 1)} {
		if strings.Contains(line, s) {
			t.Errorf("the log shows %q after %d rotations: %s", s, n, line)
		}
	}
	if !strings.Contains(line, agent(0)) {
		t.Errorf("the agent's first token is hidden after %d rotations (the list grew past clip.MaxSecrets?): %s", n, line)
	}
}

// TestAttackTokenSharedWithTokensFile: a token of --tokens (a digest) is
// a role too. A reload that makes the scraper's token a --tokens
// entry's would let the entry's holder read /metrics and the scraper
// work in the entry's scope; a --tokens file reloaded with the digest of
// the operator's token would open the workspace to the operator's token,
// meant for approvals only; with the digest of the agent's rotated-out
// token, the agent would keep working with it. Each is refused naming
// the entry and the file, and changes nothing; a --tokens file that
// holds one of the three tokens at start stops the start. Without the
// check the scraper's token worked in bob's scope.
func TestAttackTokenSharedWithTokensFile(t *testing.T) {
	const agent1, agent2, op1, scrape1 = "agent-one-Hc4v", "agent-two-Oy7n", "operator-one-Tb2g", "scrape-one-Ws5q"
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	setTokens := func(lines ...string) {
		must(t, os.WriteFile(tokens, []byte(`{"tokens":[`+strings.Join(lines, ",")+`]}`), 0o600))
	}
	bob := tokenLine("bob", "bob-token", `,"scope":"a"`)
	setTokens(bob)
	r, c, write := rotationDaemon(t, agent1, op1, scrape1, func(c *config.Config) {
		c.TokensFile = tokens
		must(t, os.MkdirAll(filepath.Join(c.Root, "a"), 0o755))
	})
	write("agent", agent2)
	if _, err := r.d.ReloadTokens(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what   string
		apply  func()
		want   string
		probe  string // a token that must not list the workspace over /mcp
		scrape string // a token that must not read /metrics
	}{
		{"the scraper's file holds bob's token", func() { write("scrape", "bob-token") }, `entry "bob" is the token of --metrics-token-file`, "", "bob-token"},
		{"--tokens holds the operator's token", func() { setTokens(bob, tokenLine("ops", op1, "")) }, `entry "ops" is the token of --operator-token-file`, op1, ""},
		{"--tokens holds the agent's old token", func() { setTokens(bob, tokenLine("old", agent1, "")) }, `entry "old" is the token of --auth-token-file`, agent1, ""},
	} {
		write("scrape", scrape1)
		setTokens(bob)
		tc.apply()
		got, err := r.d.ReloadTokens()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--tokens") {
			t.Errorf("%s: ReloadTokens = %+v, %v; want an error %q", tc.what, got, err, tc.want)
		}
		if tc.probe != "" {
			if code, _ := callAs(t, r.url, tc.probe, "", "list_directory", `{"path":"."}`); code != http.StatusUnauthorized {
				t.Errorf("%s: the token works on /mcp: %d", tc.what, code)
			}
		}
		if tc.scrape != "" {
			if code, _ := send(t, http.MethodGet, r.url+"/metrics", "", bearer(tc.scrape)); code != http.StatusUnauthorized {
				t.Errorf("%s: %s reads /metrics: %d", tc.what, tc.scrape, code)
			}
		}
		if code, _ := send(t, http.MethodGet, r.url+"/metrics", "", bearer(scrape1)); code != http.StatusOK {
			t.Errorf("%s: the scraper's token in force after the refused reload: %d", tc.what, code)
		}
		if code, body := callAs(t, r.url, "bob-token", "", "list_directory", `{"path":"."}`); code != http.StatusOK || strings.Contains(body, `"isError":true`) {
			t.Errorf("%s: bob after the refused reload: %d %.200s", tc.what, code, body)
		}
	}
	// At start.
	setTokens(bob, tokenLine("scr", "scrape-zero-Qa1x", ""))
	c2 := c
	c2.Root = t.TempDir()
	c2.MetricsTokenFile, c2.MetricsToken = "", "scrape-zero-Qa1x"
	d, err := New(c2, Options{})
	if err == nil {
		_ = d.Close()
	}
	if err == nil || !strings.Contains(err.Error(), `entry "scr" is the token of --metrics-token-file`) {
		t.Errorf("a --tokens file holding the scraper's token at start: %v", err)
	}
}

// TestAttackTokensEntryMovedToARole: a token that is, or was, a --tokens
// entry's never becomes the agent's, the operator's or the scraper's. The
// entry's holder (a sub-agent with a scope, read-only) keeps it after the
// entry is removed: made the operator's, it would approve its own
// commands; made the agent's, it would work in the whole workspace. The
// entry removed and its token given to a role in one reload, or in two,
// is refused naming the file and the entry, and changes nothing.
func TestAttackTokensEntryMovedToARole(t *testing.T) {
	const agent1, op1, scrape1 = "agent-one-Lp3d", "operator-one-Vc8s", "scrape-one-Rk2m"
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	setTokens := func(lines ...string) {
		must(t, os.WriteFile(tokens, []byte(`{"tokens":[`+strings.Join(lines, ",")+`]}`), 0o600))
	}
	bob := tokenLine("bob", "bob-token-Zq4w", `,"scope":"a","readOnly":true`)
	carol := tokenLine("carol", "carol-token-Hy6e", `,"scope":"a"`)
	setTokens(bob, carol)
	r, _, write := rotationDaemon(t, agent1, op1, scrape1, func(c *config.Config) {
		c.TokensFile = tokens
		must(t, os.MkdirAll(filepath.Join(c.Root, "a"), 0o755))
	})
	isOperator := func(token string) bool {
		code, _ := send(t, http.MethodGet, r.url+"/approvals", "", bearer(token))
		return code == http.StatusOK
	}
	// In one reload: bob's entry removed, its token the operator's.
	setTokens(carol)
	write("operator", "bob-token-Zq4w")
	got, err := r.d.ReloadTokens()
	if err == nil || !strings.Contains(err.Error(), `--operator-token-file holds the token of --tokens entry "bob"`) {
		t.Errorf("bob's token made the operator's as bob's entry is removed: ReloadTokens = %+v, %v", got, err)
	}
	if isOperator("bob-token-Zq4w") || !isOperator(op1) {
		t.Error("after the refused reload the operator's token is not op1 alone")
	}
	// In two: bob's entry removed (a reload like any other), then its
	// token the agent's.
	write("operator", op1)
	if _, err := r.d.ReloadTokens(); err != nil {
		t.Fatalf("removing bob's entry: %v", err)
	}
	write("agent", "bob-token-Zq4w")
	got, err = r.d.ReloadTokens()
	if err == nil || !strings.Contains(err.Error(), `--auth-token-file holds the token of --tokens entry "bob"`) {
		t.Errorf("bob's old token made the agent's: ReloadTokens = %+v, %v", got, err)
	}
	if code, _ := send(t, http.MethodPost, r.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, bearer("bob-token-Zq4w")); code != http.StatusUnauthorized {
		t.Errorf("bob's removed token on /mcp after the refused reload: %d, want 401", code)
	}
	if code, _ := send(t, http.MethodPost, r.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, bearer(agent1)); code != http.StatusOK {
		t.Errorf("the agent's token in force after the refused reload: %d", code)
	}
	// A new token is a rotation like any other.
	write("agent", "agent-two-Fb9u")
	if _, err := r.d.ReloadTokens(); err != nil {
		t.Errorf("the agent's new token: %v", err)
	}
}

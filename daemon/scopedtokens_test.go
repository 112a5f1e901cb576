package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/ssh/wsclient"
	"github.com/agentbe/agentbe-daemon/tools/browser"
)

func tokenLine(name, tok, rest string) string {
	s := sha256.Sum256([]byte(tok))
	return `{"name":"` + name + `","sha256":"` + hex.EncodeToString(s[:]) + `"` + rest + `}`
}

// callAs posts an MCP tools/call with a bearer token and an optional
// X-Scope-Path, and returns the HTTP status and the body.
func callAs(t *testing.T, url, token, scope, tool, args string) (int, string) {
	t.Helper()
	hdr := bearer(token)
	hdr["Accept"] = "application/json, text/event-stream"
	if scope != "" {
		hdr["X-Scope-Path"] = scope
	}
	return send(t, http.MethodPost, url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`, hdr)
}

func sshAs(t *testing.T, url, token string) *gossh.Client {
	t.Helper()
	conn, err := wsclient.Dial(context.Background(), "ws"+strings.TrimPrefix(url, "http")+"/ssh", token)
	if err != nil {
		t.Fatal(err)
	}
	cc, chans, reqs, err := gossh.NewClientConn(conn, "ws", &gossh.ClientConfig{
		User: "agent", Auth: []gossh.AuthMethod{gossh.Password(token)}, HostKeyCallback: gossh.InsecureIgnoreHostKey(),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := gossh.NewClient(cc, chans, reqs)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestScopedTokens is the token file end to end: each token works only in
// its scope (narrowed, never widened, by X-Scope-Path) over MCP, REST and
// /ssh (SFTP and exec); a read-only token reads but cannot write or run
// commands; a token without exec writes but runs nothing; the daemon's
// own token still opens everything; an unknown token is refused; the
// audit log names the token; and SIGHUP's reload takes a removed token
// away from new requests and closes its open /gateway connection.
func TestScopedTokens(t *testing.T) {
	c := testConfig(t)
	c.AuthToken = "master-token"
	c.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	for _, d := range []string{"a", "b"} {
		must(t, os.MkdirAll(filepath.Join(c.Root, d), 0o755))
	}
	must(t, os.WriteFile(filepath.Join(c.Root, "top.txt"), []byte("top"), 0o644))
	must(t, os.WriteFile(filepath.Join(c.Root, "b/secret.txt"), []byte("bob's"), 0o644))
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	writeTokens := func(lines ...string) {
		must(t, os.WriteFile(tokens, []byte(`{"tokens":[`+strings.Join(lines, ",")+`]}`), 0o600))
	}
	alice := tokenLine("alice", "alice-token", `,"scope":"a"`)
	bob := tokenLine("bob", "bob-token", `,"scope":"b","readOnly":true`)
	carol := tokenLine("carol", "carol-token", `,"scope":"a","exec":false`)
	writeTokens(alice, bob, carol)
	c.TokensFile = tokens
	must(t, c.Validate())
	r := start(t, c, nil)

	ok := func(code int, body string) bool {
		return code == http.StatusOK && !strings.Contains(body, `"isError":true`)
	}
	// alice: her scope is her root.
	if code, body := callAs(t, r.url, "alice-token", "", "write_file", `{"path":"note.txt","content":"hi"}`); !ok(code, body) {
		t.Fatalf("alice write: %d %s", code, body)
	}
	if b, err := os.ReadFile(filepath.Join(c.Root, "a/note.txt")); err != nil || string(b) != "hi" {
		t.Fatalf("alice's write did not land in a/: %q %v", b, err)
	}
	if code, body := callAs(t, r.url, "alice-token", "", "list_directory", `{"path":"."}`); !ok(code, body) || strings.Contains(body, "top.txt") || !strings.Contains(body, "note.txt") {
		t.Fatalf("alice lists her scope: %d %s", code, body)
	}
	for _, p := range []string{"../b/secret.txt", "/b/secret.txt", filepath.Join(c.Root, "b/secret.txt")} {
		if code, body := callAs(t, r.url, "alice-token", "", "read_text_file", `{"path":"`+p+`"}`); ok(code, body) || strings.Contains(body, "bob's") {
			t.Errorf("alice read %s: %d %s", p, code, body)
		}
	}
	// X-Scope-Path narrows her scope, and cannot leave it.
	if code, body := callAs(t, r.url, "alice-token", "sub", "write_file", `{"path":"n.txt","content":"x"}`); !ok(code, body) {
		t.Fatalf("alice in a/sub: %d %s", code, body)
	}
	if _, err := os.Stat(filepath.Join(c.Root, "a/sub/n.txt")); err != nil {
		t.Fatalf("X-Scope-Path did not narrow alice's scope: %v", err)
	}
	if code, _ := callAs(t, r.url, "alice-token", "../b", "list_directory", `{"path":"."}`); code != http.StatusBadRequest {
		t.Errorf("alice with X-Scope-Path ../b: %d, want 400", code)
	}
	// A link planted in her scope that leads to another (as she could make
	// one over SFTP and move it) is an escape when named as her scope.
	must(t, os.Symlink("../b", filepath.Join(c.Root, "a/l")))
	for _, face := range []string{"mcp", "rest"} {
		var code int
		var body string
		if face == "mcp" {
			code, body = callAs(t, r.url, "alice-token", "l", "read_text_file", `{"path":"secret.txt"}`)
		} else {
			hdr := bearer("alice-token")
			hdr["X-Scope-Path"] = "l"
			code, body = send(t, http.MethodPost, r.url+"/execute", `{"tool_name":"read_text_file","arguments":{"path":"secret.txt"}}`, hdr)
		}
		t.Logf("%s through a planted link: %d %.200s", face, code, body)
		if strings.Contains(body, "bob's") || (code == http.StatusOK && !strings.Contains(body, "isError") && !strings.Contains(body, "error")) {
			t.Errorf("%s: alice through a planted link: %d %s", face, code, body)
		}
	}
	if code, body := callAs(t, r.url, "alice-token", "", "exec", `{"command":"pwd"}`); !ok(code, body) || !strings.Contains(body, filepath.Join(c.Root, "a")) {
		t.Errorf("alice exec pwd: %d %s", code, body)
	}
	// bob: read-only in b.
	if code, body := callAs(t, r.url, "bob-token", "", "read_text_file", `{"path":"secret.txt"}`); !ok(code, body) || !strings.Contains(body, "bob's") {
		t.Errorf("bob reads his scope: %d %s", code, body)
	}
	for tool, args := range map[string]string{"write_file": `{"path":"x","content":"x"}`, "exec": `{"command":"touch y"}`, "create_directory": `{"path":"d"}`} {
		if code, body := callAs(t, r.url, "bob-token", "", tool, args); code != http.StatusOK || !strings.Contains(body, `Permission denied: token \"bob\"`) {
			t.Errorf("bob %s: %d %s", tool, code, body)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(c.Root, "b")); len(ents) != 1 {
		t.Errorf("bob changed b/: %v", ents)
	}
	// carol: writes, runs nothing.
	if code, body := callAs(t, r.url, "carol-token", "", "exec", `{"command":"true"}`); !strings.Contains(body, `Permission denied: token \"carol\" may not run commands`) {
		t.Errorf("carol exec: %d %s", code, body)
	}
	if code, body := callAs(t, r.url, "carol-token", "", "write_file", `{"path":"c.txt","content":"c"}`); !ok(code, body) {
		t.Errorf("carol write: %d %s", code, body)
	}
	// The daemon's token: everything, the root.
	if code, body := callAs(t, r.url, "master-token", "", "read_text_file", `{"path":"b/secret.txt"}`); !ok(code, body) {
		t.Errorf("master reads b/: %d %s", code, body)
	}
	if code, _ := callAs(t, r.url, "nobody-token", "", "list_directory", `{"path":"."}`); code != http.StatusUnauthorized {
		t.Errorf("unknown token: %d, want 401", code)
	}

	// REST: the same rules.
	rest := func(token, body string) (int, string) {
		return send(t, http.MethodPost, r.url+"/execute", body, bearer(token))
	}
	if code, body := rest("alice-token", `{"tool_name":"list_directory","arguments":{"path":"."}}`); code != http.StatusOK || strings.Contains(body, "top.txt") || !strings.Contains(body, "note.txt") {
		t.Errorf("REST alice: %d %s", code, body)
	}
	if _, body := rest("bob-token", `{"tool_name":"write_file","arguments":{"path":"x","content":"x"}}`); !strings.Contains(body, "Permission denied") {
		t.Errorf("REST bob write: %s", body)
	}

	// /gateway: the connection's token decides, for all its calls.
	gwA := dialGW(t, r.url, "alice-token")
	if got := rpcGW(t, gwA, `{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":{"sessionId":"s","toolId":"list_directory","args":{"path":"."}}}`); !strings.Contains(got, "note.txt") || strings.Contains(got, "top.txt") {
		t.Errorf("gateway alice: %.300s", got)
	}
	gwB := dialGW(t, r.url, "bob-token")
	if got := rpcGW(t, gwB, `{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":{"sessionId":"s","toolId":"write_file","args":{"path":"x","content":"x"}}}`); !strings.Contains(got, "Permission denied") {
		t.Errorf("gateway bob write: %.300s", got)
	}

	// /ssh: alice's SFTP and commands are in a/; bob's SFTP is read-only
	// and he runs nothing.
	ac := sshAs(t, r.url, "alice-token")
	as, err := sftp.NewClient(ac)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := as.Stat("/note.txt"); err != nil {
		t.Errorf("alice's SFTP root is not a/: %v", err)
	}
	if _, err := as.Stat("/../b/secret.txt"); err == nil {
		t.Error("alice's SFTP reached b/")
	}
	sess, err := ac.NewSession()
	must(t, err)
	if out, err := sess.Output("pwd"); err != nil || strings.TrimSpace(string(out)) != filepath.Join(c.Root, "a") {
		t.Errorf("alice's ssh exec pwd: %q %v", out, err)
	}
	bc := sshAs(t, r.url, "bob-token")
	bs, err := sftp.NewClient(bc)
	if err != nil {
		t.Fatal(err)
	}
	if f, err := bs.Open("/secret.txt"); err != nil {
		t.Errorf("bob's SFTP read: %v", err)
	} else {
		f.Close()
	}
	if f, err := bs.Create("/new.txt"); err == nil {
		f.Close()
		t.Error("bob's SFTP created a file")
	}
	if err := bs.Remove("/secret.txt"); err == nil {
		t.Error("bob's SFTP removed a file")
	}
	sess, err = bc.NewSession()
	must(t, err)
	if out, err := sess.CombinedOutput("touch /tmp/x"); err == nil || !strings.Contains(string(out), "may not run commands") {
		t.Errorf("bob's ssh exec: %q %v", out, err)
	}

	// Reload: bob is gone for new requests.
	writeTokens(alice, carol)
	if rl, err := r.d.ReloadTokens(); err != nil || rl.Tokens != 2 {
		t.Fatalf("ReloadTokens = %+v, %v", rl, err)
	}
	if code, _ := callAs(t, r.url, "bob-token", "", "read_text_file", `{"path":"secret.txt"}`); code != http.StatusUnauthorized {
		t.Errorf("bob after the reload: %d, want 401", code)
	}
	// bob's open /gateway connection is closed by the reload (4001, naming
	// the token; TestAttackRevokedTokenEndsGateway has the other changes),
	// and a new one is refused.
	gwB.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, msg, err := gwB.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4001 || !strings.Contains(ce.Text, `token "bob" was removed`) {
		t.Errorf("bob's open gateway connection after the reload: %q %v, want close 4001 naming the token", msg, err)
	}
	// alice's, whose token the reload left as it was, stays open.
	if got := rpcGW(t, gwA, `{"jsonrpc":"2.0","id":2,"method":"tools.invoke","params":{"sessionId":"s","toolId":"list_directory","args":{"path":"."}}}`); !strings.Contains(got, "note.txt") {
		t.Errorf("alice's open gateway connection after the reload: %.300s", got)
	}
	if ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(r.url, "http")+"/gateway", http.Header{"Authorization": {"Bearer bob-token"}}); err == nil {
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _, err := ws.ReadMessage()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != 4001 {
			t.Errorf("a new gateway connection with bob's token after the reload: %v, want close 4001", err)
		}
		ws.Close()
	}
	// A broken file changes nothing.
	must(t, os.WriteFile(tokens, []byte(`{"tokens":[{"name":"x"}]}`), 0o600))
	if _, err := r.d.ReloadTokens(); err == nil || !strings.Contains(err.Error(), tokens) {
		t.Errorf("reloading a broken file: %v", err)
	}
	if code, body := callAs(t, r.url, "alice-token", "", "read_text_file", `{"path":"note.txt"}`); !ok(code, body) {
		t.Errorf("alice after a failed reload: %d %s", code, body)
	}

	as.Close()
	bs.Close()
	must(t, r.stop())
	b, _ := os.ReadFile(c.AuditLog)
	for _, want := range []string{`"caller":"alice"`, `"caller":"bob"`, `"outcome":"denied"`, `"caller":"carol"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the audit log has no %s", want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestTokenShares: with --tokens, the daemon holds each token to its
// share of the pools (admit.CallerShare): an MCP session past half of
// --mcp-max-sessions is refused to alice, naming her share, while bob
// opens his; and the browser provider is told there are several tokens.
func TestTokenShares(t *testing.T) {
	c := testConfig(t)
	c.AuthToken = "master-token"
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	must(t, os.WriteFile(tokens, []byte(`{"tokens":[`+tokenLine("alice", "alice-token", "")+`,`+tokenLine("bob", "bob-token", "")+`]}`), 0o600))
	c.TokensFile = tokens
	c.MCPSessions, c.MCPMaxSessions = true, 2
	c.BrowserTools = true
	must(t, c.Validate())
	var browserTokens bool
	r := startWith(t, c, Options{browserTweak: func(o *browser.Options) { browserTokens = o.Tokens }})
	if !browserTokens {
		t.Error("the browser provider was not told that --tokens admits several tokens")
	}
	open := func(token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", r.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"share","version":"1"}}}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			t.Cleanup(func() {
				del, _ := http.NewRequest("DELETE", r.url+"/mcp", nil)
				del.Header.Set("Authorization", "Bearer "+token)
				del.Header.Set("Mcp-Session-Id", id)
				if resp, err := http.DefaultClient.Do(del); err == nil {
					resp.Body.Close()
				}
			})
		}
		return resp.StatusCode, string(body)
	}
	if code, body := open("alice-token"); code != http.StatusOK {
		t.Fatalf("alice's first session: %d %s", code, body)
	}
	if code, body := open("alice-token"); code != http.StatusServiceUnavailable || !strings.Contains(body, `token \"alice\" holds 1 of the 2 MCP sessions, its share`) {
		t.Errorf("alice's second session: %d %s; want 503 naming her share", code, body)
	}
	if code, body := open("bob-token"); code != http.StatusOK {
		t.Errorf("bob's session beside alice's: %d %s", code, body)
	}
}

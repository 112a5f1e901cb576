package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/internal/previewtest"
	"github.com/agentbe/agentbe-daemon/internal/testbin"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

const previewToken = "preview-token"

// previewConfig is a daemon with a token, the process tools and, when on,
// --previews, in isolation mode iso; under bwrap its commands have their
// own network namespace (--exec-network=false).
func previewConfig(t testing.TB, iso string, on bool) config.Config {
	t.Helper()
	if iso == "bwrap" {
		testenv.Bwrap(t)
	}
	c := testConfig(t)
	c.Isolation = iso
	c.ExecNetwork = "false"
	c.AuthToken = previewToken
	c.ProcessTools = true
	c.Previews = on
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

var previewAuth = map[string]string{"Authorization": "Bearer " + previewToken}

// startPreviewServer starts previewsrv with process_start and returns the
// port it listens on.
func startPreviewServer(t testing.TB, r *running, root string) int {
	t.Helper()
	return startPreviewServerAs(t, r, root, previewAuth)
}

// startPreviewServerAs is startPreviewServer with the header hdr (a
// token), installing previewsrv in dir, where that token's commands run.
func startPreviewServerAs(t testing.TB, r *running, dir string, hdr map[string]string) int {
	t.Helper()
	cmd := previewtest.Install(t, dir)
	call := func(tool, args string) map[string]any {
		t.Helper()
		_, b := send(t, http.MethodPost, r.url+"/execute", `{"tool_name":"`+tool+`","arguments":`+args+`}`, hdr)
		var out map[string]any
		json.Unmarshal([]byte(b), &out)
		if out["status"] != "success" {
			t.Fatalf("%s %s: %s", tool, args, b)
		}
		var res map[string]any
		json.Unmarshal([]byte(out["output"].(string)), &res)
		return res
	}
	started := call("process_start", `{"command":"`+cmd+` -tag workspace","name":"web"}`)
	id, _ := started["id"].(string)
	if id == "" {
		t.Fatalf("process_start: %v", started)
	}
	deadline := time.Now().Add(time.Minute) // a hang guard
	for {
		out := call("process_output", `{"id":"`+id+`"}`)
		if s, _ := out["stdout"].(string); strings.HasPrefix(s, "listening on ") {
			port, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(s, "listening on ")))
			if err != nil {
				t.Fatalf("previewsrv said %q", s)
			}
			return port
		}
		if time.Now().After(deadline) {
			t.Fatalf("previewsrv never said where it listens: %v", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func portOf(t *testing.T, url string) int {
	t.Helper()
	p, err := strconv.Atoi(url[strings.LastIndex(url, ":")+1:])
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// freePort is a loopback port nobody listens on now, for ssh -L.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// opensshArgs are ssh's options to reach the daemon at url through the
// real `agent-backend proxy` with the test's token.
func opensshArgs(t *testing.T, url, logLevel string) []string {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(previewToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := "ws" + strings.TrimPrefix(url, "http") + "/ssh"
	return []string{"-F", "/dev/null",
		"-o", "ProxyCommand=" + testbin.Path(t) + " proxy " + ws + " --token-file " + tokenFile,
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=" + logLevel}
}

func requireSSH(t *testing.T) string {
	t.Helper()
	p := testenv.Command(t, "openssh-client", "ssh")
	return p
}

// sshStdioForward runs `ssh -W localhost:port` (a direct-tcpip channel on
// ssh's stdin and stdout), sends an HTTP GET through it and returns what
// came back, or ssh's error output when the channel was refused (at
// LogLevel INFO, ssh prints the server's reason: "channel 0: open failed:
// ...").
func sshStdioForward(t *testing.T, url string, port int) (string, error) {
	t.Helper()
	cmd := exec.Command(requireSSH(t), append(opensshArgs(t, url, "INFO"), "-W", "localhost:"+strconv.Itoa(port), "agent@workspace")...)
	cmd.Stdin = strings.NewReader("GET /via-ssh HTTP/1.0\r\nHost: localhost\r\n\r\n")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return "", fmt.Errorf("%v: %s", err, errb.String())
		}
		return out.String(), nil
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatal("ssh -W hung")
	}
	return "", nil
}

// TestPreviewsOnDaemon, under software and bwrap isolation: a server
// started with process_start is reached through /preview/{port}/ (HTTP and
// a WebSocket) and through real OpenSSH (`ssh -L` and `ssh -W` over
// `agent-backend proxy`); a loopback server of the host's and the daemon's
// own port are refused on both faces; without the token /preview/ answers
// 401.
func TestPreviewsOnDaemon(t *testing.T) {
	for _, iso := range []string{"software", "bwrap"} {
		t.Run(iso, func(t *testing.T) {
			c := previewConfig(t, iso, true)
			r := start(t, c, nil)
			port := startPreviewServer(t, r, c.Root)
			base := fmt.Sprintf("%s/preview/%d", r.url, port)
			if _, health := send(t, http.MethodGet, r.url+"/health", "", previewAuth); !strings.Contains(health, `"previews":true`) {
				t.Errorf("/health: %s", health)
			}

			code, body := send(t, http.MethodGet, base+"/some/page?q=1", "", previewAuth)
			if code != http.StatusOK || body != "hello from workspace at /some/page?q=1" {
				t.Fatalf("GET through /preview/: %d %q", code, body)
			}
			if code, body := send(t, http.MethodGet, base+"/headers", "", previewAuth); code != http.StatusOK || body != fmt.Sprintf(`host=localhost:%d authorization="" prefix=/preview/%d forwarded-host=%s`, port, port, strings.TrimPrefix(r.url, "http://")) {
				t.Fatalf("the server saw %d %q: the token must not reach it", code, body)
			}
			if code, body := send(t, http.MethodPost, r.url+"/preview/", "", previewAuth); code != http.StatusMethodNotAllowed || !strings.Contains(body, "the list of ports is read with GET") {
				t.Fatalf("POST /preview/: %d %s", code, body)
			}
			for _, path := range []string{base + "/", r.url + "/preview/x/", r.url + "/preview/"} {
				if code, body := send(t, http.MethodGet, path, "", nil); code != http.StatusUnauthorized || strings.Contains(body, "port") {
					t.Fatalf("%s without the token: %d %s", path, code, body)
				}
			}
			req, _ := http.NewRequest(http.MethodGet, base, nil)
			req.Header.Set("Authorization", "Bearer "+previewToken)
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusMovedPermanently || loc != fmt.Sprintf("/preview/%d/", port) {
				t.Fatalf("/preview/%d without its slash: %d %q", port, resp.StatusCode, loc)
			}
			for _, bad := range []string{"/preview/0/", "/preview/65536/", "/preview/080/", "/preview/x/", "/preview/8080x/", "/preview/-1/"} {
				if code, body := send(t, http.MethodGet, r.url+bad, "", previewAuth); code != http.StatusBadRequest || !strings.Contains(body, "not a port number") {
					t.Errorf("%s: %d %s", bad, code, body)
				}
			}

			// A WebSocket through the proxy.
			ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/echo", http.Header{"Authorization": {"Bearer " + previewToken}})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []string{"one", strings.Repeat("x", 100000)} {
				if err := ws.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
					t.Fatal(err)
				}
				if _, got, err := ws.ReadMessage(); err != nil || string(got) != m {
					t.Fatalf("echo of %d bytes: %d bytes, %v", len(m), len(got), err)
				}
			}
			ws.Close()

			// Refused: the host's loopback server, the daemon's own port.
			host := previewtest.HostServer(t, "the host's secret")
			for name, p := range map[string]int{"a loopback server of the host's": host, "the daemon's own port": portOf(t, r.url)} {
				code, body := send(t, http.MethodGet, fmt.Sprintf("%s/preview/%d/", r.url, p), "", previewAuth)
				if code != http.StatusNotFound || !strings.Contains(body, "no workspace process listens on this port") || strings.Contains(body, "secret") {
					t.Errorf("/preview/ to %s: %d %s", name, code, body)
				}
				if out, err := sshStdioForward(t, r.url, p); err == nil || !strings.Contains(err.Error(), "no workspace process listens on this port") {
					t.Errorf("ssh -W to %s: %q %v", name, out, err)
				}
			}

			// OpenSSH: -W, then -L as IDE remote extensions use it.
			out, err := sshStdioForward(t, r.url, port)
			if err != nil || !strings.HasSuffix(out, "hello from workspace at /via-ssh") {
				t.Fatalf("ssh -W: %q %v", out, err)
			}
			local := freePort(t)
			tunnel := exec.Command(requireSSH(t), append(opensshArgs(t, r.url, "ERROR"), "-N", "-o", "ExitOnForwardFailure=yes",
				"-L", fmt.Sprintf("127.0.0.1:%d:localhost:%d", local, port), "agent@workspace")...)
			var tunnelErr bytes.Buffer
			tunnel.Stderr = &tunnelErr
			if err := tunnel.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { tunnel.Process.Kill(); tunnel.Wait() }()
			deadline := time.Now().Add(time.Minute)
			for {
				resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/via-tunnel", local))
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if string(b) != "hello from workspace at /via-tunnel" {
						t.Fatalf("ssh -L: %d %q", resp.StatusCode, b)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("ssh -L never forwarded: %v; ssh said %s", err, tunnelErr.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// TestPreviewsOffByDefault: without --previews, /preview/ is no endpoint
// and ssh forwarding is refused, even to a workspace server.
func TestPreviewsOffByDefault(t *testing.T) {
	c := previewConfig(t, "software", false)
	r := start(t, c, nil)
	port := startPreviewServer(t, r, c.Root)
	if _, health := send(t, http.MethodGet, r.url+"/health", "", previewAuth); !strings.Contains(health, `"previews":false`) {
		t.Errorf("/health: %s", health)
	}
	if code, body := send(t, http.MethodGet, fmt.Sprintf("%s/preview/%d/", r.url, port), "", previewAuth); code != http.StatusNotFound || !strings.Contains(body, "no endpoint") {
		t.Fatalf("/preview/ without --previews: %d %s", code, body)
	}
	if out, err := sshStdioForward(t, r.url, port); err == nil || !strings.Contains(err.Error(), "port forwarding is off") {
		t.Fatalf("ssh -W without --previews: %q %v", out, err)
	}
}

// TestPreviewsScopedTokens: a token of the token file reaches only the
// servers its scope's commands started, on both faces; a token that may
// not run commands reaches none; the audit log records each connection.
func TestPreviewsScopedTokens(t *testing.T) {
	c := previewConfig(t, "software", true)
	c.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	must(t, os.MkdirAll(filepath.Join(c.Root, "a"), 0o755))
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	must(t, os.WriteFile(tokens, []byte(`{"tokens":[`+strings.Join([]string{
		tokenLine("alice", "alice-token", `,"scope":"a"`),
		tokenLine("bob", "bob-token", `,"scope":"a","readOnly":true`),
		tokenLine("carol", "carol-token", `,"scope":"a","exec":false`),
	}, ",")+`]}`), 0o600))
	c.TokensFile = tokens
	must(t, c.Validate())
	r := start(t, c, nil)
	rootPort := startPreviewServer(t, r, c.Root)
	alicePort := startPreviewServerAs(t, r, filepath.Join(c.Root, "a"), bearer("alice-token"))

	list := func(token string) string {
		t.Helper()
		code, body := send(t, http.MethodGet, r.url+"/preview/", "", bearer(token))
		if code != http.StatusOK {
			t.Fatalf("GET /preview/ as %s: %d %s", token, code, body)
		}
		return strings.TrimSpace(body)
	}
	if got, want := list("alice-token"), fmt.Sprintf(`{"ports":[{"port":%d,"address":"127.0.0.1"}]}`, alicePort); got != want {
		t.Errorf("alice's list: %s, want %s", got, want)
	}
	if got := list(previewToken); !strings.Contains(got, fmt.Sprintf(`"port":%d`, alicePort)) || !strings.Contains(got, fmt.Sprintf(`"port":%d`, rootPort)) {
		t.Errorf("the daemon token's list: %s", got)
	}
	get := func(token string, port int) (int, string) {
		return send(t, http.MethodGet, fmt.Sprintf("%s/preview/%d/", r.url, port), "", bearer(token))
	}
	for _, tc := range []struct {
		token string
		port  int
		code  int
		says  string
	}{
		{"alice-token", alicePort, http.StatusOK, "hello from workspace"},
		{previewToken, alicePort, http.StatusOK, "hello from workspace"},
		{previewToken, rootPort, http.StatusOK, "hello from workspace"},
		{"alice-token", rootPort, http.StatusNotFound, "no workspace process listens on this port"},
		{"bob-token", alicePort, http.StatusForbidden, "may not run commands"},
		{"carol-token", alicePort, http.StatusForbidden, "may not run commands"},
	} {
		if code, body := get(tc.token, tc.port); code != tc.code || !strings.Contains(body, tc.says) {
			t.Errorf("%s to port %d: %d %s", tc.token, tc.port, code, body)
		}
	}

	alice := sshAs(t, r.url, "alice-token")
	fc, err := alice.Dial("tcp", fmt.Sprintf("localhost:%d", alicePort))
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(fc, "GET /ssh HTTP/1.0\r\n\r\n")
	b, _ := io.ReadAll(fc)
	fc.Close()
	if !strings.HasSuffix(string(b), "hello from workspace at /ssh") {
		t.Fatalf("alice over ssh: %q", b)
	}
	if _, err := alice.Dial("tcp", fmt.Sprintf("localhost:%d", rootPort)); err == nil || !strings.Contains(err.Error(), "no workspace process listens") {
		t.Fatalf("alice over ssh to the root's server: %v", err)
	}
	for _, host := range []string{"10.0.0.1", "example.com", "127.0.0.2"} {
		if _, err := alice.Dial("tcp", fmt.Sprintf("%s:%d", host, alicePort)); err == nil || !strings.Contains(err.Error(), "is not localhost, 127.0.0.1 or ::1") {
			t.Errorf("alice over ssh to %s: %v", host, err)
		}
	}
	carol := sshAs(t, r.url, "carol-token")
	if _, err := carol.Dial("tcp", fmt.Sprintf("localhost:%d", alicePort)); err == nil || !strings.Contains(err.Error(), "needs a token that may run commands") {
		t.Fatalf("carol over ssh: %v", err)
	}

	// The audit log: a line per connection, opened or refused.
	deadline := time.Now().Add(20 * time.Second)
	for {
		log, _ := os.ReadFile(c.AuditLog)
		s := string(log)
		if strings.Contains(s, `"tool":"preview"`) && strings.Contains(s, `"tool":"ssh.forward"`) &&
			strings.Contains(s, `"caller":"alice"`) && strings.Contains(s, fmt.Sprintf(`"command":"localhost:%d"`, alicePort)) &&
			strings.Contains(s, `"outcome":"refused: port`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit log lacks the previews' lines:\n%s", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPreviewsOnSSHPort: the SSH port (--ssh-listen) forwards to a
// workspace server for a key of authorized_keys, not for one marked
// restrict, and never to the daemon's own HTTP port.
func TestPreviewsOnSSHPort(t *testing.T) {
	c := previewConfig(t, "software", true)
	dir := t.TempDir()
	_, line, signer := clientKey(t, dir, "good")
	_, restrictedLine, restricted := clientKey(t, dir, "restricted")
	authz := filepath.Join(dir, "authorized_keys")
	must(t, os.WriteFile(authz, []byte(line+"\nrestrict "+restrictedLine+"\n"), 0o600))
	c.SSHListen = freeAddr(t)
	c.SSHAuthorizedKeys = authz
	must(t, c.Validate())
	r := start(t, c, nil)
	waitFor(t, "the SSH port", func() bool { return r.d.SSHAddr() != "" })
	port := startPreviewServer(t, r, c.Root)

	login := func(s gossh.Signer) *gossh.Client {
		t.Helper()
		cl, err := gossh.Dial("tcp", r.d.SSHAddr(), &gossh.ClientConfig{User: "agent", Auth: []gossh.AuthMethod{gossh.PublicKeys(s)},
			HostKeyCallback: gossh.InsecureIgnoreHostKey()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	good := login(signer)
	fc, err := good.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(fc, "GET /port HTTP/1.0\r\n\r\n")
	b, _ := io.ReadAll(fc)
	fc.Close()
	if !strings.HasSuffix(string(b), "hello from workspace at /port") {
		t.Fatalf("through the SSH port: %q", b)
	}
	if _, err := good.Dial("tcp", fmt.Sprintf("localhost:%d", portOf(t, r.url))); err == nil || !strings.Contains(err.Error(), "no workspace process listens") {
		t.Fatalf("the daemon's own port through the SSH port: %v", err)
	}
	if _, err := login(restricted).Dial("tcp", fmt.Sprintf("localhost:%d", port)); err == nil || !strings.Contains(err.Error(), "not permitted for this key") {
		t.Fatalf("a restrict key: %v", err)
	}
}

// TestPreviewsShutdownEndsProxiedWebSockets: a WebSocket proxied to a
// workspace server (a hijacked connection the HTTP server does not track)
// ends when the daemon stops, and the stop does not wait on it.
func TestPreviewsShutdownEndsProxiedWebSockets(t *testing.T) {
	c := previewConfig(t, "software", true)
	r := start(t, c, nil)
	port := startPreviewServer(t, r, c.Root)
	ws, _, err := websocket.DefaultDialer.Dial(fmt.Sprintf("ws%s/preview/%d/echo", strings.TrimPrefix(r.url, "http"), port),
		http.Header{"Authorization": {"Bearer " + previewToken}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := ws.WriteMessage(websocket.TextMessage, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, m, err := ws.ReadMessage(); err != nil || string(m) != "hi" {
		t.Fatalf("echo: %q %v", m, err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- r.stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
	case <-time.After(c.ShutdownTimeout + 10*time.Second):
		t.Fatal("the daemon's stop waited on a proxied WebSocket")
	}
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := ws.ReadMessage(); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("the proxied WebSocket outlived the daemon: %v", err)
	}
}

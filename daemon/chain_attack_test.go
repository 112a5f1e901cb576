package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/internal/previewtest"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/browser"
)

// Chains: attacks that combine features, each of which held its own
// review (docs/security.md, "Attack review: chains across features"). The
// attacker holds a token of the daemon's (its own whole token, or a
// --tokens entry bound to a scope) and runs commands there.

// chainText is the text of an MCP tools/call answer (its first content
// item), or the whole body when it has none.
func chainText(body string) string {
	var resp struct {
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if json.Unmarshal([]byte(body), &resp) == nil && len(resp.Result.Content) > 0 {
		return resp.Result.Content[0].Text
	}
	return body
}

// TestChainLandlockReadsNoOtherSecret: under landlock, a command of scope
// a (which may read /proc, the one grant Landlock cannot narrow) looks for
// what the threat model keeps from it in every process the daemon runs at
// the time: scope b's background process (its environment, its working
// directory and root through /proc/PID/cwd and /root, its descriptors), a
// preview server of scope b's, the daemon itself (its environment and
// memory), and the tokens anywhere a command line or environment shows
// them. It then calls the daemon's own port without a token: every work
// endpoint refuses it, and /health tells it what it tells a stranger. The
// scope a token's /preview/ of scope b's server is refused too.
func TestChainLandlockReadsNoOtherSecret(t *testing.T) {
	if sandbox.LandlockABI() < 6 {
		t.Skip("Landlock ABI 6 (signals and abstract sockets scoped) is not available here")
	}
	c := testConfig(t)
	c.Isolation = "landlock"
	c.AuthToken = "chainsecret-master"
	c.ProcessTools, c.Previews = true, true
	c.BlockDangerous = false // /dev/tcp and the /proc walk are the probes, not the policy's business
	for _, d := range []string{"a", "b"} {
		must(t, os.MkdirAll(filepath.Join(c.Root, d), 0o755))
	}
	must(t, os.WriteFile(filepath.Join(c.Root, "b", "secret.txt"), []byte("chainsecret-file\n"), 0o600))
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	must(t, os.WriteFile(tokens, []byte(`{"tokens":[`+
		tokenLine("alice", "chainsecret-alice", `,"scope":"a"`)+","+
		tokenLine("bob", "chainsecret-bob", `,"scope":"b"`)+`]}`), 0o600))
	c.TokensFile = tokens
	must(t, c.Validate())
	r := start(t, c, nil)
	defer http.DefaultClient.CloseIdleConnections()

	// Scope b: a background process holding a secret in its environment,
	// and a preview server.
	_, body := callAs(t, r.url, "chainsecret-bob", "", "process_start",
		`{"command":"exec sleep 120","env":{"CHAIN_SECRET":"chainsecret-env"}}`)
	if !strings.Contains(chainText(body), `"id"`) {
		t.Fatalf("bob's process_start: %s", body)
	}
	bobPort := startPreviewServerAs(t, r, filepath.Join(c.Root, "b"), bearer("chainsecret-bob"))

	// Scope a's command. Its own command line names no secret: the
	// patterns are written so that they do not match themselves.
	port := strconv.Itoa(portOf(t, r.url))
	probe := strings.Join([]string{
		`cd /proc`,
		// Environments and command lines of every process it can read.
		`for f in [0-9]*/environ [0-9]*/cmdline; do tr '\0' '\n' < "$f" 2>/dev/null; done | grep -a -o 'c[h]ainsecret-[a-z]*' | sort -u | sed 's/^/found /'`,
		// Scope b's files through another process's cwd and root.
		`cat [0-9]*/cwd/secret.txt [0-9]*/root` + c.Root + `/b/secret.txt 2>/dev/null | sed 's/^/found /'`,
		`for l in [0-9]*/cwd [0-9]*/root; do readlink "$l"; done 2>/dev/null | grep -a '/b$' | sed 's/^/found cwd /'`,
		// Descriptors of other processes (b's secret file is not open, but
		// a readable fd table would name b's directory).
		`ls -l [0-9]*/fd/ 2>/dev/null | grep -a -o '/b/[^ ]*' | sed 's/^/found fd /'`,
		// The daemon's own environment and memory.
		`head -c1 ` + strconv.Itoa(os.Getpid()) + `/environ >/dev/null 2>&1 && echo found daemon-environ`,
		`head -c1 ` + strconv.Itoa(os.Getpid()) + `/mem >/dev/null 2>&1 && echo found daemon-mem`,
		// The daemon's port, without a token: each work route asked as its
		// clients ask it (a JSON POST, a WebSocket upgrade, a GET).
		`ask() { exec 3<>/dev/tcp/127.0.0.1/` + port + ` || { echo unreachable; return; }; ` +
			`printf '%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n%b\r\n' "$1" "$2" "$3" >&3; ` +
			`printf '%s %s\n' "$2" "$(head -n1 <&3 | tr -d '\r')"; exec 3<&-; }`,
		`json='Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 46\r\n\r\n{"jsonrpc":"2.0","id":1,"method":"tools/list"}'`,
		`ws='Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n'`,
		`ask POST /mcp "$json"; ask GET /tools ''; ask POST /execute "$json"; ask GET /approvals ''`,
		// A WebSocket route completes the upgrade and closes with 4001
		// (0x0fa1) for a bad token: the close frame is read too.
		`askws() { exec 3<>/dev/tcp/127.0.0.1/` + port + ` || { echo unreachable; return; }; ` +
			`printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n%b\r\n' "$1" "$ws" >&3; ` +
			`IFS= read -r l <&3; printf '%s %s' "$1" "${l%$'\r'}"; ` +
			`timeout 5 cat <&3 | od -An -tx1 | tr -d ' \n' | grep -q 0fa1 && printf ' close 4001'; echo; exec 3<&-; }`,
		`ask GET /preview/ ''; ask GET /preview/` + strconv.Itoa(bobPort) + `/ ''; askws /ssh; askws /gateway; ask GET /site/ ''`,
		`exec 3<>/dev/tcp/127.0.0.1/` + port + ` && printf 'GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 && cat <&3 | tail -n1`,
		`echo probe-done`,
	}, "\n")
	args, _ := json.Marshal(map[string]string{"command": probe})
	_, body = callAs(t, r.url, "chainsecret-alice", "", "exec", string(args))
	out := chainText(body)
	if !strings.Contains(out, "probe-done") {
		t.Fatalf("the probe did not finish: %s", body)
	}
	if strings.Contains(out, "found ") {
		t.Errorf("scope a's command read what it must not:\n%s", out)
	}
	for _, p := range []string{"/mcp", "/tools", "/execute", "/approvals", "/preview/", "/preview/" + strconv.Itoa(bobPort) + "/", "/ssh", "/gateway", "/site/"} {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, p+" ") {
				line = l
			}
		}
		// 401 without a token; 404 for a route this daemon does not serve
		// (no site, no operator token); for /ssh and /gateway, the upgrade
		// and then close code 4001.
		if !strings.Contains(line, " 401 ") && !strings.Contains(line, " 404 ") && !strings.HasSuffix(line, " 101 Switching Protocols close 4001") {
			t.Errorf("the daemon's %s without a token, from a command: %q\n%s", p, line, out)
		}
	}
	if strings.Contains(out, "unreachable") {
		t.Fatalf("a command with the network (a token is set) did not reach the port:\n%s", out)
	}
	if strings.Contains(out, "isolationGaps") || strings.Contains(out, "isolationReason") {
		t.Errorf("/health told a command without the token more than liveness:\n%s", out)
	}

	// The preview of scope b's server, asked for with scope a's token.
	code, pb := send(t, http.MethodGet, fmt.Sprintf("%s/preview/%d/", r.url, bobPort), "", bearer("chainsecret-alice"))
	if code != http.StatusNotFound || strings.Contains(pb, "workspace at") {
		t.Errorf("scope a's token through /preview/ to scope b's server: %d %s", code, pb)
	}
	if code, pb := send(t, http.MethodGet, fmt.Sprintf("%s/preview/%d/", r.url, bobPort), "", bearer("chainsecret-bob")); code != http.StatusOK {
		t.Errorf("scope b's own preview: %d %s", code, pb)
	}
}

// chainScopes gives c the scopes a and b, the daemon's token
// "chain-master" and three tokens: carol (scope a, no exec), alice (scope
// a) and bob (scope b); then validates it.
func chainScopes(t *testing.T, c *config.Config) {
	t.Helper()
	c.AuthToken = "chain-master"
	for _, d := range []string{"a", "b"} {
		must(t, os.MkdirAll(filepath.Join(c.Root, d), 0o755))
	}
	c.TokensFile = filepath.Join(t.TempDir(), "tokens.json")
	must(t, os.WriteFile(c.TokensFile, []byte(`{"tokens":[`+
		tokenLine("carol", "chain-carol", `,"scope":"a","exec":false`)+","+
		tokenLine("alice", "chain-alice", `,"scope":"a"`)+","+
		tokenLine("bob", "chain-bob", `,"scope":"b"`)+`]}`), 0o600))
	must(t, c.Validate())
}

// TestChainBrowserReachesAnotherScopesServer: with --browser-allow-local,
// a token bound to scope a (one that may not run commands, and one that
// may) opens, in its browser session, the loopback server a command of
// scope b listens on, which /preview/ refuses those tokens. The browser's
// connections to a workspace command's port are judged by /preview/'s rule
// (previews.Reachable); other loopback servers stay the flag's.
func TestChainBrowserReachesAnotherScopesServer(t *testing.T) {
	testenv.Command(t, "chromium", "chromium")
	tmp := testenv.SharedTempDir(t)
	must(t, os.Chmod(tmp, 0o711)) // Chromium may run as nobody
	c := testConfig(t)
	c.ProcessTools, c.Previews, c.BrowserAllowLocal = true, true, true
	chainScopes(t, &c)
	r := startWith(t, c, Options{browserTweak: func(o *browser.Options) { o.TempDir = tmp }})
	defer http.DefaultClient.CloseIdleConnections()
	bobPort := startPreviewServerAs(t, r, filepath.Join(c.Root, "b"), bearer("chain-bob"))
	target := fmt.Sprintf("http://127.0.0.1:%d/from-the-browser", bobPort)

	if code, body := send(t, http.MethodGet, fmt.Sprintf("%s/preview/%d/", r.url, bobPort), "", bearer("chain-carol")); code == http.StatusOK {
		t.Fatalf("/preview/ let scope a's no-exec token reach scope b's server: %s", body)
	}
	// read is the page's text at target in a browser session of token.
	read := func(token, target string) string {
		t.Helper()
		_, body := callAs(t, r.url, token, "", "browser.start", `{}`)
		var started struct{ SessionID string }
		if err := json.Unmarshal([]byte(chainText(body)), &started); err != nil || started.SessionID == "" {
			t.Fatalf("browser.start as %s: %s", token, body)
		}
		sid := `{"sessionId":"` + started.SessionID + `"`
		defer callAs(t, r.url, token, "", "browser.close", sid+`}`)
		callAs(t, r.url, token, "", "browser.goto", sid+`,"url":"`+target+`"}`)
		_, body = callAs(t, r.url, token, "", "browser.extract", sid+`,"selector":"body","kind":"text"}`)
		return chainText(body)
	}
	if got := read("chain-carol", target); strings.Contains(got, "hello from workspace") {
		t.Errorf("scope a's no-exec token read scope b's server through its browser: %s", got)
	}
	if got := read("chain-alice", target); strings.Contains(got, "hello from workspace") {
		t.Errorf("scope a's token read scope b's server through its browser: %s", got)
	}
	// Held to /preview/'s rule, not shut: scope b's own token, and the
	// daemon's whole token, read it; a loopback server that is no
	// workspace command's is the flag's, as docs/browser.md says.
	for _, token := range []string{"chain-bob", "chain-master"} {
		if got := read(token, target); !strings.Contains(got, "hello from workspace at /from-the-browser") {
			t.Errorf("%s's browser on scope b's server: %s", token, got)
		}
	}
	host := fmt.Sprintf("http://127.0.0.1:%d/", previewtest.HostServer(t, "a host service"))
	if got := read("chain-carol", host); !strings.Contains(got, "a host service") {
		t.Errorf("scope a's no-exec token on a host loopback server with --browser-allow-local: %s", got)
	}
}

// TestChainToolsReachAnotherScopesServer: where the operator admits
// loopback to the tools that go out (--net-allow-private, with the port),
// http.request of a token bound to scope a, with or without exec, reached
// the server a command of scope b listens on, which /preview/ refuses it.
// Every tool call's connections to this machine are judged by /preview/'s
// rule now (the registry's CallContext, netguard.WithLoopbackJudge); a
// loopback server that is no workspace command's stays the loosening's.
func TestChainToolsReachAnotherScopesServer(t *testing.T) {
	hostLn, err := net.Listen("tcp4", "127.0.0.1:0")
	must(t, err)
	hostSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "a host service") })}
	go hostSrv.Serve(hostLn)
	defer hostSrv.Close()
	hostPort := hostLn.Addr().(*net.TCPAddr).Port
	bobPort := freePort(t)

	c := testConfig(t)
	c.ProcessTools, c.GatewayTools, c.NetAllowPrivate = true, true, true
	c.Site = t.TempDir() // a page that lets its callers fetch a URL
	must(t, os.WriteFile(filepath.Join(c.Site, "README.md"), []byte("---\ntools:\n  - [curl]\n---\n# Fetch\n"), 0o644))
	c.NetAllowPorts = []string{strconv.Itoa(bobPort), strconv.Itoa(hostPort)}
	chainScopes(t, &c)
	r := start(t, c, nil)
	defer http.DefaultClient.CloseIdleConnections()

	bin := previewtest.Install(t, filepath.Join(c.Root, "b"))
	if _, body := callAs(t, r.url, "chain-bob", "", "process_start", `{"command":"`+bin+` -addr 127.0.0.1:`+strconv.Itoa(bobPort)+`"}`); !strings.Contains(chainText(body), `"id"`) {
		t.Fatalf("bob's server: %s", body)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) { // a hang guard
		if conn, err := net.Dial("tcp4", "127.0.0.1:"+strconv.Itoa(bobPort)); err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("bob's server never listened")
		}
	}
	fetch := func(token string, port int) string {
		t.Helper()
		_, body := callAs(t, r.url, token, "", "http.request", fmt.Sprintf(`{"url":"http://127.0.0.1:%d/by-a-tool"}`, port))
		return chainText(body)
	}
	for _, token := range []string{"chain-carol", "chain-alice"} {
		if got := fetch(token, bobPort); strings.Contains(got, "hello from") || !strings.Contains(got, "this caller may not reach it") {
			t.Errorf("%s's http.request to scope b's server: %s", token, got)
		}
	}
	for _, token := range []string{"chain-bob", "chain-master"} {
		if got := fetch(token, bobPort); !strings.Contains(got, "hello from the workspace at /by-a-tool") {
			t.Errorf("%s's http.request to scope b's server: %s", token, got)
		}
		// Right after, while the door could hold the connection it made
		// for bob (a keep-alive pool is per address, not per caller).
		if got := fetch("chain-alice", bobPort); strings.Contains(got, "hello from") {
			t.Errorf("alice's http.request right after %s's: %s", token, got)
		}
	}
	// The site's curl, as its MCP tool and on /site/.
	for _, token := range []string{"chain-alice", "chain-bob"} {
		args := fmt.Sprintf(`{"page":"README.md","command":["curl","http://127.0.0.1:%d/by-the-site"]}`, bobPort)
		_, tool := callAs(t, r.url, token, "", "run_command", args)
		_, route := send(t, http.MethodPost, r.url+"/site/README.md", fmt.Sprintf(`{"command":["curl","http://127.0.0.1:%d/by-the-site"]}`, bobPort), bearer(token))
		for face, got := range map[string]string{"run_command": chainText(tool), "/site/": route} {
			if reached := strings.Contains(got, "hello from the workspace at /by-the-site"); reached != (token == "chain-bob") {
				t.Errorf("%s's curl through %s to scope b's server: %s", token, face, got)
			}
		}
	}
	if got := fetch("chain-carol", hostPort); !strings.Contains(got, "a host service") {
		t.Errorf("scope a's no-exec token on a host loopback server the operator admitted: %s", got)
	}
}

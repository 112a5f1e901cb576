package daemon

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

// healthAs asks /health with the headers of hdr and returns its body.
func healthAs(t *testing.T, url string, hdr map[string]string) (int, string) {
	t.Helper()
	return send(t, http.MethodGet, url+"/health", "", hdr)
}

func jsonKeys(t *testing.T, body string) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("not JSON: %v: %s", err, body)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// livenessKeys are what /health tells a caller the daemon would not admit:
// the fields docs/protocol.md requires of an unauthenticated /health, and
// (with --upstreams) the servers' states by name, as /health/servers.
var livenessKeys = []string{"rootDir", "status", "transports", "version"}

// TestAttackHealthTellsStrangersOnlyLiveness: /health answers every
// caller (a probe needs no token), but only a caller the daemon would
// admit with its full token (or the operator's) gets more than the
// protocol's liveness fields. A stranger without a token, with a wrong
// one, with a token bound to a scope or read-only, a DNS-rebinding page
// (a foreign Origin, or a foreign Host on a daemon without a token) gets
// status, version, rootDir and transports: not an upstream server's
// stderr (which may print a secret), its pid, the operator's file paths,
// the isolation mode's gaps or the providers.
func TestAttackHealthTellsStrangersOnlyLiveness(t *testing.T) {
	c := admissionConfig(t, true, "")
	cfgFile := filepath.Join(t.TempDir(), "mcp_servers.json")
	must(t, os.WriteFile(cfgFile, []byte(`{"servers":[{"name":"leaky","command":"sh","args":["-c","echo 'login failed with API_KEY=sk-hunter2' >&2; exit 3"]}]}`), 0o600))
	c.Upstreams = cfgFile
	c.UpstreamCacheDir = t.TempDir()
	c.Extensions = t.TempDir()
	must(t, os.WriteFile(filepath.Join(c.Extensions, "broken.star"), []byte("def describe_extension(:\n"), 0o600))
	must(t, c.Validate())
	r := start(t, c, nil)

	// The operator's view names the upstream's stderr once it has failed.
	deadline := time.Now().Add(30 * time.Second)
	var full string
	for {
		_, full = healthAs(t, r.url, bearer(admAgent))
		if strings.Contains(full, "sk-hunter2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream's stderr never reached /health: %s", full)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, k := range []string{"isolation", "providers", "upstreams", "extensions", "tools"} {
		if !slices.Contains(jsonKeys(t, full), k) {
			t.Errorf("/health with the token lacks %q: %s", k, full)
		}
	}
	if _, op := healthAs(t, r.url, bearer(admOperator)); !strings.Contains(op, `"upstreams"`) {
		t.Errorf("/health with the operator's token: %s", op)
	}

	for _, tc := range []struct {
		name string
		hdr  map[string]string
	}{
		{"no token", nil},
		{"wrong token", bearer("nope")},
		{"token in the query", nil},
		{"read-only token", bearer("ro-tok")},
		{"scope-bound token", bearer("bound-tok")},
		{"foreign origin with the token", map[string]string{"Authorization": "Bearer " + admAgent, "Origin": "http://evil.example"}},
	} {
		u := r.url
		if tc.name == "token in the query" {
			// /health takes the token from the header only, as /mcp does.
			code, body := get(t, u+"/health?token="+admAgent)
			checkLiveness(t, tc.name, code, string(body), c.Extensions)
			continue
		}
		code, body := healthAs(t, u, tc.hdr)
		checkLiveness(t, tc.name, code, body, c.Extensions)
	}

	// Without a token the daemon admits what passes the Origin and Host
	// rules: a local client sees everything, a rebinding page liveness.
	c2 := testConfig(t)
	r2 := start(t, c2, nil)
	if _, body := healthAs(t, r2.url, nil); !slices.Contains(jsonKeys(t, body), "isolation") {
		t.Errorf("/health without a token set, local client: %s", body)
	}
	code, body := healthAs(t, r2.url, map[string]string{"Host": "rebound.example"})
	checkLiveness(t, "foreign host without a token set", code, body, "")
	code, body = healthAs(t, r2.url, map[string]string{"Origin": "http://evil.example"})
	checkLiveness(t, "foreign origin without a token set", code, body, "")
}

func checkLiveness(t *testing.T, name string, code int, body, secretPath string) {
	t.Helper()
	if code != http.StatusOK {
		t.Errorf("%s: /health answered %d: %s", name, code, body)
	}
	keys := slices.DeleteFunc(jsonKeys(t, body), func(k string) bool { return k == "servers" })
	if !slices.Equal(keys, livenessKeys) {
		t.Errorf("%s: /health told a stranger %v, want %v: %s", name, keys, livenessKeys, body)
	}
	if strings.Contains(body, "hunter2") || (secretPath != "" && strings.Contains(body, secretPath)) {
		t.Errorf("%s: /health leaks a secret or the operator's path: %s", name, body)
	}
}

// rawRequest writes line and a Host header on a fresh connection and
// reads the answer's status line.
func rawRequest(t *testing.T, base, line string) string {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, line+"\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	st, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatalf("%.60q: %v", line, err)
	}
	return st
}

// TestAttackLogLinesNeitherForgedNorBloated: what a client puts in a value
// the daemon logs (a request's path here, an SSH user name below) can
// neither start a line of its own, in the text format or the JSON one (a
// newline, CR, an ANSI escape, U+2028, NUL, bytes that are not UTF-8, in
// the path's escapes and raw), nor make one request write more than about
// clip.LogValue escaped bytes a value: a 300 KiB path of 0xFF bytes, which
// the text handler writes as 1.2 MB and the JSON handler as 1.8 MB.
func TestAttackLogLinesNeitherForgedNorBloated(t *testing.T) {
	forged := []string{
		"/a%0Atime=2026-01-01T00:00:00Z%20level=ERROR%20msg=forged",
		"/a%0D%0A{\"level\":\"ERROR\",\"msg\":\"forged\"}",
		"/a%1B[2J%1B[31mred",
		"/a%E2%80%A8level=ERROR%20msg=forged",
		"/a%00b",
		"/a%FF%FEb",
		"/a\xff\xfeb",
	}
	huge := "/" + strings.Repeat("%FF", 300<<10)
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var logs syncbuf.Buffer
			c := testConfig(t)
			d, err := New(c, Options{Logger: NewLogger(&logs, format, "info"), Version: "9.9.9"})
			must(t, err)
			r := serve(t, d)
			for _, p := range forged {
				rawRequest(t, r.url, "GET "+p+" HTTP/1.1")
			}
			rawRequest(t, r.url, "GET "+huge+" HTTP/1.1")
			must(t, r.stop())
			var requests, longest int
			for _, line := range strings.Split(strings.TrimSuffix(logs.String(), "\n"), "\n") {
				longest = max(longest, len(line))
				if format == "json" {
					var m map[string]any
					if err := json.Unmarshal([]byte(line), &m); err != nil {
						t.Errorf("a line that is not one JSON object: %.200q", line)
						continue
					}
					if m["msg"] == "http request" {
						requests++
					}
					continue
				}
				if !strings.HasPrefix(line, "time=") {
					t.Errorf("a line the daemon did not start: %.200q", line)
				}
				if strings.Contains(line, `msg="http request"`) {
					requests++
				}
				if strings.ContainsAny(line, "\x1b\x00\r\u2028") || !utf8.ValidString(line) {
					t.Errorf("a raw control character or invalid UTF-8 in %.200q", line)
				}
			}
			if requests != len(forged)+1 {
				t.Errorf("%d request lines, want %d:\n%.3000s", requests, len(forged)+1, logs.String())
			}
			// A value is cut at clip.LogValue bytes before it is escaped,
			// four bytes at most each in either format (JSON's \ufffd is six
			// for three %FF, two for each byte).
			if maxLine := 6*(16<<10) + 1024; longest > maxLine || clip.LogValue > 16<<10 {
				t.Errorf("a log line of %d bytes from one request, want at most %d (clip.LogValue %d)", longest, maxLine, clip.LogValue)
			}
		})
	}
}

// TestAttackSSHUserNameInLog: an SSH client names itself with a 200 KiB
// user name that holds a newline, a forged line and ANSI escapes, and
// fails to log in: the daemon's refusal line (logged each time, by
// design) quotes it, cut at clip.LogValue bytes. The logger here is the
// tests' own text handler: daemon.New cuts a logger it is given.
func TestAttackSSHUserNameInLog(t *testing.T) {
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("right"), bcrypt.MinCost)
	must(t, err)
	hf := filepath.Join(dir, "hash")
	must(t, os.WriteFile(hf, hash, 0o600))
	c := testConfig(t)
	c.SSHListen = freeAddr(t)
	c.SSHPasswordHashFile = hf
	c.SSHMaxAuthTries = 1
	must(t, c.Validate())
	r := start(t, c, nil)
	waitFor(t, "the SSH port", func() bool { return r.d.SSHAddr() != "" })
	user := "agent\ntime=2026-01-01T00:00:00Z level=ERROR msg=forged\x1b[2J" + strings.Repeat("\xff", 200<<10)
	conn, err := gossh.Dial("tcp", r.d.SSHAddr(), &gossh.ClientConfig{
		User: user, Auth: []gossh.AuthMethod{gossh.Password("wrong")},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 30 * time.Second,
	})
	if err == nil {
		conn.Close()
		t.Fatal("a wrong password logged in")
	}
	waitFor(t, "the refusal's log line", func() bool { return strings.Contains(r.logs.String(), `msg="ssh login refused"`) })
	for _, line := range strings.Split(r.logs.String(), "\n") {
		if line != "" && !strings.HasPrefix(line, "time=") {
			t.Errorf("a line the daemon did not start: %.200q", line)
		}
		if strings.Contains(line, "ssh login refused") {
			if maxLine := 4*(16<<10) + 1024; len(line) > maxLine || !strings.Contains(line, `user="agent\ntime=2026`) {
				t.Errorf("the refusal's line is %d bytes (at most %d), quoting the user: %.200q", len(line), maxLine, line)
			}
		}
		if strings.ContainsRune(line, '\x1b') {
			t.Errorf("a raw escape: %.200q", line)
		}
	}
}

// TestAttackTokenInACommandStaysOutOfTheLog: a command that carries the
// daemon's token (or the operator's), started in the background, where
// the daemon's log names the command, or in a name the log quotes, is
// logged with the token replaced, as the audit log replaces it; a token
// across the log's 16 KiB cut leaves no prefix either.
func TestAttackTokenInACommandStaysOutOfTheLog(t *testing.T) {
	const tok, op = "q7Zk2v9LxW4mB8nR-daemon", "P3sT6yH1cJ5dF0gA-operator"
	c := testConfig(t)
	c.AuthToken = tok
	c.OperatorToken = op
	c.ProcessTools = true
	must(t, c.Validate())
	r := start(t, c, nil)
	pad := strings.Repeat("x", clip.LogValue-8)
	for _, cmd := range []string{"echo " + tok + " " + op, "echo " + pad + tok} {
		code, body := callAs(t, r.url, tok, "", "process_start", `{"command":"`+cmd+`","name":"`+op+`"}`)
		if code != http.StatusOK || strings.Contains(body, `"isError":true`) {
			t.Fatalf("process_start: %d %.300s", code, body)
		}
	}
	waitFor(t, "the log lines of both processes", func() bool {
		return strings.Count(r.logs.String(), "background process started") == 2
	})
	logs := r.logs.String()
	for _, secret := range []string{tok[:8], op[:8]} {
		if strings.Contains(logs, secret) {
			i := strings.Index(logs, secret)
			t.Errorf("the daemon's log holds %q: …%.200s…", secret, logs[max(0, i-100):])
		}
	}
}

// TestAttackCrossOriginReadsNothing: no answer of the daemon carries a CORS
// header, to a preflight or a request, on any endpoint, so a page on
// another origin can send what a browser sends without asking but read
// none of the answers (its only way to read /health is DNS rebinding,
// which TestAttackHealthTellsStrangersOnlyLiveness holds to liveness); the
// 404 that quotes a path the page chose is JSON with "<" escaped and
// nosniff, so it is no page of the daemon's origin.
func TestAttackCrossOriginReadsNothing(t *testing.T) {
	c := admissionConfig(t, true, "")
	r := start(t, c, nil)
	for _, path := range []string{"/health", "/health/servers", "/mcp", "/metrics", "/tools", "/execute", "/site/", "/preview/1/", "/approvals", "/no/such/<script>alert(1)</script>"} {
		for _, method := range []string{http.MethodOptions, http.MethodGet, http.MethodPost} {
			req, err := http.NewRequest(method, r.url+path, strings.NewReader("{}"))
			must(t, err)
			req.Header.Set("Origin", "http://evil.example")
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
			req.Header.Set("Content-Type", "text/plain")
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for k := range resp.Header {
				if strings.HasPrefix(strings.ToLower(k), "access-control-") {
					t.Errorf("%s %s: %s: %s", method, path, k, resp.Header.Get(k))
				}
			}
			if strings.Contains(string(body), "<script>") {
				t.Errorf("%s %s: the answer quotes the page's markup unescaped (%s): %.200s", method, path, resp.Header.Get("Content-Type"), body)
			}
			if resp.StatusCode == http.StatusNotFound && (resp.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json")) {
				t.Errorf("%s %s: 404 as %q without nosniff", method, path, resp.Header.Get("Content-Type"))
			}
		}
	}
}

package daemon

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentbe/agentbe-daemon/config"
)

// elapsedMs is /execute's execution_time_ms in a quoted body.
var elapsedMs = regexp.MustCompile(`(execution_time_ms\\":)[0-9.e+-]+`)

var updateAdmission = flag.Bool("update-admission", false, "rewrite testdata/admission.golden from the current answers")

// admissionEndpoints are the routes that admit a request, each with a
// request that passes admission and the method it refuses (405).
var admissionEndpoints = []struct {
	path, method, body string
	ws                 bool
	wrong              string // a method the endpoint answers 405
}{
	{path: "/mcp", method: "POST", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_allowed_directories","arguments":{}}}`, wrong: "PUT"},
	{path: "/mcp", method: "POST", body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"w.txt","content":"w"}}}`},
	{path: "/mcp", method: "POST", body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"exec","arguments":{"command":"pwd"}}}`},
	{path: "/tools", method: "GET", wrong: "POST"},
	{path: "/execute", method: "POST", body: `{"tool_name":"list_allowed_directories","arguments":{}}`, wrong: "GET"},
	{path: "/execute", method: "POST", body: `{"tool_name":"exec","arguments":{"command":"pwd"}}`},
	{path: "/gateway", method: "GET", ws: true},
	{path: "/ssh", method: "GET", ws: true},
	{path: "/site/", method: "GET", wrong: "PUT"},
	{path: "/site/data", method: "POST", body: `{"command":["head","-n","1","cities.csv"]}`},
	{path: "/preview/", method: "GET", wrong: "POST"},
	{path: "/preview/1/", method: "GET"},
	{path: "/metrics", method: "GET", wrong: "POST"},
	{path: "/approvals", method: "GET", wrong: "PUT"},
}

// admissionCase is one way a request can meet the rules.
type admissionCase struct {
	name   string
	header map[string]string
	query  string
	method string // "" = the endpoint's own; "wrong" = one it refuses
	host   string
	body   string // "" = the endpoint's own; a POST endpoint only
	ctype  string // Content-Type; "" = application/json
}

const (
	admAgent    = "agent-tok"
	admOperator = "operator-tok"
)

var admissionCases = []admissionCase{
	{name: "admitted", header: bearer(admAgent)},
	{name: "no token"},
	{name: "wrong token", header: bearer("nope")},
	{name: "query token", query: "token=" + admAgent},
	{name: "foreign origin", header: map[string]string{"Authorization": "Bearer " + admAgent, "Origin": "http://evil.example"}},
	{name: "foreign origin, no token", header: map[string]string{"Origin": "http://evil.example"}},
	{name: "wrong method, foreign origin", method: "wrong", header: map[string]string{"Authorization": "Bearer " + admAgent, "Origin": "http://evil.example"}},
	{name: "wrong method, no token", method: "wrong"},
	{name: "wrong method", method: "wrong", header: bearer(admAgent)},
	{name: "root mismatch", header: map[string]string{"Authorization": "Bearer " + admAgent, "X-Root-Dir": "/nope"}},
	{name: "root mismatch, no token", header: map[string]string{"X-Root-Dir": "/nope"}},
	{name: "root undefined", header: map[string]string{"Authorization": "Bearer " + admAgent, "X-Root-Dir": "undefined"}},
	{name: "root right", header: map[string]string{"Authorization": "Bearer " + admAgent, "X-Root-Dir": "$ROOT"}},
	{name: "scope with dots", header: map[string]string{"Authorization": "Bearer " + admAgent, "X-Scope-Path": "a/../b"}},
	{name: "scope", header: map[string]string{"Authorization": "Bearer " + admAgent, "X-Scope-Path": "/sub"}},
	{name: "read-only token", header: bearer("ro-tok")},
	{name: "bound token", header: bearer("bound-tok")},
	{name: "bound token, scope", header: map[string]string{"Authorization": "Bearer bound-tok", "X-Scope-Path": "inner"}},
	{name: "bound token, scope with dots", header: map[string]string{"Authorization": "Bearer bound-tok", "X-Scope-Path": "../u2"}},
	{name: "token without exec", header: bearer("noexec-tok")},
	{name: "operator token", header: bearer(admOperator)},
	{name: "operator token, query", query: "token=" + admOperator},
	{name: "body not declared JSON", header: bearer(admAgent), ctype: "text/plain"},
	{name: "body over the limit", header: bearer(admAgent), body: `{"x":"` + strings.Repeat("x", 5000) + `"}`},
}

// admissionConfig is a daemon with every face that admits: the token and a
// token file, the operator's token, a tool site, previews, the gateway
// tools; bodies up to 4 KiB.
func admissionConfig(t *testing.T, token bool, scope string) config.Config {
	t.Helper()
	c := testConfig(t)
	for _, d := range []string{"sub", "users/u1/inner", "users/u2"} {
		if err := os.MkdirAll(filepath.Join(c.Root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c.Site = t.TempDir()
	if err := os.CopyFS(c.Site, os.DirFS("../examples/site")); err != nil {
		t.Fatal(err)
	}
	if token {
		c.AuthToken = admAgent
	}
	if token && scope == "" {
		c.TokensFile = filepath.Join(t.TempDir(), "tokens.json")
		if err := os.WriteFile(c.TokensFile, []byte(`{"tokens":[`+tokenLine("ro", "ro-tok", `,"readOnly":true`)+`,`+
			tokenLine("bound", "bound-tok", `,"scope":"users/u1"`)+`,`+tokenLine("noexec", "noexec-tok", `,"exec":false`)+`]}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.OperatorToken = admOperator
	c.GatewayTools = true
	c.ProcessTools = true
	c.Previews = true
	c.ExecNetwork = "false"
	c.MaxBodyBytes = 4096
	c.ScopePath = scope
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAdmissionAnswers sends every admission case to every endpoint that
// admits, on a daemon with a token, one without (the Host rule) and one
// with a static scope, and compares the answers (status, the headers
// clients read, a refusal's body; a WebSocket's close code and reason)
// with testdata/admission.golden: which rule answers, in which order, and
// with which bytes is the wire contract (docs/protocol.md).
func TestAdmissionAnswers(t *testing.T) {
	var out bytes.Buffer
	for _, d := range []struct {
		name  string
		token bool
		scope string
		cases []admissionCase
	}{
		{"token", true, "", admissionCases},
		{"no token", false, "", []admissionCase{
			{name: "admitted"},
			{name: "foreign host", host: "evil.example:{port}"},
			{name: "foreign host and origin", host: "evil.example:{port}", header: map[string]string{"Origin": "http://evil.example:{port}"}},
			{name: "loopback origin", header: map[string]string{"Origin": "http://localhost:5173"}},
			{name: "wrong method, foreign host", method: "wrong", host: "evil.example:{port}"},
		}},
		{"static scope", true, "sub", []admissionCase{
			{name: "admitted", header: bearer(admAgent)},
			{name: "scope conflict", header: map[string]string{"Authorization": "Bearer " + admAgent, "X-Scope-Path": "other"}},
			{name: "scope conflict, dots", header: map[string]string{"Authorization": "Bearer " + admAgent, "X-Scope-Path": "../x"}},
			{name: "no token"},
		}},
	} {
		c := admissionConfig(t, d.token, d.scope)
		r := start(t, c, nil)
		u, _ := url.Parse(r.url)
		for _, tc := range d.cases {
			for _, ep := range admissionEndpoints {
				method := ep.method
				if tc.method == "wrong" {
					if ep.wrong == "" {
						continue
					}
					method = ep.wrong
				}
				body := ep.body
				if tc.body != "" || tc.ctype != "" {
					if method != "POST" {
						continue
					}
					if tc.body != "" {
						body = tc.body
					}
				}
				answer := admissionAnswer(t, r.url, ep.path, method, body, ep.ws && tc.method == "", tc, u.Port(), c.Root)
				answer = elapsedMs.ReplaceAllString(answer, "${1}N")
				answer = strings.ReplaceAll(answer, c.Root, "$ROOT")
				answer = strings.ReplaceAll(answer, u.Port(), "$PORT")
				fmt.Fprintf(&out, "%s | %s | %s %s\n\t%s\n", d.name, tc.name, method, ep.path, answer)
			}
		}
		r.stop()
	}
	golden := filepath.Join("testdata", "admission.golden")
	if *updateAdmission {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update-admission to write it)", err)
	}
	if got := out.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("line %d:\n got %s\nwant %s", i+1, g, w)
			}
		}
	}
}

// admissionAnswer sends one request and describes the answer.
func admissionAnswer(t *testing.T, base, path, method, body string, ws bool, tc admissionCase, port, root string) string {
	t.Helper()
	u := base + path
	if tc.query != "" {
		u += "?" + tc.query
	}
	hdr := http.Header{}
	for k, v := range tc.header {
		hdr.Set(k, strings.NewReplacer("{port}", port, "$ROOT", root).Replace(v))
	}
	host := strings.ReplaceAll(tc.host, "{port}", port)
	if ws {
		if host != "" {
			hdr.Set("Host", host)
		}
		conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(u, "http"), hdr)
		if err != nil {
			if resp == nil {
				t.Fatalf("%s: %v", path, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return describeHTTP(resp, b)
		}
		defer conn.Close()
		if strings.HasPrefix(path, "/gateway") {
			_ = conn.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools.approve","params":{"requestId":"r1","approved":true}}`))
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, msg, err := conn.ReadMessage()
		var ce *websocket.CloseError
		switch {
		case err == nil && bytes.HasPrefix(msg, []byte("SSH-2.0-")):
			return "101, then SSH"
		case err == nil:
			return "101, then " + string(msg)
		case errors.As(err, &ce):
			return fmt.Sprintf("101, then close %d %q", ce.Code, ce.Text)
		default:
			return "101, then " + err.Error()
		}
	}
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = hdr
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	if host != "" {
		req.Host = host
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return describeHTTP(resp, b)
}

// describeHTTP is an answer's status, the headers clients read, and its
// body: whole for a refusal or a tool call, its first line for another
// success (tool lists and metrics change with the tree).
func describeHTTP(resp *http.Response, b []byte) string {
	var s strings.Builder
	fmt.Fprintf(&s, "%d", resp.StatusCode)
	for _, h := range []string{"Content-Type", "WWW-Authenticate", "Allow", "X-Content-Type-Options", "Retry-After", "Cache-Control", "Location"} {
		if v := resp.Header.Get(h); v != "" {
			fmt.Fprintf(&s, " [%s: %s]", h, v)
		}
	}
	if p := resp.Request.URL.Path; resp.StatusCode < 300 && p != "/mcp" && p != "/execute" {
		line, _, _ := bytes.Cut(b, []byte("\n"))
		if len(line) > 60 {
			line = line[:60]
		}
		fmt.Fprintf(&s, " %q…", line)
		return s.String()
	}
	fmt.Fprintf(&s, " %q", b)
	return s.String()
}

// TestGuardOncePerRequest: the Origin and Host rules judge each request
// once, whichever endpoint admits it (internal/admit applies them; neither
// the mux nor a face runs them again): an admitted request, a refused one
// and one with a method the endpoint refuses each add one to the guard's
// count.
func TestGuardOncePerRequest(t *testing.T) {
	c := admissionConfig(t, true, "")
	r := start(t, c, nil)
	u, _ := url.Parse(r.url)
	for _, tc := range []admissionCase{
		{name: "admitted", header: bearer(admAgent)},
		{name: "operator", header: bearer(admOperator)},
		{name: "no token"},
		{name: "foreign origin", header: map[string]string{"Authorization": "Bearer " + admAgent, "Origin": "http://evil.example"}},
		{name: "wrong method", method: "wrong", header: bearer(admAgent)},
	} {
		for _, ep := range admissionEndpoints {
			method := ep.method
			if tc.method == "wrong" {
				if ep.wrong == "" {
					continue
				}
				method = ep.wrong
			}
			before := r.d.guard.Checks()
			answer := admissionAnswer(t, r.url, ep.path, method, ep.body, ep.ws && tc.method == "", tc, u.Port(), c.Root)
			if n := r.d.guard.Checks() - before; n != 1 {
				t.Errorf("%s %s %s: the guard judged it %d times (%s)", tc.name, method, ep.path, n, answer)
			}
		}
	}
}

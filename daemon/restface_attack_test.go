package daemon

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// This file: POST /execute and GET /tools played by a hostile HTTP client
// (docs/security.md, "Attack review: the REST face, the client and the
// bridge").

// restAttackDaemon is a daemon with a token and bodies up to 64 KiB.
func restAttackDaemon(t *testing.T) (*running, string) {
	t.Helper()
	c := testConfig(t)
	c.AuthToken = "tok"
	c.MaxBodyBytes = 64 << 10
	if err := os.MkdirAll(filepath.Join(c.Root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	t.Cleanup(func() { r.stop() })
	return r, c.Root
}

// rawExchange writes req on a new connection and returns the answers'
// status lines and bodies, read until the daemon closes the connection or
// sends nothing for 3 s.
func rawExchange(t *testing.T, base, req string) (status, body []string) {
	t.Helper()
	cn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	if _, err := io.WriteString(cn, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(cn)
	for {
		cn.SetReadDeadline(time.Now().Add(3 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return status, body
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		status, body = append(status, resp.Status), append(body, string(b))
	}
}

// TestAttackRESTBodies: bodies at and past the limit (declared or
// chunked), bodies that are not one JSON object, keys that differ in case
// or repeat, deep nesting, huge arrays, arguments and fields of the wrong
// types, odd tool names. Each is answered (400, 404, 413, or the tool's
// result) without running another tool than MCP would run for the same
// call. Before the fix a key that differs in case ("Tool_Name") was read as
// tool_name (json.Unmarshal ignores case, the MCP SDK does not), so
// {"tool_name":"list_allowed_directories","Tool_Name":"write_file",...}
// wrote a file where MCP would have listed directories, and a second JSON
// value after the first was ignored.
func TestAttackRESTBodies(t *testing.T) {
	r, root := restAttackDaemon(t)
	auth := bearer("tok")
	exec := func(body string) (int, string) { return send(t, http.MethodPost, r.url+"/execute", body, auth) }
	list := `{"tool_name":"list_allowed_directories","arguments":{}}`
	pad := func(s string, n int) string { return s + strings.Repeat(" ", n-len(s)) }
	for _, tc := range []struct {
		name, body string
		status     int
		has        string
	}{
		{"at the limit", pad(list, 64<<10), 200, `"status":"success"`},
		{"one past the limit", pad(list, 64<<10+1), 413, "the limit is 65536 bytes"},
		{"not JSON", "hello", 400, "Invalid request"},
		{"empty", "", 400, "Invalid request"},
		{"an array", `[` + list + `]`, 400, "Invalid request"},
		{"null", `null`, 400, "tool_name is missing"},
		{"a second value after the first", list + `{"tool_name":"write_file","arguments":{"path":"p2","content":"x"}}`, 400, "Invalid request"},
		{"garbage after the value", list + `xx`, 400, "Invalid request"},
		{"key in another case", `{"tool_name":"list_allowed_directories","Tool_Name":"write_file","arguments":{"path":"p1","content":"x"}}`, 400, `key \"Tool_Name\"`},
		{"arguments in another case", `{"tool_name":"write_file","Arguments":{"path":"p3","content":"x"}}`, 400, `key \"Arguments\"`},
		{"timeout in another case", `{"tool_name":"list_allowed_directories","arguments":{},"TIMEOUT":0.001}`, 400, `key \"TIMEOUT\"`},
		{"a key twice: the last, as on MCP", `{"tool_name":"write_file","tool_name":"list_allowed_directories","arguments":{}}`, 200, `"status":"success"`},
		{"unknown keys are ignored", `{"tool_name":"list_allowed_directories","arguments":{},"x":1}`, 200, `"status":"success"`},
		{"nested 20000 deep", `{"tool_name":"list_allowed_directories","arguments":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, 400, "exceeded max depth"},
		{"arguments nested deep", `{"tool_name":"write_file","arguments":{"path":"p4","content":"x","z":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}}`, 200, "Successfully wrote to p4"},
		{"a huge array", `{"tool_name":"read_multiple_files","arguments":{"paths":[` + strings.Repeat(`"x",`, 12000) + `"x"]}}`, 200, "no such file or directory"},
		{"tool_name a number", `{"tool_name":5,"arguments":{}}`, 400, "Invalid request"},
		{"arguments a string", `{"tool_name":"write_file","arguments":"x"}`, 400, `"status":"error"`},
		{"an argument of the wrong type", `{"tool_name":"write_file","arguments":{"path":5,"content":"x"}}`, 400, `"status":"error"`},
		{"timeout a string", `{"tool_name":"list_allowed_directories","arguments":{},"timeout":"1"}`, 400, "Invalid request"},
		{"timeout negative", `{"tool_name":"list_allowed_directories","arguments":{},"timeout":-1}`, 400, "timeout must be"},
		{"timeout huge", `{"tool_name":"list_allowed_directories","arguments":{},"timeout":1e300}`, 400, "timeout must be"},
		{"unknown tool", `{"tool_name":"nope","arguments":{}}`, 404, "Unknown tool"},
		{"a tool name in another case", `{"tool_name":"LIST_ALLOWED_DIRECTORIES","arguments":{}}`, 404, "Unknown tool"},
		{"a tool name with dots", `{"tool_name":"../../bin/sh","arguments":{}}`, 404, "Unknown tool"},
		{"a tool name with a NUL", `{"tool_name":"list_allowed_directories\u0000","arguments":{}}`, 404, "Unknown tool"},
		{"a long tool name", `{"tool_name":"` + strings.Repeat("a", 60000) + `","arguments":{}}`, 404, "Unknown tool"},
		{"an empty tool name", `{"tool_name":"","arguments":{}}`, 400, "tool_name is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := exec(tc.body)
			if status != tc.status || !strings.Contains(body, tc.has) {
				t.Errorf("%d %.300s; want %d with %s", status, body, tc.status, tc.has)
			}
		})
	}
	for _, p := range []string{"p1", "p2", "p3"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s was written by a call MCP would not have made", p)
		}
	}
	// A chunked body past the limit (no Content-Length to judge first).
	req, _ := http.NewRequest(http.MethodPost, r.url+"/execute", io.MultiReader(strings.NewReader(pad(list, 64<<10+1))))
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(b), "exceeds 65536 bytes") {
		t.Errorf("a chunked body past the limit: %d %s", resp.StatusCode, b)
	}
}

// TestAttackRESTHeaders: X-Scope-Path spelt to leave the root (dots,
// encoded dots, backslashes, a NUL, 100 KiB), Transfer-Encoding tricks
// (chunked with a Content-Length hiding a second request, codings net/http
// does not speak, a chunk size that overflows) and Expect: 100-continue
// without a body. A scope is the root or a directory in it, or the call is
// refused; net/http answers each framing trick before the handler, or the
// handler sees an empty or cut body.
func TestAttackRESTHeaders(t *testing.T) {
	r, root := restAttackDaemon(t)
	list := `{"tool_name":"list_allowed_directories","arguments":{}}`
	for _, tc := range []struct{ scope, dir string }{
		{"..", ""}, {"../x", ""}, {"sub/../..", ""}, {"..%2f..", ""}, {`..\..`, ""},
		{"%2e%2e", "/%2e%2e"}, // not URL-decoded: a directory of that name, inside
		{"/", ""}, {"sub", "/sub"}, {"//sub", "/sub"},
		{strings.Repeat("a/", 50<<10), ""}, // past fsops.MaxPathBytes
	} {
		status, body := send(t, http.MethodPost, r.url+"/execute", list, map[string]string{"Authorization": "Bearer tok", "X-Scope-Path": tc.scope})
		switch {
		case strings.Contains(tc.scope, ".."):
			if status != 400 || !strings.Contains(body, "Invalid scope path") {
				t.Errorf("scope %q: %d %.300s", tc.scope, status, body)
			}
		case len(tc.scope) > fsops.MaxPathBytes:
			if status != 400 || !strings.Contains(body, "file name too long") || len(body) > 4096 {
				t.Errorf("scope of %d bytes: %d %.300s (%d bytes)", len(tc.scope), status, body, len(body))
			}
		case status != 200 || !strings.Contains(body, "- "+root+tc.dir+`"`):
			t.Errorf("scope %.40q: %d %.300s; want %s", tc.scope, status, body, root+tc.dir)
		}
	}
	head := "POST /execute HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok\r\nContent-Type: application/json\r\n"
	smuggled := "POST /execute HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok\r\nContent-Type: application/json\r\nContent-Length: 72\r\n\r\n" +
		`{"tool_name":"write_file","arguments":{"path":"smuggled","content":"x"}}`
	for _, tc := range []struct{ name, req, status, has string }{
		{"scope with a NUL", head + "X-Scope-Path: a\x00b\r\nContent-Length: " + fmt.Sprint(len(list)) + "\r\n\r\n" + list, "400 Bad Request", ""},
		{"chunked and a length", head + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled, "400 Bad Request", "unexpected end of JSON input"},
		{"two codings", head + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", "501 Not Implemented", ""},
		{"chunked twice", head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "501 Not Implemented", ""},
		{"chunk size overflow", head + "Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n", "400 Bad Request", "chunk length too large"},
		{"expect without a body", head + "Expect: 100-continue\r\nContent-Length: 0\r\n\r\n", "400 Bad Request", "unexpected end of JSON input"},
		{"two lengths", head + "Content-Length: 4\r\nContent-Length: 5\r\n\r\n" + list, "400 Bad Request", ""},
	} {
		status, body := rawExchange(t, r.url, tc.req)
		if tc.name == "chunked and a length" && len(status) > 1 {
			// Transfer-Encoding wins, as RFC 9112 6.3 says, but net/http
			// keeps the connection, so what follows the chunked body is
			// the client's next request (here with its own token): the
			// daemon does not close as 6.3 asks (docs/security.md, left).
			status, body = status[:1], body[:1]
		}
		if len(status) != 1 || status[0] != tc.status || !strings.Contains(body[0], tc.has) {
			t.Errorf("%s: %q %.300q; want one answer, %s with %s", tc.name, status, body, tc.status, tc.has)
		}
	}
}

// TestAttackRESTAuditRefusals: on /execute a call the registry judges
// leaves one audit line, refused ones included (an unknown tool "unknown",
// a read-only token's write "denied"); a request refused before a call
// exists (no token 401, a body that is not a call 400, one over the limit
// 413) leaves none: the audit log records calls, the daemon's log and
// metrics the refusals of admission.
func TestAttackRESTAuditRefusals(t *testing.T) {
	c := testConfig(t)
	c.AuthToken = "tok"
	c.MaxBodyBytes = 4096
	c.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	c.TokensFile = filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(c.TokensFile, []byte(`{"tokens":[`+tokenLine("ro", "ro-tok", `,"readOnly":true`)+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	for _, tc := range []struct {
		token, body string
		status      int
	}{
		{"", `{"tool_name":"write_file","arguments":{"path":"a","content":"x"}}`, 401},
		{"tok", `{"tool_name":"write_file","Tool_Name":"exec","arguments":{}}`, 400},
		{"tok", `{"tool_name":"write_file","arguments":{"content":"` + strings.Repeat("x", 5000) + `"}}`, 413},
		{"tok", `{"tool_name":"no_such_tool","arguments":{}}`, 404},
		{"ro-tok", `{"tool_name":"write_file","arguments":{"path":"a","content":"x"}}`, 200},
	} {
		if status, body := send(t, http.MethodPost, r.url+"/execute", tc.body, bearer(tc.token)); status != tc.status {
			t.Errorf("%.60s: %d %.200s; want %d", tc.body, status, body, tc.status)
		}
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(c.AuditLog)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"tool":"no_such_tool"`) || !strings.Contains(lines[0], `"outcome":"unknown"`) ||
		!strings.Contains(lines[1], `"caller":"ro"`) || !strings.Contains(lines[1], `"outcome":"denied"`) {
		t.Errorf("audit log:\n%s", b)
	}
}

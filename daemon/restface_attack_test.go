package daemon

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// rawExchange writes req on a new connection and returns the first
// answer's status line and body (empty when the connection closed first).
func rawExchange(t *testing.T, base, req string) (status, body string) {
	t.Helper()
	cn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	cn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(cn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(cn), nil)
	if err != nil {
		return "", ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.Status, string(b)
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

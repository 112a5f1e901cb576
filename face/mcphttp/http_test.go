package mcphttp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/fsops"
)

const listBody = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

func callBody(tool string, args any) string {
	a, _ := json.Marshal(args)
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, a)
}

// rawPost sends one request the way an SDK client would, with hdr on top.
func rawPost(t *testing.T, url, method, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		switch {
		case k == "Host":
			req.Host = v
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestHTTPStatuses covers the statuses of docs/protocol.md's /mcp table and
// the checks around it, in the order they are applied; 503 is
// TestClosedServer's, 429 TestInflightPerAddress's and the batch limit
// TestBatchLimit's (bounds_test.go).
func TestHTTPStatuses(t *testing.T) {
	authed := newEnv(t, func(o *Options) { o.AuthToken = "s3cret" })
	static := newEnv(t, func(o *Options) { o.StaticScope = "users/u1" })
	plain := newEnv(t, func(o *Options) {
		o.AllowedOrigins = []string{"https://app.example.com"}
		o.MaxBodyBytes = 1024
	})
	ok := map[string]string{"Authorization": "Bearer s3cret"}
	tests := []struct {
		name       string
		env        *env
		method     string
		body       string
		hdr        map[string]string
		wantStatus int
		wantBody   string // substring
		wantCT     string // prefix of Content-Type, when set
	}{
		{"no token", authed, "POST", listBody, nil, 401, `{"error":"Unauthorized","message":"Invalid or missing authentication token"}`, "application/json"},
		{"wrong token", authed, "POST", listBody, map[string]string{"Authorization": "Bearer nope"}, 401, `"Unauthorized"`, ""},
		{"token without Bearer", authed, "POST", listBody, map[string]string{"Authorization": "s3cret"}, 401, `"Unauthorized"`, ""},
		{"good token", authed, "POST", listBody, ok, 200, `"read_text_file"`, "application/json"},
		{"auth before root check", authed, "POST", listBody, map[string]string{"X-Root-Dir": "/elsewhere"}, 401, `"Unauthorized"`, ""},
		{"root mismatch", authed, "POST", listBody, map[string]string{"Authorization": "Bearer s3cret", "X-Root-Dir": "/elsewhere"}, 403, `{"error":"Root directory mismatch","message":"Server is configured for `, ""},
		{"root match", plain, "POST", listBody, map[string]string{"X-Root-Dir": "ROOT"}, 200, `"tools"`, ""},
		{"root undefined ignored", plain, "POST", listBody, map[string]string{"X-Root-Dir": "undefined"}, 200, `"tools"`, ""},
		{"scope conflict", static, "POST", listBody, map[string]string{"X-Scope-Path": "users/u2"}, 400, `{"error":"Scope conflict","message":"Server was started with static scope 'users/u1', but request also specified scope 'users/u2'. Use one or the other, not both."}`, ""},
		{"scope traversal", plain, "POST", listBody, map[string]string{"X-Scope-Path": "../etc"}, 400, `{"error":"Invalid scope path","message":"Scope path must not contain path traversal sequences"}`, ""},
		{"scope inner traversal", plain, "POST", listBody, map[string]string{"X-Scope-Path": "users/../../x"}, 400, `"Invalid scope path"`, ""},
		{"scope dots", plain, "POST", listBody, map[string]string{"X-Scope-Path": "a/.."}, 400, `"Invalid scope path"`, ""},
		{"scope ok", plain, "POST", listBody, map[string]string{"X-Scope-Path": "/users/u1"}, 200, `"tools"`, ""},
		{"GET is 405", plain, "GET", "", nil, 405, `"Method not allowed"`, ""},
		{"DELETE is 405", plain, "DELETE", "", nil, 405, `"Method not allowed"`, ""},
		{"PUT is 405", plain, "PUT", listBody, nil, 405, `"Method not allowed"`, ""},
		{"foreign origin", plain, "POST", listBody, map[string]string{"Origin": "http://evil.example"}, 403, `Origin http://evil.example is not allowed`, ""},
		{"allowed origin", plain, "POST", listBody, map[string]string{"Origin": "https://app.example.com"}, 200, `"tools"`, ""},
		{"loopback origin", plain, "POST", listBody, map[string]string{"Origin": "http://localhost:5173"}, 200, `"tools"`, ""},
		{"loopback ip origin", plain, "POST", listBody, map[string]string{"Origin": "http://127.0.0.1:8080"}, 200, `"tools"`, ""},
		{"rebinding host", plain, "POST", callBody("read_text_file", map[string]any{"path": "a.txt"}), map[string]string{"Host": "evil.example"}, 403, `"Forbidden host"`, ""},
		{"proxied host with token", authed, "POST", callBody("read_text_file", map[string]any{"path": "a.txt"}), map[string]string{"Host": "api.example.com", "Authorization": "Bearer s3cret"}, 200, `line1`, ""},
		{"proxied host with token, SDK path", authed, "POST", listBody, map[string]string{"Host": "api.example.com", "Authorization": "Bearer s3cret"}, 200, `"tools"`, ""},
		{"loopback host name", plain, "POST", callBody("read_text_file", map[string]any{"path": "a.txt"}), map[string]string{"Host": "localhost"}, 200, `line1`, ""},
		{"null origin", plain, "POST", listBody, map[string]string{"Origin": "null"}, 403, `not allowed`, ""},
		{"body too large", plain, "POST", callBody("write_file", map[string]any{"path": "x", "content": strings.Repeat("a", 2000)}), nil, 413, `the limit is 1024 bytes`, ""},
		{"json only accept", plain, "POST", listBody, map[string]string{"Accept": "application/json"}, 200, `"tools"`, "application/json"},
		{"sse only accept", plain, "POST", listBody, map[string]string{"Accept": "text/event-stream"}, 200, "event: message\n", "text/event-stream"},
		{"no accept", plain, "POST", listBody, map[string]string{"Accept": ""}, 200, `"tools"`, "application/json"},
		{"unacceptable", plain, "POST", listBody, map[string]string{"Accept": "text/html"}, 406, `"Not acceptable"`, ""},
		{"unacceptable, a trailing comma", plain, "POST", listBody, map[string]string{"Accept": "text/html,"}, 406, `"Not acceptable"`, ""},
		{"wrong content type", plain, "POST", listBody, map[string]string{"Content-Type": "text/plain"}, 415, "Content-Type", ""},
		{"wrong content type on a call", plain, "POST", callBody("read_text_file", map[string]any{"path": "a.txt"}), map[string]string{"Content-Type": "text/plain"}, 415, "Content-Type", ""},
		{"json with charset", plain, "POST", callBody("read_text_file", map[string]any{"path": "a.txt"}), map[string]string{"Content-Type": "application/json; charset=utf-8"}, 200, "line1", ""},
		{"not json", plain, "POST", "{nope", nil, 400, "", ""},
		{"notification is 202", plain, "POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil, 202, "", ""},
		{"tools/list without initialize", plain, "POST", listBody, nil, 200, `"list_allowed_directories"`, ""},
		{"protocol 2025-06-18", plain, "POST", listBody, map[string]string{"MCP-Protocol-Version": "2025-06-18"}, 200, `"tools"`, ""},
		{"protocol 2025-11-25", plain, "POST", listBody, map[string]string{"MCP-Protocol-Version": "2025-11-25"}, 200, `"tools"`, ""},
		{"unknown protocol", plain, "POST", listBody, map[string]string{"MCP-Protocol-Version": "1999-01-01"}, 400, "Unsupported protocol version", ""},
		{"initialize 2025-11-25", plain, "POST", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil, 200, `"protocolVersion":"2025-11-25"`, ""},
		// 2026-07-28 has no initialize (version and client info travel in
		// each request's _meta): an initialize asking for it is answered
		// with the newest version that has one.
		{"initialize asking 2026-07-28", plain, "POST", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil, 200, `"protocolVersion":"2025-11-25"`, ""},
		{"tools/call 2026-07-28 (SDK path)", plain, "POST", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"a.txt"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`,
			map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "read_text_file"}, 200, `"text":"line1\nline2\nline3\n"`, "application/json"},
		{"initialize", plain, "POST", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil, 200, `"protocolVersion":"2025-06-18"`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			for k, v := range tc.hdr {
				hdr[k] = strings.ReplaceAll(v, "ROOT", tc.env.srv.opts.RootDir)
			}
			resp, body := rawPost(t, tc.env.url(), tc.method, tc.body, hdr)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d; body %q", resp.StatusCode, tc.wantStatus, body)
			}
			if !strings.Contains(body, tc.wantBody) {
				t.Errorf("body %q does not contain %q", body, tc.wantBody)
			}
			if tc.wantCT != "" && !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.wantCT) {
				t.Errorf("Content-Type %q, want %q", resp.Header.Get("Content-Type"), tc.wantCT)
			}
			if tc.wantStatus == 405 && resp.Header.Get("Allow") != "POST" {
				t.Errorf("405 without Allow: POST")
			}
			if resp.Header.Get("Mcp-Session-Id") != "" {
				t.Errorf("stateless server sent Mcp-Session-Id")
			}
		})
	}
}

// TestBodyLimitChunked: a body without Content-Length is cut while read.
func TestBodyLimitChunked(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxBodyBytes = 1024 })
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(callBody("write_file", map[string]any{"path": "x", "content": strings.Repeat("a", 4096)})))
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", e.url(), pr)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(e.root, "x")); err == nil {
		t.Error("oversize write was applied")
	}
}

// TestClosedServer: after Close the handler answers 503, Close is idempotent.
func TestClosedServer(t *testing.T) {
	e := newEnv(t)
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	resp, _ := rawPost(t, e.url(), "POST", listBody, nil)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", resp.StatusCode)
	}
}

func TestNewRequiresWorkspace(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without a workspace succeeded")
	}
}

// toolNames lists the tools a session sees.
func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Title == "" || tool.Description == "" || tool.Annotations == nil {
			t.Errorf("tool %s lacks a title, description or annotations", tool.Name)
		}
	}
	return names
}

func TestToolList(t *testing.T) {
	e := newEnv(t)
	got := strings.Join(toolNames(t, e.connect(t, nil)), " ")
	want := "create_directory directory_tree edit_file exec get_file_info grep list_allowed_directories list_directory list_directory_with_sizes move_file read_media_file read_multiple_files read_text_file search_files write_file"
	if got != want {
		t.Errorf("tools\n got %s\nwant %s", got, want)
	}
}

// TestMemoryWorkspace: file tools only, and they work on the memory tree.
func TestMemoryWorkspace(t *testing.T) {
	ws := fsops.NewMemory("/mem", fsops.Options{})
	defer ws.Close()
	srv, err := New(Options{Workspace: ws, Registry: wsRegistry(ws, nil, 0), RootDir: "/mem"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cs := connectStdio(t, srv)
	names := strings.Join(toolNames(t, cs), " ")
	if strings.Contains(names, "exec") || strings.Contains(names, "grep") {
		t.Errorf("memory workspace lists exec/grep: %s", names)
	}
	if got := call(t, cs, "write_file", map[string]any{"path": "d/f.txt", "content": "mem\n"}); got != "text:\nSuccessfully wrote to d/f.txt\n" {
		t.Errorf("write: %q", got)
	}
	if got := call(t, cs, "read_text_file", map[string]any{"path": "/d/f.txt"}); got != "text:\nmem\n\n" {
		t.Errorf("read: %q", got)
	}
	if got := call(t, cs, "list_allowed_directories", map[string]any{}); got != "text:\nAllowed directories:\n- /mem\n" {
		t.Errorf("allowed: %q", got)
	}
	if got := call(t, cs, "read_text_file", map[string]any{"path": "../x"}); got != "isError: true\ntext:\nPath escapes scope boundary: ../x\n" {
		t.Errorf("escape: %q", got)
	}
}

// TestScopeIsolation: two clients with different X-Scope-Path work at the
// same time and never see each other's files.
func TestScopeIsolation(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	for _, u := range []string{"u1", "u2", "u3"} {
		cs := e.connect(t, http.Header{"X-Scope-Path": {"users/" + u}})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				p := fmt.Sprintf("own-%d.txt", i)
				if got := call(t, cs, "write_file", map[string]any{"path": p, "content": u}); !strings.Contains(got, "Successfully wrote") {
					t.Errorf("%s write: %s", u, got)
				}
				if got := call(t, cs, "read_text_file", map[string]any{"path": "/" + p}); got != "text:\n"+u+"\n" {
					t.Errorf("%s read back: %q", u, got)
				}
			}
			if got := call(t, cs, "list_allowed_directories", map[string]any{}); !strings.HasSuffix(got, "/users/"+u+"\n") {
				t.Errorf("%s allowed dirs: %q", u, got)
			}
			others := map[string]string{"u1": "u2", "u2": "u1", "u3": "u1"}
			for _, other := range []string{"../" + others[u] + "/secret.txt", "../../a.txt", "/../" + others[u] + "/f.txt"} {
				got := call(t, cs, "read_text_file", map[string]any{"path": other})
				if got != "isError: true\ntext:\nPath escapes scope boundary: "+other+"\n" {
					t.Errorf("%s read %s: %q", u, other, got)
				}
			}
			if u == "u3" { // a scope that did not exist: exec creates it
				if got := call(t, cs, "exec", map[string]any{"command": "pwd"}); !strings.HasSuffix(got, "/users/u3\n") {
					t.Errorf("exec in new scope: %q", got)
				}
			}
		}()
	}
	wg.Wait()
	for _, u := range []string{"u1", "u2", "u3"} {
		b, err := os.ReadFile(filepath.Join(e.root, "users", u, "own-7.txt"))
		if err != nil || string(b) != u {
			t.Errorf("%s file on disk: %q %v", u, b, err)
		}
	}
}

// TestConcurrentCalls: 200 tool calls in flight at once over one HTTP
// client, each with its own result.
func TestConcurrentCalls(t *testing.T) {
	e := newEnv(t)
	cs := e.connect(t, nil)
	const n = 200
	for i := range n {
		os.WriteFile(filepath.Join(e.root, fmt.Sprintf("c%03d.txt", i)), []byte(fmt.Sprintf("content %d", i)), 0o644)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var got, want string
			switch i % 3 {
			case 0:
				got = call(t, cs, "read_text_file", map[string]any{"path": fmt.Sprintf("c%03d.txt", i)})
				want = fmt.Sprintf("text:\ncontent %d\n", i)
			case 1:
				got = call(t, cs, "write_file", map[string]any{"path": fmt.Sprintf("w/%03d.txt", i), "content": "x"})
				want = fmt.Sprintf("text:\nSuccessfully wrote to w/%03d.txt\n", i)
			default:
				got = call(t, cs, "get_file_info", map[string]any{"path": fmt.Sprintf("c%03d.txt", i)})
				want = fmt.Sprintf(`"path": "c%03d.txt"`, i)
			}
			if !strings.Contains(got, want) {
				t.Errorf("call %d: got %q want %q", i, got, want)
			}
		}()
	}
	close(start)
	wg.Wait()
}

// TestStaticScope: with --scopePath the whole endpoint is the scope; paths
// resolve inside it and cannot leave it, and exec runs in it.
func TestStaticScope(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.StaticScope = "users/u1" })
	cs := e.connect(t, nil)
	tests := []struct{ tool, args, want string }{
		{"list_directory", `{"path":"."}`, "text:\n[FILE] f.txt\n"},
		{"read_text_file", `{"path":"/f.txt"}`, "text:\nu1 secret\n\n"},
		{"read_text_file", `{"path":"../u2/secret.txt"}`, "isError: true\ntext:\nPath escapes scope boundary: ../u2/secret.txt\n"},
		{"list_allowed_directories", `{}`, "text:\nAllowed directories:\n- " + filepath.Join(e.root, "users/u1") + "\n"},
		{"exec", `{"command":"cat f.txt"}`, "text:\nu1 secret\n"},
	}
	for _, tc := range tests {
		var args map[string]any
		json.Unmarshal([]byte(tc.args), &args)
		if got := call(t, cs, tc.tool, args); got != tc.want {
			t.Errorf("%s %s: got %q want %q", tc.tool, tc.args, got, tc.want)
		}
	}
}

package gatewayface_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/face/gatewayface"
	"github.com/agentbe/agentbe-daemon/face/restface"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

const token = "s3cret"

// testTools is a small provider on fsops: read (a file), slow (waits for
// its context). The table test switches to the real workspace tools once
// they are a provider (the package the mcphttp tool values move to): then
// newFaces registers that provider instead and /mcp is mcphttp's server.
func testTools() []registry.Tool {
	schema := map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []any{"path"}}
	fail := func(err error) *mcp.CallToolResult {
		res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "Error: " + err.Error()}}}
		if c := errcode.Of(err); c != "" {
			registry.WithCode(res, c)
		}
		return res
	}
	return []registry.Tool{
		{Name: "read", Description: "read a file", InputSchema: schema,
			Handler: func(ctx context.Context, c registry.Call) *mcp.CallToolResult {
				var a struct {
					Path *string `json:"path"`
				}
				if err := json.Unmarshal(c.Args, &a); err != nil || a.Path == nil {
					return fail(errcode.New(errcode.InvalidArgument, "read", "", "arguments must be {\"path\": string}"))
				}
				b, err := c.Workspace.ReadFile(*a.Path)
				if err != nil {
					return fail(err)
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
			}},
		{Name: "slow", Description: "waits", InputSchema: map[string]any{"type": "object"}, Timeout: 200 * time.Millisecond,
			Handler: func(ctx context.Context, c registry.Call) *mcp.CallToolResult {
				<-ctx.Done()
				time.Sleep(20 * time.Millisecond) // the registry's answer at the deadline comes first
				return fail(ctx.Err())
			}},
	}
}

type faces struct {
	srv *httptest.Server
	reg *registry.Registry
}

func newFaces(t testing.TB, ropts registry.Options, gwOpts ...func(*gatewayface.Options)) *faces {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "4k.txt"), bytes.Repeat([]byte("x"), 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(ropts)
	if err := reg.Set("test", testTools()); err != nil {
		t.Fatal(err)
	}
	rules := admit.Rules{Guard: httpguard.New(httpguard.Options{AuthToken: token}), Token: httpguard.NewToken(token), RootDir: root, MaxBody: 1 << 20}
	mux := http.NewServeMux()
	restface.New(restface.Options{Registry: reg, Workspace: ws, Admit: rules}).Register(mux)
	gwo := gatewayface.Options{Registry: reg, Workspace: ws, Admit: rules, MaxInFlight: 2}
	for _, o := range gwOpts {
		o(&gwo)
	}
	mux.Handle("/gateway", gatewayface.New(gwo))
	// /mcp: a go-sdk server over the same registry, standing in for
	// mcphttp until mcphttp serves the registry.
	ms := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	for _, tl := range reg.List() {
		ms.AddTool(&mcp.Tool{Name: tl.Name, Description: tl.Description, InputSchema: tl.InputSchema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := reg.Call(ctx, req.Params.Name, registry.Call{Args: req.Params.Arguments, Workspace: ws, Face: "mcp-http"})
			return res, err
		})
	}
	mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	mux.Handle("/mcp", rules.Guard.Wrap(mh))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &faces{srv: srv, reg: reg}
}

type outcome struct {
	isError bool
	text    string
}

func (f *faces) rest(t testing.TB, tool string, args string) (int, restface.ExecuteResponse) {
	body := fmt.Sprintf(`{"tool_name":%q,"arguments":%s}`, tool, args)
	req, _ := http.NewRequest("POST", f.srv.URL+"/execute", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out restface.ExecuteResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func dialGateway(t testing.TB, url string, hdr http.Header) *websocket.Conn {
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(url, "http")+"/gateway", hdr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func authHdr() http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

type rpcResp struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func rpc(t testing.TB, c *websocket.Conn, msg string) rpcResp {
	if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	var r rpcResp
	_, b, err := c.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return r
}

func gwInvoke(t testing.TB, c *websocket.Conn, tool, args string) (rpcResp, outcome) {
	r := rpc(t, c, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":{"toolId":%q,"sessionId":"s","args":%s}}`, tool, args))
	if r.Error != nil {
		return r, outcome{}
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatal(err)
	}
	return r, outcome{res.IsError, restface.Text(&res)}
}

// TestFacesAgree runs one table of calls through /execute, /gateway and
// /mcp (go-sdk client) and asserts the same outcome on each.
func TestFacesAgree(t *testing.T) {
	f := newFaces(t, registry.Options{})
	gw := dialGateway(t, f.srv.URL, authHdr())
	cl := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil)
	cs, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearerRT{}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, tc := range []struct {
		name, tool, args string
		wantStatus       int
		wantErr          bool
		wantText         string
	}{
		{"good", "read", `{"path":"a.txt"}`, 200, false, "hello\n"},
		{"bad arguments", "read", `{"nope":1}`, 400, true, "arguments must be"},
		{"escape", "read", `{"path":"../etc/passwd"}`, 400, true, "path escapes"},
		{"missing file", "read", `{"path":"nope.txt"}`, 200, true, "no such file"},
		{"timeout", "slow", `{}`, 200, true, "timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, rr := f.rest(t, tc.tool, tc.args)
			if st != tc.wantStatus || (rr.Status == "error") != tc.wantErr || !strings.Contains(rr.Output, tc.wantText) {
				t.Fatalf("REST: %d %+v; want %d error=%v containing %q", st, rr, tc.wantStatus, tc.wantErr, tc.wantText)
			}
			if tc.wantErr && rr.Error != rr.Output {
				t.Errorf("REST error %q != output %q", rr.Error, rr.Output)
			}
			_, g := gwInvoke(t, gw, tc.tool, tc.args)
			mres, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: json.RawMessage(tc.args)})
			if err != nil {
				t.Fatal(err)
			}
			m := outcome{mres.IsError, restface.Text(mres)}
			rest := outcome{rr.Status == "error", rr.Output}
			if tc.name == "timeout" { // the elapsed time differs per call; the words do not
				for _, o := range []*outcome{&rest, &g, &m} {
					o.text = strings.SplitN(o.text, " after ", 2)[0]
				}
			}
			if g != rest || m != rest {
				t.Errorf("faces disagree:\nrest    %+v\ngateway %+v\nmcp     %+v", rest, g, m)
			}
		})
	}
	// Unknown tool: 404, CodeUnknownTool, and an MCP error.
	if st, _ := f.rest(t, "nope", `{}`); st != 404 {
		t.Errorf("REST unknown tool: %d, want 404", st)
	}
	if r, _ := gwInvoke(t, gw, "nope", `{}`); r.Error == nil || r.Error.Code != gatewayface.CodeUnknownTool {
		t.Errorf("gateway unknown tool: %+v", r.Error)
	}
}

type bearerRT struct{}

func (bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestSaturation: a full registry answers 429 with Retry-After on REST and
// CodeBusy on /gateway, promptly.
func TestSaturation(t *testing.T) {
	f := newFaces(t, registry.Options{MaxConcurrent: 1, QueueWait: 20 * time.Millisecond})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); f.rest(t, "slow", `{}`) }()
	defer wg.Wait()
	time.Sleep(50 * time.Millisecond)
	body := `{"tool_name":"read","arguments":{"path":"a.txt"}}`
	req, _ := http.NewRequest("POST", f.srv.URL+"/execute", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("REST busy: %d Retry-After=%q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	gw := dialGateway(t, f.srv.URL, authHdr())
	if r, _ := gwInvoke(t, gw, "read", `{"path":"a.txt"}`); r.Error == nil || r.Error.Code != gatewayface.CodeBusy {
		t.Errorf("gateway busy: %+v", r.Error)
	}
}

// TestBadToken: each face refuses a missing or wrong token its own way.
func TestBadToken(t *testing.T) {
	f := newFaces(t, registry.Options{})
	for _, tc := range []struct{ method, path, auth string }{
		{"GET", "/tools", ""}, {"GET", "/tools", "Bearer wrong"},
		{"POST", "/execute", ""}, {"POST", "/execute", "Bearer wrong"},
	} {
		req, _ := http.NewRequest(tc.method, f.srv.URL+tc.path, strings.NewReader(`{"tool_name":"read","arguments":{"path":"a.txt"}}`))
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("%s %s %q: %d, want 401", tc.method, tc.path, tc.auth, resp.StatusCode)
		}
	}
	for _, hdr := range []http.Header{nil, {"Authorization": {"Bearer wrong"}}} {
		c := dialGateway(t, f.srv.URL, hdr)
		_, _, err := c.ReadMessage()
		if !websocket.IsCloseError(err, 4001) {
			t.Errorf("gateway with %v: %v, want close 4001", hdr, err)
		}
	}
	// ?token= is accepted on /gateway.
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(f.srv.URL, "http")+"/gateway?token="+token, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r := rpc(t, c, `{"jsonrpc":"2.0","id":7,"method":"tools.list","params":{"sessionId":"s"}}`); r.Error != nil || !strings.Contains(string(r.Result), `"read"`) {
		t.Errorf("tools.list with ?token=: %s %+v", r.Result, r.Error)
	}
}

// TestGatewayProtocol: the JSON-RPC answers of /gateway over a real
// connection.
func TestGatewayProtocol(t *testing.T) {
	f := newFaces(t, registry.Options{})
	gw := dialGateway(t, f.srv.URL, authHdr())
	for _, tc := range []struct {
		name, msg string
		code      int // 0: a result
	}{
		{"parse error", `{"jsonrpc"`, -32700},
		{"invalid request", `{"jsonrpc":"1.0","id":1,"method":"tools.list"}`, -32600},
		{"method not found", `{"jsonrpc":"2.0","id":1,"method":"tools.nope"}`, -32601},
		{"invalid params", `{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":{"toolId":3}}`, -32602},
		{"no toolId", `{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":{"sessionId":"s"}}`, -32602},
		{"approve unknown", `{"jsonrpc":"2.0","id":1,"method":"tools.approve","params":{"requestId":"r1","approved":true}}`, gatewayface.CodeNoSuchRequest},
		{"approve bad params", `{"jsonrpc":"2.0","id":1,"method":"tools.approve","params":{"requestId":"r1"}}`, -32602},
		{"list", `{"jsonrpc":"2.0","id":1,"method":"tools.list","params":{"sessionId":"s"}}`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rpc(t, gw, tc.msg)
			switch {
			case tc.code == 0 && r.Error != nil:
				t.Fatalf("error %+v, want a result", r.Error)
			case tc.code != 0 && (r.Error == nil || r.Error.Code != tc.code):
				t.Fatalf("got %s %+v, want code %d", r.Result, r.Error, tc.code)
			}
		})
	}
	// A batch: answers in order, the notification unanswered.
	if err := gw.WriteMessage(websocket.TextMessage, []byte(`[{"jsonrpc":"2.0","id":"a","method":"tools.invoke","params":{"toolId":"read","args":{"path":"a.txt"}}},{"jsonrpc":"2.0","method":"tools.list"},{"jsonrpc":"2.0","id":"b","method":"x"}]`)); err != nil {
		t.Fatal(err)
	}
	_, b, err := gw.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var batch []rpcResp
	if err := json.Unmarshal(b, &batch); err != nil || len(batch) != 2 || string(batch[0].ID) != `"a"` || batch[0].Error != nil ||
		!strings.Contains(string(batch[0].Result), "hello") || batch[1].Error == nil || batch[1].Error.Code != -32601 {
		t.Fatalf("batch answer %s (%v)", b, err)
	}
	// An oversized message closes with 1009.
	big := dialGateway(t, f.srv.URL, authHdr())
	_ = big.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte(" "), gatewayface.DefaultMaxMessage+1))
	if _, _, err := big.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
		t.Errorf("oversized message: %v, want close 1009", err)
	}
}

// TestGatewayRateLimit: past the bucket, a JSON-RPC error and the
// connection stays up.
func TestGatewayRateLimit(t *testing.T) {
	f := newFaces(t, registry.Options{})
	gw := dialGateway(t, f.srv.URL, authHdr())
	limited := 0
	for i := range gatewayface.DefaultBurst + 20 {
		r := rpc(t, gw, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools.list"}`, i))
		if r.Error != nil {
			if r.Error.Code != gatewayface.CodeRateLimited {
				t.Fatalf("error %+v", r.Error)
			}
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("no request was rate limited")
	}
	time.Sleep(100 * time.Millisecond)
	if r := rpc(t, gw, `{"jsonrpc":"2.0","id":1,"method":"tools.list"}`); r.Error != nil {
		t.Fatalf("after a pause: %+v", r.Error)
	}
}

// TestGatewayInFlight: past MaxInFlight messages of one connection, busy.
func TestGatewayInFlight(t *testing.T) {
	f := newFaces(t, registry.Options{})
	gw := dialGateway(t, f.srv.URL, authHdr())
	for i := range 3 {
		msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools.invoke","params":{"toolId":"slow","args":{}}}`, i)
		if err := gw.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	_ = gw.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, b, err := gw.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var r rpcResp
	_ = json.Unmarshal(b, &r)
	if string(r.ID) != "2" || r.Error == nil || r.Error.Code != gatewayface.CodeBusy {
		t.Fatalf("first answer %s, want the third call refused busy", b)
	}
	for range 2 {
		if _, _, err := gw.ReadMessage(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRESTRequests: /tools, the timeout field, and malformed bodies.
func TestRESTRequests(t *testing.T) {
	f := newFaces(t, registry.Options{})
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.String()
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"tools", "GET", "/tools", "", 200, `{"tools":[{"name":"read","description":"read a file","input_schema":{`},
		{"tools by POST", "POST", "/tools", "", 405, "use GET"},
		{"execute by GET", "GET", "/execute", "", 405, "use POST"},
		{"not json", "POST", "/execute", "{", 400, "tool_name"},
		{"no tool", "POST", "/execute", `{"arguments":{}}`, 400, "tool_name is missing"},
		{"bad timeout", "POST", "/execute", `{"tool_name":"read","timeout":-1}`, 400, "timeout must be"},
		{"timeout lowers", "POST", "/execute", `{"tool_name":"slow","arguments":{},"timeout":0.05}`, 200, "timeout of 0.05s passed"},
		{"timeout never raises", "POST", "/execute", `{"tool_name":"slow","arguments":{},"timeout":60}`, 200, "timed out after 200ms"},
		{"too large", "POST", "/execute", `{"tool_name":"read","arguments":{"path":"` + strings.Repeat("x", 1<<20) + `"}}`, 413, "Request too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body := do(tc.method, tc.path, tc.body)
			if st != tc.status || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %.300s; want %d containing %q", st, body, tc.status, tc.want)
			}
		})
	}
}

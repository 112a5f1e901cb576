package mcphttp

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// stdioAnswer is one JSON-RPC response as a stdio client reads it.
type stdioAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestStdioBeforeInitialize: a request other than ping sent before initialize
// (single or in a batch) is refused with JSON-RPC's -32600 and a message
// naming the method and what to send first, never code 0; ping is answered;
// after initialize the same session serves tools/list.
func TestStdioBeforeInitialize(t *testing.T) {
	p, done := serveStdio(t)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(p.clientIn)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		l, ok := <-lines
		if !ok {
			t.Fatal("stdout closed early")
		}
		return l
	}
	send := func(s string) { io.WriteString(p.clientOut, s+"\n") }

	for _, tc := range []struct{ req, method string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "tools/list"},
		{`{"jsonrpc":"2.0","id":"two","method":"tools/call","params":{"name":"exec","arguments":{"command":"echo hi"}}}`, "tools/call"},
	} {
		send(tc.req)
		l := next()
		var a stdioAnswer
		if err := json.Unmarshal([]byte(l), &a); err != nil || a.Error == nil {
			t.Fatalf("%s before initialize: %q (%v)", tc.method, l, err)
		}
		if a.Error.Code != -32600 {
			t.Errorf("%s before initialize: code %d, want -32600: %s", tc.method, a.Error.Code, l)
		}
		for _, want := range []string{`"` + tc.method + `"`, "invalid during session initialization", `send "initialize" first`} {
			if !strings.Contains(a.Error.Message, want) {
				t.Errorf("%s before initialize: message %q lacks %q", tc.method, a.Error.Message, want)
			}
		}
	}
	// A batch: each refused element gets the code, the ping beside it its result.
	send(`[{"jsonrpc":"2.0","id":3,"method":"tools/list"},{"jsonrpc":"2.0","id":4,"method":"ping"}]`)
	var batch []stdioAnswer
	if l := next(); json.Unmarshal([]byte(l), &batch) != nil || len(batch) != 2 {
		t.Fatalf("batch before initialize: %q", l)
	}
	for _, a := range batch {
		switch string(a.ID) {
		case "3":
			if a.Error == nil || a.Error.Code != -32600 {
				t.Errorf("tools/list in a batch before initialize: %+v", a.Error)
			}
		case "4":
			if a.Error != nil || a.Result == nil {
				t.Errorf("ping in a batch before initialize: %+v", a.Error)
			}
		default:
			t.Errorf("unexpected id %s in batch answer", a.ID)
		}
	}

	send(`{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if l := next(); !strings.Contains(l, `"id":5,"result"`) {
		t.Fatalf("initialize after refusals: %s", l)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":6,"method":"tools/list"}`)
	if l := next(); !strings.Contains(l, `"id":6,"result"`) || !strings.Contains(l, `"name":"exec"`) {
		t.Fatalf("tools/list after initialize: %s", l)
	}
	p.clientOut.Close()
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
}

// TestFixUninitializedLeavesOtherLinesAlone: a result that quotes the SDK's
// wording (a file's text) and an error with a real code pass byte for byte.
func TestFixUninitializedLeavesOtherLinesAlone(t *testing.T) {
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"method \"x\" is invalid during session initialization"}]}}` + "\n",
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"method \"x\" is invalid during session initialization"}}` + "\n",
		`[{"jsonrpc":"2.0","id":3,"result":{"text":"is invalid during session initialization"}}]` + "\n",
		`not json is invalid during session initialization` + "\n",
	} {
		if got := string(fixUninitialized([]byte(line))); got != line {
			t.Errorf("changed:\n%s\ninto\n%s", line, got)
		}
	}
}

// TestSessionsBeforeInitialize: with sessions on, a POST of tools/list
// without a session (no initialize) gets the same -32600 as stdio, over SSE
// and as JSON; initialize still opens a session.
func TestSessionsBeforeInitialize(t *testing.T) {
	e := sessionsEnv(t, 0, 0)
	for _, accept := range []string{"application/json, text/event-stream", "application/json"} {
		req, _ := http.NewRequest("POST", e.url(), strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		data := string(body)
		if i := strings.Index(data, "data: "); i >= 0 {
			data = strings.TrimSpace(data[i+len("data: "):])
		}
		var a stdioAnswer
		if err := json.Unmarshal([]byte(data), &a); err != nil || a.Error == nil {
			t.Fatalf("Accept %s: %d %q (%v)", accept, resp.StatusCode, body, err)
		}
		if a.Error.Code != -32600 || !strings.Contains(a.Error.Message, `"tools/list" is invalid during session initialization: send "initialize" first`) {
			t.Errorf("Accept %s: tools/list before initialize answered %s", accept, body)
		}
	}
	cs, err := connectHTTP(t, e, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if len(toolNames(t, cs)) == 0 {
		t.Error("no tools after initialize")
	}
}

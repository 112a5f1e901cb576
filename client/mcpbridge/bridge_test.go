package mcpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBridgeAnswers: what a streamable HTTP server may answer, written
// back as the lines a stdio client reads: a JSON body, an event stream of
// several messages (a server request before the response), 202 for a
// notification (nothing written), an HTTP error as a JSON-RPC error for
// the request's id; a message over the size bound is refused without being
// sent, answered for the id found at its start. The session id and protocol version of initialize's answer go
// with the next request, and the session is ended (DELETE) at the end.
func TestBridgeAnswers(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	byMethod := map[string]http.Header{}
	deleted := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			mu.Lock()
			deleted = r.Header.Get("Mcp-Session-Id")
			mu.Unlock()
			return
		}
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		mu.Lock()
		byMethod[m.Method] = r.Header.Clone()
		mu.Unlock()
		switch m.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "s-1")
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-06-18"}}`)
		case "tools/call":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"elicitation/create\"}\n\n")
			io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\n")
			io.WriteString(w, "data:  \"id\":"+string(m.ID)+",\"result\":{}}\n\n")
		case "notifications/initialized":
			w.WriteHeader(http.StatusAccepted)
		case "boom":
			http.Error(w, "upstream exploded", http.StatusBadGateway)
		}
	}))
	defer srv.Close()

	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}`,
		`{"jsonrpc":"2.0","id":3,"method":"boom"}`,
		`{"jsonrpc":"2.0","id":4,"method":"big","params":"` + strings.Repeat("x", 300) + `"}`,
		"",
	}, "\n")
	var out bytes.Buffer
	// One call at a time, so that initialize's answer is in before the
	// next call reads the session's headers (a notification has a slot of
	// its own and may go at the same time, as no client sends one before
	// initialize's answer).
	err := Run(context.Background(), Options{URL: srv.URL + "/mcp", Token: "tok", MaxInFlight: 1, MaxMessage: 200}, strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18"}}`,
		`{"jsonrpc":"2.0","id":"srv-1","method":"elicitation/create"}`,
		`{"jsonrpc":"2.0","id":2,"result":{}}`,
	}
	if len(lines) != 5 {
		t.Fatalf("%d lines written; want 5:\n%s", len(lines), out.String())
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d: %s; want %s", i+1, lines[i], w)
		}
	}
	// The last two in either order: the oversized message is refused by
	// the reading loop while request 3 may still be in flight.
	rest := lines[3] + "\n" + lines[4]
	if !strings.Contains(rest, `"id":3,`) || !strings.Contains(rest, "502 Bad Gateway: upstream exploded") {
		t.Errorf("an HTTP error: %s; want a JSON-RPC error for id 3 naming the status and body", rest)
	}
	if !strings.Contains(rest, `"id":4,`) || !strings.Contains(rest, "longer than 200 bytes") {
		t.Errorf("an oversized message: %s; want an error for its id naming the limit", rest)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 4 {
		t.Fatalf("%d requests reached the server; want 4 (the oversized message is not sent)", len(seen))
	}
	if deleted != "s-1" {
		t.Errorf("the session was not ended: DELETE with session %q", deleted)
	}
	for i, h := range seen {
		if h.Get("Authorization") != "Bearer tok" {
			t.Errorf("request %d: Authorization %q", i+1, h.Get("Authorization"))
		}
	}
	for _, method := range []string{"tools/call", "boom"} {
		if h := byMethod[method]; h.Get("Mcp-Session-Id") != "s-1" || h.Get("MCP-Protocol-Version") != "2025-06-18" {
			t.Errorf("%s: session %q, protocol %q; want s-1 and 2025-06-18", method, h.Get("Mcp-Session-Id"), h.Get("MCP-Protocol-Version"))
		}
	}
}

// TestBridgeServerRequestDuringCall: a server that asks the client
// something (elicitation) in the middle of a call's event stream, and
// finishes the call only once the answer came, gets that answer even when
// every request slot is taken by calls waiting for it: responses have
// slots of their own.
func TestBridgeServerRequestDuringCall(t *testing.T) {
	answered := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"id":"srv-1","result"`) {
			close(answered)
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"elicitation/create\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-answered:
			io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"after\":\"the answer\"}}\n\n")
		case <-r.Context().Done():
		case <-time.After(10 * time.Second): // the answer never came: end the call, and the test fails on its line
			io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"after\":\"no answer\"}}\n\n")
		}
	}))
	defer srv.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Options{URL: srv.URL, MaxInFlight: 1}, inR, outW)
		outW.Close()
	}()
	lines := bufioLines(outR)
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`+"\n")
	if got := <-lines; !strings.Contains(got, `"method":"elicitation/create"`) {
		t.Fatalf("first line %s; want the server's request", got)
	}
	io.WriteString(inW, `{"jsonrpc":"2.0","id":"srv-1","result":{"action":"accept"}}`+"\n")
	if got := <-lines; got != `{"jsonrpc":"2.0","id":1,"result":{"after":"the answer"}}` {
		t.Fatalf("second line %s; want the call's result", got)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// bufioLines sends each line of r, then closes.
func bufioLines(r io.Reader) <-chan string {
	ch := make(chan string, 16)
	go func() {
		defer close(ch)
		b := make([]byte, 0, 4096)
		one := make([]byte, 1)
		for {
			if _, err := r.Read(one); err != nil {
				return
			}
			if one[0] == '\n' {
				ch <- string(b)
				b = b[:0]
				continue
			}
			b = append(b, one[0])
		}
	}()
	return ch
}

// TestBridgeEmptyStream: an event stream that ends with no message answers
// the request with an error, so the client is not left waiting.
func TestBridgeEmptyStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": a comment, no data\n\n")
	}))
	defer srv.Close()
	var out bytes.Buffer
	if err := Run(context.Background(), Options{URL: srv.URL}, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`+"\n"), &out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, `"id":7`) || !strings.Contains(got, "ended without an answer") {
		t.Errorf("an empty stream: %q; want an error for id 7", got)
	}
}

// TestReadLineLimit: a line of limit bytes is whole with or without its
// newline, and one of limit+1 is too long with or without one (a last line
// without a newline was allowed a byte more).
func TestReadLineLimit(t *testing.T) {
	for in, want := range map[string][]bool{
		"0123456789\n0123456789":   {false, false},
		"0123456789X\n0123456789X": {true, true},
	} {
		r := bufio.NewReader(strings.NewReader(in))
		for i, w := range want {
			if _, tooLong, _ := readLine(r, 10); tooLong != w {
				t.Errorf("%q, line %d: tooLong %v, want %v", in, i, tooLong, w)
			}
		}
	}
}

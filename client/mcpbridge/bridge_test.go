package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestBridgeAnswers: what a streamable HTTP server may answer, written
// back as the lines a stdio client reads: a JSON body, an event stream of
// several messages (a server request before the response), 202 for a
// notification (nothing written), an HTTP error as a JSON-RPC error for
// the request's id; a message over the size bound is refused without being
// sent. The session id and protocol version of initialize's answer go
// with the next request, and the session is ended (DELETE) at the end.
func TestBridgeAnswers(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
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
	// One request at a time, so that initialize's answer is in before the
	// next request reads the session's headers.
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
	if !strings.Contains(rest, `"id":null`) || !strings.Contains(rest, "longer than 200 bytes") {
		t.Errorf("an oversized message: %s; want an error naming the limit", rest)
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
		if i > 0 && (h.Get("Mcp-Session-Id") != "s-1" || h.Get("MCP-Protocol-Version") != "2025-06-18") {
			t.Errorf("request %d: session %q, protocol %q; want s-1 and 2025-06-18", i+1, h.Get("Mcp-Session-Id"), h.Get("MCP-Protocol-Version"))
		}
	}
}

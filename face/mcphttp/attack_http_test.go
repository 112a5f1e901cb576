package mcphttp

import (
	"net/http"
	"strings"
	"testing"
)

// sessionPost opens a session (initialize, then notifications/initialized)
// on e with hdr and returns a function that POSTs a body in it, and the
// session's id; the session is ended (DELETE) when the test ends.
func sessionPost(t *testing.T, e *env, hdr map[string]string) (func(body string) (int, string), string) {
	t.Helper()
	resp, body := rawPost(t, e.url(), "POST", initBody, hdr)
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		t.Fatalf("initialize: %d %s; no Mcp-Session-Id", resp.StatusCode, body)
	}
	h := map[string]string{"Mcp-Session-Id": id, "MCP-Protocol-Version": "2025-06-18"}
	for k, v := range hdr {
		h[k] = v
	}
	t.Cleanup(func() {
		req, _ := http.NewRequest("DELETE", e.url(), nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	post := func(body string) (int, string) {
		t.Helper()
		resp, b := rawPost(t, e.url(), "POST", body, h)
		return resp.StatusCode, b
	}
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return post, id
}

// TestSessionReplyLimitPerRequest: with --mcp-sessions, --max-reply-bytes
// bounds each HTTP reply, as it does without sessions; it is not one budget
// for the whole session (the initialize request's), which would refuse every
// result once the session's replies added up to the limit.
func TestSessionReplyLimitPerRequest(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Sessions, o.MaxReplyBytes = true, 4096 })
	post, _ := sessionPost(t, e, nil)
	big := strings.Repeat("x", 1500)
	if code, body := post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"w.txt","content":"` + big + `"}}}`); code != http.StatusOK || !strings.Contains(body, "Successfully wrote") {
		t.Fatalf("write: %d %s", code, body)
	}
	for i := range 6 {
		code, body := post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"w.txt"}}}`)
		if code != http.StatusOK || !strings.Contains(body, big) {
			t.Fatalf("read %d of a 1500-byte file in one session, reply limit 4096: %d %.300s", i, code, body)
		}
	}
	// One reply is still bounded: a result larger than the limit is refused.
	if code, body := post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"w.txt","content":"` + big + `\n` + big + `\n` + big + `"}}}`); code != http.StatusOK || !strings.Contains(body, "Successfully wrote") {
		t.Fatalf("write: %d %s", code, body)
	}
	if code, body := post(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"w.txt"}}}`); code != http.StatusOK || strings.Contains(body, big) || !strings.Contains(body, "--max-reply-bytes") {
		t.Errorf("a read of three 1500-byte lines under a 4096-byte reply limit: %d %.300s; want the reply-limit error", code, body)
	}
}

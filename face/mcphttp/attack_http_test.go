package mcphttp

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestStalledReaderLetsGo: a client that sends a request and then never
// reads the reply does not hold the handler, its in-flight slot and the
// reply for ever: a write to it that makes no progress for
// replyStallTimeout fails, and the request ends.
func TestStalledReaderLetsGo(t *testing.T) {
	old := replyStallTimeout
	replyStallTimeout = 300 * time.Millisecond
	t.Cleanup(func() { replyStallTimeout = old })
	e := newEnv(t)
	blob := bytes.Repeat([]byte{0xa5}, 6<<20) // 8 MiB as base64, more than the socket buffers hold
	if err := os.WriteFile(filepath.Join(e.root, "blob.bin"), blob, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, accept := range []string{"application/json", "text/event-stream"} {
		for _, body := range []string{
			// the fast path
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_media_file","arguments":{"path":"blob.bin","force":true}}}`,
			// the SDK's path
			`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_media_file","arguments":{"path":"blob.bin","force":true}}}]`,
		} {
			conn, err := net.Dial("tcp", e.http.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			conn.(*net.TCPConn).SetReadBuffer(4096)
			fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: %s\r\nContent-Length: %d\r\n\r\n%s", accept, len(body), body)
			// Read nothing, and wait for the daemon to take the request,
			// then to give it up.
			deadline := time.Now().Add(2 * time.Minute)
			for taken := false; !taken || e.srv.inflight.Held("127.0.0.1") != 0; {
				taken = taken || e.srv.inflight.Held("127.0.0.1") != 0
				if time.Now().After(deadline) {
					conn.Close()
					t.Fatalf("Accept %s, %.20s: a client that reads nothing of an 8 MiB reply still holds its request (taken: %v)", accept, body, taken)
				}
				time.Sleep(time.Millisecond)
			}
			conn.Close()
		}
	}
}

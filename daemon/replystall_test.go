package daemon

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStalledReaderLetsGo: a client that sends a call and then never reads
// its reply does not hold the handler, its in-flight slot and the reply
// for ever, on any route that answers a call (/mcp's fast path and the
// SDK's, in JSON and SSE, and /execute): the daemon's listener gives every
// reply admit.ReplyDeadline, and a write the client takes nothing of for
// the stall timeout ends the request.
func TestStalledReaderLetsGo(t *testing.T) {
	saved := replyStallTimeout
	t.Cleanup(func() { replyStallTimeout = saved })
	replyStallTimeout = 300 * time.Millisecond
	c := testConfig(t)
	// 8 MiB of text, more than the sockets hold, that every face answers
	// whole (a media file's bytes are no REST output).
	text := bytes.Repeat([]byte("a line of the file that nobody reads\n"), 8<<20/37)
	if err := os.WriteFile(filepath.Join(c.Root, "big.txt"), text, 0o644); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_multiple_files","arguments":{"paths":["big.txt"]}}}`
	type request struct{ name, path, accept, body string }
	var requests []request
	for _, accept := range []string{"application/json", "text/event-stream"} {
		requests = append(requests,
			request{"fast path, " + accept, "/mcp", accept, call},
			request{"SDK's path, " + accept, "/mcp", accept, "[" + call + "]"})
	}
	requests = append(requests, request{"REST", "/execute", "application/json",
		`{"tool_name":"read_multiple_files","arguments":{"paths":["big.txt"]}}`})
	for _, q := range requests {
		conn := dialRaw(t, r.url, "127.0.0.1")
		conn.(*net.TCPConn).SetReadBuffer(4096)
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: %s\r\nContent-Length: %d\r\n\r\n%s",
			q.path, q.accept, len(q.body), q.body)
		// Read nothing; wait for the daemon to take the request, then to
		// give it up.
		deadline := time.Now().Add(2 * time.Minute)
		for taken := false; !taken || r.d.w.inflight.Held("127.0.0.1") != 0; {
			taken = taken || r.d.w.inflight.Held("127.0.0.1") != 0
			if time.Now().After(deadline) {
				t.Fatalf("%s: a client that reads nothing of an 8 MiB reply still holds its request (taken: %v)", q.name, taken)
			}
			time.Sleep(time.Millisecond)
		}
		conn.Close()
	}
}

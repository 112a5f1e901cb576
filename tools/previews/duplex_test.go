//go:build linux

package previews

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// TestProxyFullDuplex: a POST whose body is a stream (chunked, sent piece
// by piece) to a server that answers before it has read the body and then
// sends each piece back as it reads it (previewsrv's /duplex), through the
// proxy behind the daemon's read and reply deadlines (internal/admit). The
// client, on a raw connection, sends one piece and waits for it to come
// back before it sends the next, so every piece after the first is sent
// after the answer's header has arrived: each comes back, the body's end
// ends the answer cleanly, and the client's connection and the proxy's
// connection to the server are both kept (the next request on the
// client's connection is served over the same server connection).
//
// It holds ReverseProxy's path to full duplex (proxy.go,
// EnableFullDuplex): without it net/http reads what is left of the request
// body once the answer's header is written, which waits for a piece the
// client sends only after it has seen the answer, so no answer comes.
func TestProxyFullDuplex(t *testing.T) {
	p, ex, root := newProvider(t, sandbox.ModeSoftware)
	port := startServer(t, ex, root, root, "")
	// The daemon's shape: a caller with holds (a streamed answer is held),
	// behind the body deadline and the reply's stall bound.
	hold := func(ctx context.Context) (context.Context, func()) { return ctx, func() {} }
	h := p.newProxy("/preview/", func(http.ResponseWriter, *http.Request) (Caller, bool) {
		return Caller{Face: "http", Hold: hold}, true
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: admit.BodyDeadline(admit.ReplyDeadline(h, admit.ReplyStallTimeout), admit.BodyTimeout)}
	go srv.Serve(l)
	defer func() { srv.Close(); h.closeIdle() }()

	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Every step has a deadline, so that a proxy that withholds the answer
	// fails the test with the step it stopped at instead of hanging it; no
	// step takes more than milliseconds when it works.
	step := func() { _ = c.SetDeadline(time.Now().Add(15 * time.Second)) }
	br := bufio.NewReader(c)
	pieces := []string{"first piece, sent before the answer", "second", "third, a little longer than the others", "fourth"}

	step()
	if _, err := fmt.Fprintf(c, "POST /preview/%d/duplex HTTP/1.1\r\nHost: preview.test\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", port, len(pieces[0]), pieces[0]); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer's header to a streamed POST: %v", err)
	}
	if resp.StatusCode != http.StatusOK || resp.ContentLength != -1 || resp.Close {
		t.Fatalf("answer: %s, length %d, close %v; want 200, streamed, the connection kept", resp.Status, resp.ContentLength, resp.Close)
	}
	for i, piece := range pieces {
		if i > 0 {
			step()
			if _, err := fmt.Fprintf(c, "%x\r\n%s\r\n", len(piece), piece); err != nil {
				t.Fatalf("piece %d, sent after the answer's header: %v", i, err)
			}
		}
		got := make([]byte, len(piece))
		if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != piece {
			t.Fatalf("piece %d came back as %q (%v), want %q", i, got, err, piece)
		}
	}
	step()
	if _, err := io.WriteString(c, "0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(resp.Body)
	if err != nil || len(rest) != 0 {
		t.Fatalf("the answer's end, after the body's: %q, %v; want its end alone", rest, err)
	}

	// The next request on the same connection, with a body (ReverseProxy's
	// path), reaches the server over the connection the stream used: net/http
	// kept the client's connection, and the Transport its own.
	step()
	if _, err := fmt.Fprintf(c, "POST /preview/%d/conns HTTP/1.1\r\nHost: preview.test\r\nContent-Length: 1\r\n\r\nx", port); err != nil {
		t.Fatal(err)
	}
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the next request on the connection: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasSuffix(string(b), "accepted=1") {
		t.Fatalf("the next request: %s %q (%v); want the server's one connection (accepted=1) reused", resp.Status, b, err)
	}
}

//go:build linux

package previews

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/sandbox"
)

// TestLeanMatchesReverseProxy: the lean path (lean.go) and
// httputil.ReverseProxy, each behind a proxy of its own to the same
// workspace server, give the same answers to the same requests: what the
// server saw (method, target, Host, every header, the body's length) and
// what the client got (status, every header but Date, informational
// answers, body, trailers). The requests cover what the proxy strips
// (hop-by-hop headers both ways, those a Connection header names, the
// token, the client's forwarding headers), what it sets (X-Forwarded-*,
// no User-Agent of its own), what it keeps (TE: trailers, repeated
// headers, escaped paths, queries it cleans), and answers streamed,
// with trailers, with 103 Early Hints, without a body, large, and to HEAD
// and OPTIONS; every request is sent twice, the second time over the
// connections each path kept.
func TestLeanMatchesReverseProxy(t *testing.T) {
	p, ex, root := newProvider(t, sandbox.ModeSoftware)
	port := startServer(t, ex, root, root, "")
	admitAll := func(http.ResponseWriter, *http.Request) (Caller, bool) { return Caller{Face: "http"}, true }
	lean, ref := p.newProxy("/preview/", admitAll), p.newProxy("/preview/", admitAll)
	ref.noLean = true
	serve := func(h *proxy) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: h}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close(); h.closeIdle() })
		return l.Addr().String()
	}
	leanAddr, refAddr := serve(lean), serve(ref)
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()

	type req struct {
		name, method, path string
		hdr                []string // name, value, ...
	}
	cases := []req{
		{"plain", "GET", "/dump", nil},
		{"no user agent", "GET", "/dump", []string{"User-Agent", ""}},
		{"request headers stripped and kept", "GET", "/dump", []string{
			"Connection", "X-Hop, keep-alive", "X-Hop", "secret", "Keep-Alive", "timeout=5", "Proxy-Authorization", "Basic eA==",
			"Authorization", "Bearer the-daemons-token", "Forwarded", "for=1.2.3.4", "X-Forwarded-For", "1.2.3.4",
			"X-Forwarded-Host", "evil.example", "X-Forwarded-Proto", "https", "X-Forwarded-Prefix", "/evil",
			"Te", "trailers, deflate", "X-Multi", "a", "X-Multi", "b", "Cookie", "a=1", "Accept", "text/html"}},
		{"te without trailers", "GET", "/dump", []string{"Te", "deflate"}},
		{"answer headers stripped and kept", "GET", "/dump?set=X-A:1&set=X-A:2&set=Connection:X-Drop&set=X-Drop:gone&set=Keep-Alive:timeout%3D5&set=Proxy-Authenticate:Basic&set=Set-Cookie:a%3D1&set=Set-Cookie:b%3D2", nil},
		{"query with a semicolon", "GET", "/dump?a=1;b=2&c=3", nil},
		{"query with a bad escape", "GET", "/dump?a=%zz&b=2", nil},
		{"query forced", "GET", "/dump?", nil},
		{"escaped path", "GET", "/dump/a%2Fb/%7Ec?x=%20y", nil},
		{"head", "HEAD", "/dump", nil},
		{"post without a body", "POST", "/dump", nil},
		{"streamed", "GET", "/dump?stream=1", nil},
		{"server-sent events", "GET", "/dump?set=Content-Type:text/event-stream&stream=1", nil},
		{"trailer", "GET", "/dump?trailer=1", []string{"Te", "trailers"}},
		{"trailer streamed", "GET", "/dump?trailer=1&stream=1", nil},
		{"early hints", "GET", "/dump?hint=1", nil},
		{"no content", "GET", "/dump?status=204", nil},
		{"not modified", "GET", "/dump?status=304&set=ETag:%22x%22", nil},
		{"server error", "GET", "/dump?status=500", nil},
		{"options", "OPTIONS", "/dump", nil},
		{"post with an idempotency key", "POST", "/dump", []string{"Idempotency-Key", "k1"}},
		{"large body", "GET", "/bytes?n=200000", nil},
		{"head of a large body", "HEAD", "/bytes?n=200000", nil},
	}
	do := func(addr string, c req) string {
		t.Helper()
		var b strings.Builder
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			fmt.Fprintf(&b, "1xx %d %v\n", code, h)
			return nil
		}}
		r, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), c.method, fmt.Sprintf("http://%s/preview/%d%s", addr, port, c.path), nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(c.hdr); i += 2 {
			r.Header[c.hdr[i]] = append(r.Header[c.hdr[i]], c.hdr[i+1])
		}
		resp, err := tr.RoundTrip(r)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: body: %v", c.name, err)
		}
		fmt.Fprintf(&b, "%s\n", resp.Status)
		keys := make([]string, 0, len(resp.Header))
		for k := range resp.Header {
			if k != "Date" {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s: %q\n", k, resp.Header[k])
		}
		fmt.Fprintf(&b, "length %d te %q\n%s\ntrailer %v\n", resp.ContentLength, resp.TransferEncoding, body, resp.Trailer)
		// The proxies' own addresses differ; what the server saw of them
		// (X-Forwarded-Host) is the same once named alike.
		return strings.ReplaceAll(b.String(), addr, "PROXY")
	}
	// Twice: the second round goes over the connections each path kept.
	var dialed int64
	for i, c := range append(cases, cases...) {
		if i == len(cases) {
			dialed = lean.pool.dialed.Load()
		}
		before := lean.leaned.Load()
		got, want := do(leanAddr, c), do(refAddr, c)
		if lean.leaned.Load() != before+1 {
			t.Errorf("%s: the lean path did not serve it", c.name)
		}
		if got != want {
			t.Errorf("%s: the lean path answered\n%s\nReverseProxy answered\n%s", c.name, got, want)
		}
		if c.method == "GET" && c.path == "/dump" && (strings.Contains(got, "the-daemons-token") || strings.Contains(got, "secret") || strings.Contains(got, "evil")) {
			t.Errorf("%s: a stripped header reached the server:\n%s", c.name, got)
		}
	}
	if ref.leaned.Load() != 0 {
		t.Errorf("the reference proxy took the lean path %d times", ref.leaned.Load())
	}
	if n := lean.pool.dialed.Load() - dialed; n != 0 {
		t.Errorf("the second round opened %d connections on the lean path, want 0 (every answer leaves its connection open)", n)
	}
}

// TestLeanPathLeavesBodiesAndUpgrades: a request with a body, or one that
// asks for an upgrade, goes through ReverseProxy (which streams the body
// and hijacks the connection), and still reaches the server.
func TestLeanPathLeavesBodiesAndUpgrades(t *testing.T) {
	p, ex, root := newProvider(t, sandbox.ModeSoftware)
	port := startServer(t, ex, root, root, "")
	h := p.newProxy("/preview/", func(http.ResponseWriter, *http.Request) (Caller, bool) { return Caller{Face: "http"}, true })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	defer func() { srv.Close(); h.closeIdle() }()
	base := fmt.Sprintf("http://%s/preview/%d", l.Addr(), port)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	resp, err := client.Post(base+"/dump", "text/plain", strings.NewReader("twelve bytes"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "body=12") {
		t.Fatalf("POST with a body: %d %s", resp.StatusCode, b)
	}
	// A WebSocket handshake (previewsrv's /echo), spoken by hand: the
	// server must see the upgrade and switch.
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /preview/%d/echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", port)
	line := make([]byte, len("HTTP/1.1 101"))
	if _, err := io.ReadFull(c, line); err != nil || string(line) != "HTTP/1.1 101" {
		t.Fatalf("upgrade through the proxy: %q %v", line, err)
	}
	if n := h.leaned.Load(); n != 0 {
		t.Errorf("the lean path served %d of these requests", n)
	}
}

// TestEventStream: the prefilter decides as mime.ParseMediaType does.
func TestEventStream(t *testing.T) {
	for _, ct := range []string{"", "text/plain", "text/plain; charset=utf-8", "text/event-stream", "TEXT/Event-Stream; charset=utf-8",
		"  text/event-stream ", "text/event-streams", "application/x-event-stream", "text/event-stream;;", "text/event-stream; a=\"b",
		"text/event-stream\u212a", "event-stream"} {
		base, _, _ := mime.ParseMediaType(ct)
		if got, want := eventStream(ct), base == "text/event-stream"; got != want {
			t.Errorf("eventStream(%q) = %v, mime.ParseMediaType says %v", ct, got, want)
		}
	}
}

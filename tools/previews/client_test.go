//go:build linux

package previews

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// serverConns asks the workspace server on port, directly, how many
// connections it holds open now (the asking one left out) and has
// accepted since it started.
func serverConns(t *testing.T, port int) (open, accepted int) {
	t.Helper()
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscanf(get(t, c, "/conns"), "open=%d accepted=%d", &open, &accepted); err != nil {
		t.Fatalf("/conns: %v", err)
	}
	return open, accepted
}

// waitOpen waits until the server holds open connections (a closed
// connection reaches it some time after the proxy closed it).
func waitOpen(t *testing.T, port, what string, want int) {
	t.Helper()
	p, _ := strconv.Atoi(port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, _ := serverConns(t, p)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the server holds %d connections, want %d", what, n, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// keptAnswer is a whole answer that leaves the connection open.
const keptAnswer = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"

// TestLeanClientStaleConnection: a pooled connection that the server
// closes as it is reused (previewsrv's /raw with drop=1 reads the next
// request and hangs up) costs a GET or a HEAD one retry on a fresh
// connection, and a POST none (it may not be sent twice: 502); a retried
// request that fails on its fresh connection too is not retried again; a
// pooled connection the server closed while it was idle is noticed
// before use, so even a POST goes on a fresh one. ReverseProxy's
// Transport answers each the same (compared as they reach the client),
// but for that last POST: the Transport learns of the close from its
// connection's read loop, some time after the server closed it, and a
// POST sent on the connection before then fails with 502 (it is not
// retried); so there ReverseProxy's answer is either the lean path's or
// that 502.
func TestLeanClientStaleConnection(t *testing.T) {
	lp := newLeanPair(t)
	post := func(target string) string {
		return "POST " + target + " HTTP/1.1\r\nHost: daemon.test\r\nConnection: close\r\n\r\n"
	}
	getReq := func(method, target string) string {
		return method + " " + target + " HTTP/1.1\r\nHost: daemon.test\r\nConnection: close\r\n\r\n"
	}
	dropAfter := getReq("GET", rawAnswer(keptAnswer)+"&drop=1")
	closeAfter := getReq("GET", rawAnswer(keptAnswer))
	port := strconv.Itoa(lp.port)
	cases := []struct {
		name       string
		prime, req string
		waitClosed bool   // the primed connection is closed by the server before req
		dials      int64  // connections the lean path opens for req
		want       string // in the answer
		refRace    string // in ReverseProxy's answer when it differs (see above)
	}{
		{"get retried", dropAfter, getReq("GET", "/preview/{P}/dump"), false, 1, "200 OK", ""},
		{"head retried", dropAfter, getReq("HEAD", "/preview/{P}/dump"), false, 1, "200 OK", ""},
		{"post not retried", dropAfter, post("/preview/{P}/dump"), false, 0, "502 Bad Gateway", ""},
		{"retried once only", dropAfter, getReq("GET", rawAnswer("")), false, 1, "502 Bad Gateway", ""},
		{"closed while idle, get", closeAfter, getReq("GET", "/preview/{P}/dump"), true, 1, "200 OK", ""},
		{"closed while idle, post", closeAfter, post("/preview/{P}/dump"), true, 1, "POST /dump", `{"error":"Bad Gateway","message":"preview: EOF"}`},
	}
	for _, c := range cases {
		var out [2]string
		for i, side := range []struct {
			addr string
			h    *proxy
		}{{lp.leanAddr, lp.lean}, {lp.refAddr, lp.ref}} {
			lp.lean.closeIdle()
			lp.ref.closeIdle()
			waitOpen(t, port, c.name+": before", 0)
			if got := lp.raw(t, side.addr, c.prime); !strings.Contains(got, "200 OK") {
				t.Fatalf("%s: priming: %s", c.name, got)
			}
			if c.waitClosed {
				waitOpen(t, port, c.name+": the server closing its side", 0)
			}
			dialed := lp.lean.pool.dialed.Load()
			out[i] = lp.raw(t, side.addr, c.req)
			if side.h == lp.lean {
				if n := lp.lean.pool.dialed.Load() - dialed; n != c.dials {
					t.Errorf("%s: the lean path opened %d connections, want %d", c.name, n, c.dials)
				}
			}
		}
		if out[0] != out[1] && (c.refRace == "" || !strings.Contains(out[1], "502 Bad Gateway") || !strings.Contains(out[1], c.refRace)) {
			t.Errorf("%s: the lean path answered\n%s\nReverseProxy answered\n%s", c.name, out[0], out[1])
		}
		if !strings.Contains(out[0], c.want) {
			t.Errorf("%s: want %q in\n%s", c.name, c.want, out[0])
		}
	}
}

// TestLeanClientPoolBounds: ten requests held at once by the server
// (previewsrv's /gather) open ten connections; when they end the pool
// keeps eight (the Transport's MaxIdleConnsPerHost in newProxy), and the
// server sees the other two closed; the next requests reuse the kept
// ones. An idle connection is closed after the pool's idle timeout
// (shortened here) without anything else happening.
func TestLeanClientPoolBounds(t *testing.T) {
	lp := newLeanPair(t)
	port := strconv.Itoa(lp.port)
	key := leanKey{"", lp.port}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	ask := func(path string) error {
		resp, err := client.Get("http://" + lp.leanAddr + "/preview/" + port + path)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %d %s %v", path, resp.StatusCode, b, err)
		}
		return nil
	}
	dialed := lp.lean.pool.dialed.Load()
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Go(func() { errs <- ask("/gather?n=10") })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := lp.lean.pool.idleCount(key); n != leanMaxIdle {
		t.Errorf("the pool keeps %d connections, want %d", n, leanMaxIdle)
	}
	waitOpen(t, port, "after ten at once", leanMaxIdle)
	if n := lp.lean.pool.dialed.Load() - dialed; n != 10 {
		t.Errorf("ten requests at once opened %d connections, want 10", n)
	}
	if n := lp.p.Held(); n != leanMaxIdle {
		t.Errorf("%d places among MaxConns held, want %d", n, leanMaxIdle)
	}
	dialed = lp.lean.pool.dialed.Load()
	for range 3 {
		if err := ask("/"); err != nil {
			t.Fatal(err)
		}
	}
	if n := lp.lean.pool.dialed.Load() - dialed; n != 0 {
		t.Errorf("requests after them opened %d connections, want 0", n)
	}

	lp.lean.closeIdle()
	waitOpen(t, port, "after closeIdle", 0)
	lp.lean.pool.mu.Lock()
	lp.lean.pool.idleTimeout = 20 * time.Millisecond
	lp.lean.pool.mu.Unlock()
	if err := ask("/"); err != nil {
		t.Fatal(err)
	}
	waitOpen(t, port, "after the idle timeout", 0)
	if n := lp.lean.pool.idleCount(key); n != 0 {
		t.Errorf("the pool keeps %d connections after their idle timeout", n)
	}
	if n := lp.p.Held(); n != 0 {
		t.Errorf("%d places held after the idle timeout", n)
	}
}

// TestLeanClientBodyReuse: a connection goes back to the pool only when
// its answer's body was read to the end; one closed before (or whose
// request's context ended mid-body, which the body's read reports) is
// closed, and the server sees it go.
func TestLeanClientBodyReuse(t *testing.T) {
	lp := newLeanPair(t)
	port := strconv.Itoa(lp.port)
	key := leanKey{"", lp.port}
	pool := lp.lean.pool
	req := func(method, target string) *http.Request {
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Request{Method: method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Host: "localhost:" + port}
	}
	caller := Caller{Face: "http"}
	big := "/bytes?n=" + strconv.Itoa(4<<20)

	res, err := pool.roundTrip(context.Background(), caller, key, req("GET", big), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(io.Discard, res.Body, 100); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if n := pool.idleCount(key); n != 0 {
		t.Errorf("a body closed before its end left %d connections in the pool", n)
	}
	waitOpen(t, port, "a body closed before its end", 0)

	ctx, cancel := context.WithCancel(context.Background())
	res, err = pool.roundTrip(ctx, caller, key, req("GET", big), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(io.Discard, res.Body, 100); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := io.Copy(io.Discard, res.Body); !errors.Is(err, context.Canceled) {
		t.Errorf("a body read after its request's context ended: %v, want context.Canceled", err)
	}
	res.Body.Close()
	if n := pool.idleCount(key); n != 0 {
		t.Errorf("a canceled request left %d connections in the pool", n)
	}
	waitOpen(t, port, "a canceled request", 0)

	for _, r := range []*http.Request{req("GET", big), req("GET", "/dump?status=204"), req("HEAD", "/bytes?n=10"), req("GET", "/dump?stream=1&trailer=1")} {
		res, err = pool.roundTrip(context.Background(), caller, key, r, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, res.Body); err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if n := pool.idleCount(key); n != 1 {
			t.Errorf("%s %s read to its end: %d connections in the pool, want 1", r.Method, r.URL, n)
		}
	}
	if got := res.Trailer.Get("X-Sum"); got == "" {
		t.Errorf("the chunked answer's trailer did not come: %v", res.Trailer)
	}
	waitOpen(t, port, "answers read to their end", 1)
}

// TestLeanClientHeaderLimit: an answer whose header (or one 1xx answer's)
// is over the limit is refused with the Transport's words, the limit
// applying to each 1xx answer and the final one apart, as the Transport
// does for a client that sees 1xx answers; both paths answer alike with
// the same limit, and the lean path's default is the Transport's
// (MaxResponseHeaderBytes unset: 10 MiB).
func TestLeanClientHeaderLimit(t *testing.T) {
	lp := newLeanPair(t)
	if lp.lean.pool.maxHeader != 10<<20 || lp.ref.tr.MaxResponseHeaderBytes != 0 {
		t.Fatalf("header limits: lean %d, Transport %d (0: 10 MiB)", lp.lean.pool.maxHeader, lp.ref.tr.MaxResponseHeaderBytes)
	}
	const limit = 4096
	lp.lean.pool.maxHeader = limit
	lp.ref.tr.MaxResponseHeaderBytes = limit
	pad := func(n int) string { return "X-Pad: " + strings.Repeat("p", n) + "\r\n" }
	hint := "HTTP/1.1 103 Early Hints\r\n" + pad(3000) + "\r\n"
	for _, c := range []struct {
		name, answer, want string
	}{
		{"over", "HTTP/1.1 200 OK\r\n" + pad(5000) + "Content-Length: 2\r\n\r\nok", "server response headers exceeded 4096 bytes"},
		{"under", "HTTP/1.1 200 OK\r\n" + pad(3000) + "Content-Length: 2\r\n\r\nok", "200 OK"},
		{"each 1xx apart", hint + hint + hint + "HTTP/1.1 200 OK\r\n" + pad(3000) + "Content-Length: 2\r\n\r\nok", "200 OK"},
		{"a 1xx over", "HTTP/1.1 103 Early Hints\r\n" + pad(5000) + "\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "server response headers exceeded 4096 bytes"},
	} {
		r := "GET " + rawAnswer(c.answer) + " HTTP/1.1\r\nHost: daemon.test\r\nConnection: close\r\n\r\n"
		got, want := lp.raw(t, lp.leanAddr, r), lp.raw(t, lp.refAddr, r)
		if got != want {
			t.Errorf("%s: the lean path answered\n%s\nReverseProxy answered\n%s", c.name, got, want)
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: want %q in\n%s", c.name, c.want, got)
		}
	}
}

// TestLeanClientAborter: an abort (a reload revoking the caller's token,
// holdStream) ends a body being read with an error, and the connection
// is not pooled; an abort that comes after its body was closed, when the
// connection is back in the pool or carrying the next request, touches
// nothing: the next request reads its whole answer and pools again.
func TestLeanClientAborter(t *testing.T) {
	lp := newLeanPair(t)
	port := strconv.Itoa(lp.port)
	key := leanKey{"", lp.port}
	pool := lp.lean.pool
	req := func(target string) *http.Request {
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Request{Method: "GET", URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Host: "localhost:" + port}
	}
	caller := Caller{Face: "http"}
	big := "/bytes?n=" + strconv.Itoa(4<<20)
	abortOf := func(res *http.Response) func() {
		t.Helper()
		b, ok := res.Body.(*leanBody)
		if !ok {
			t.Fatalf("the lean client's body is a %T", res.Body)
		}
		return b.aborter()
	}

	res, err := pool.roundTrip(context.Background(), caller, key, req(big), nil)
	if err != nil {
		t.Fatal(err)
	}
	abort := abortOf(res)
	if _, err := io.CopyN(io.Discard, res.Body, 100); err != nil {
		t.Fatal(err)
	}
	abort()
	if n, err := io.Copy(io.Discard, res.Body); err == nil {
		t.Errorf("a body read after its abort: %d more bytes and no error", n)
	}
	res.Body.Close()
	if n := pool.idleCount(key); n != 0 {
		t.Errorf("an aborted body left %d connections in the pool", n)
	}

	res, err = pool.roundTrip(context.Background(), caller, key, req("/bytes?n=10"), nil)
	if err != nil {
		t.Fatal(err)
	}
	late := abortOf(res)
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if n := pool.idleCount(key); n != 1 {
		t.Fatalf("an answer read to its end: %d connections in the pool, want 1", n)
	}
	late() // the connection is back in the pool
	res, err = pool.roundTrip(context.Background(), caller, key, req(big), nil)
	if err != nil {
		t.Fatal(err)
	}
	late() // and now carries the next request
	if n, err := io.Copy(io.Discard, res.Body); err != nil || n != 4<<20 {
		t.Errorf("the next request after a late abort: %d bytes, %v", n, err)
	}
	res.Body.Close()
	if n := pool.idleCount(key); n != 1 {
		t.Errorf("the next request read to its end: %d connections in the pool, want 1", n)
	}
}

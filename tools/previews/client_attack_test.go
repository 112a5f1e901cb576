//go:build linux

package previews

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/sandbox"
)

// TestAttackLeanClientFraming: answers a hostile workspace server frames
// so that two parsers could disagree on where the answer ends (two
// lengths, a length and chunks, chunk extensions, a chunk size past 64
// bits, bare LF line ends, NUL and CR in header values, a space before the
// colon, codings other than chunked, chunks on HTTP/1.0), or that are no
// HTTP/1.x answer at all (HTTP/0.9, a TLS alert), reach the client as
// ReverseProxy's Transport gives them, byte for byte: the lean path's
// client frames with http.ReadResponse, as the Transport does, and adds
// no parsing of its own. A bad chunk comes after a first good one, so
// that both paths have sent the header when they abort the answer (the
// lean path flushes a streamed answer's header at once, ReverseProxy at
// its first write). Whatever follows an answer on the connection
// ("SMUGGLED") never reaches the client.
func TestAttackLeanClientFraming(t *testing.T) {
	lp := newLeanPair(t)
	smuggled := "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUGGLED"
	for _, c := range []struct{ name, answer string }{
		{"two different lengths", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nContent-Length: 41\r\n\r\nok" + smuggled},
		{"one length twice", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok" + smuggled},
		{"a length in one header twice", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2, 2\r\n\r\nok" + smuggled},
		{"a signed length", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: +2\r\n\r\nok" + smuggled},
		{"chunks and a length", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 41\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n" + smuggled},
		{"chunk extensions", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n2;a=b;c=\"d;e\"\r\nok\r\n0;z\r\n\r\n" + smuggled},
		{"a chunk size past 64 bits", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n10000000000000002\r\nok\r\n0\r\n\r\n"},
		{"a negative chunk size", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n-2\r\nok\r\n0\r\n\r\n"},
		{"a chunk longer than its size", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokSMUGGLED\r\n0\r\n\r\n"},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Type: text/plain\nContent-Length: 2\n\nok" + smuggled},
		{"NUL in a header value", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nok"},
		{"CR in a header value", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-A: a\rSet-Cookie: s=1\r\nContent-Length: 2\r\n\r\nok"},
		{"a space before the colon", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length : 41\r\nContent-Length: 2\r\n\r\nok" + smuggled},
		{"a folded length", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n 41\r\n\r\nok" + smuggled},
		{"gzip then chunked", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
		{"chunked twice", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
		{"identity", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: identity\r\nContent-Length: 2\r\n\r\nok" + smuggled},
		{"chunks on HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
		{"HTTP/0.9", "<html>no status line</html>"},
		{"a TLS alert", "\x15\x03\x01\x00\x02\x02\x46"},
		{"a status of four digits", "HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok"},
		{"a 1xx with a body", "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\nContent-Length: 5\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok" + smuggled},
		{"a 204 with a body", "HTTP/1.1 204 No Content\r\nContent-Length: 41\r\n\r\n" + smuggled},
	} {
		r := "GET " + rawAnswer(c.answer) + " HTTP/1.1\r\nHost: daemon.test\r\nConnection: close\r\n\r\n"
		got, want := lp.raw(t, lp.leanAddr, r), lp.raw(t, lp.refAddr, r)
		if got != want {
			t.Errorf("%s: the lean path answered\n%s\nReverseProxy answered\n%s", c.name, got, want)
		}
		if got == "" {
			t.Errorf("%s: no answer", c.name)
		}
		if strings.Contains(got, "SMUGGLED") {
			t.Errorf("%s: what followed the answer reached the client:\n%s", c.name, got)
		}
	}
}

// TestAttackLeanClientNoAnswerForAnother: bytes a server sends past its
// answer (a second answer after a whole one, a body to a HEAD, a second
// answer after a 304) are never read by the lean path as the answer to
// the next request: the connection they came on is not used again
// (previewsrv's drop=1 would answer that next request with nothing but
// them), and the next request goes on a fresh connection. The lean client
// checks that on the handler's goroutine, at the body's close and by the
// peek before reuse. ReverseProxy's Transport is not held to it here: it
// pools a connection whose answer has no body before its read loop has
// looked past that answer, and a request that takes the connection
// meanwhile reads those bytes as its answer (a body to HEAD: 2 of 100
// next requests under -race, 0 of 100 without; a server of the same scope
// and port, which sees that request anyway, is the only one that can
// answer it so).
func TestAttackLeanClientNoAnswerForAnother(t *testing.T) {
	lp := newLeanPair(t)
	forged := "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nFORGED"
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	ask := func(method, target string) string {
		req, err := http.NewRequest(method, "http://"+lp.leanAddr+strings.ReplaceAll(target, "{P}", strconv.Itoa(lp.port)), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.Status + " " + string(b)
	}
	for _, c := range []struct{ name, method, answer string }{
		{"a second answer", "GET", keptAnswer + forged},
		{"a body to HEAD", "HEAD", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + strconv.Itoa(len(forged)) + "\r\n\r\n" + forged},
		{"a second answer to a 304", "GET", "HTTP/1.1 304 Not Modified\r\n\r\n" + forged},
	} {
		lp.lean.closeIdle()
		ask(c.method, rawAnswer(c.answer)+"&drop=1")
		dialed := lp.lean.pool.dialed.Load()
		if got := ask("GET", "/preview/{P}/"); !strings.Contains(got, "hello from") {
			t.Errorf("%s: the next request was answered %q", c.name, got)
		}
		if n := lp.lean.pool.dialed.Load() - dialed; n != 1 {
			t.Errorf("%s: the next request opened %d connections, want 1 (a fresh one)", c.name, n)
		}
	}
}

// TestAttackLeanClientPeekBeforeReuse: a pooled connection on which bytes
// arrive while it is idle (after it went back to the pool, so the check at
// the body's close could not see them) is found out by the peek before
// reuse, and closed; one that is quiet is taken. The socket is a loopback
// pair of this test's, wrapped as Dial wraps its connections.
func TestAttackLeanClientPeekBeforeReuse(t *testing.T) {
	p, _, _ := newProvider(t, sandbox.ModeSoftware)
	lp := newLeanPool(p)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	pair := func() (*pconn, net.Conn) {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		srv, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		s, err := p.acquire()
		if err != nil {
			t.Fatal(err)
		}
		// As get builds a connection Dial opened.
		pc := &pconn{pool: lp, key: leanKey{"", 1}, nc: s.wrap(c, Caller{}, 1)}
		pc.raw, _ = c.(syscall.Conn).SyscallConn()
		pc.peekFn = pc.peek
		pc.br = bufio.NewReaderSize(pc, 4<<10)
		pc.bw = bufio.NewWriterSize(pc, 4<<10)
		return pc, srv
	}
	quiet, qs := pair()
	defer qs.Close()
	lp.put(quiet)
	if got, err := lp.get(context.Background(), Caller{}, leanKey{"", 1}, false); err != nil || got != quiet {
		t.Fatalf("a quiet pooled connection was not taken: %v %v", got, err)
	}
	quiet.close()

	noisy, ns := pair()
	defer ns.Close()
	lp.put(noisy)
	if _, err := io.WriteString(ns, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nFORGED"); err != nil {
		t.Fatal(err)
	}
	// Until the bytes are in the socket (loopback delivers them at once;
	// the loop only waits for that), alive says so without waiting.
	deadline := time.Now().Add(30 * time.Second)
	for noisy.alive() {
		if time.Now().After(deadline) {
			t.Fatal("a pooled connection holding bytes nobody asked for is still taken as alive")
		}
		time.Sleep(time.Millisecond)
	}
	if noisy.br.Buffered() != 0 {
		t.Fatal("the peek consumed the bytes it looked at")
	}
	// get finds it bad, closes it and dials anew: no workspace process
	// listens on port 1, so the fresh dial is refused.
	if got, err := lp.get(context.Background(), Caller{}, leanKey{"", 1}, false); err == nil || got == noisy {
		t.Fatalf("the noisy pooled connection was handed out again: %v %v", got, err)
	}
	if n := lp.idleCount(leanKey{"", 1}); n != 0 {
		t.Errorf("%d connections left in the pool", n)
	}
	// Closed with bytes unread: the server sees a reset or the end.
	if _, err := ns.Read(make([]byte, 1)); err == nil {
		t.Error("the server's side of the noisy connection is still open")
	}
	if n := p.Held(); n != 0 {
		t.Errorf("%d places held after both connections closed", n)
	}
}

// TestAttackLeanClientScopes: the lean path's pool is keyed by scope and
// port, as ReverseProxy's pool is by poolKey: a connection kept for one
// scope's request is never handed to a caller of another scope, even one
// that reaches the same server (the whole workspace: it gets its own
// connection), and a sibling scope that may not reach the server is
// refused (404) with the first scope's connection still idle in its pool.
func TestAttackLeanClientScopes(t *testing.T) {
	p, root, a, b, port := scopedServer(t)
	admit := func(_ http.ResponseWriter, r *http.Request) (Caller, bool) {
		return Caller{Face: "http", Within: r.Header.Get("X-Test-Within")}, true
	}
	h := p.newProxy("/preview/", admit)
	srv := &http.Server{Handler: h}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer func() { srv.Close(); h.closeIdle() }()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	ask := func(within string) int {
		req, err := http.NewRequest("GET", "http://"+ln.Addr().String()+"/preview/"+strconv.Itoa(port)+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Test-Within", within)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		within string
		code   int
		dials  int64
	}{
		{a, 200, 1},    // a's connection, kept
		{a, 200, 0},    // reused for a
		{root, 200, 1}, // the whole workspace: its own
		{"", 200, 1},   // the daemon's token: its own
		{b, 404, 0},    // a sibling: refused, a's connection untouched
		{a, 200, 0},    // a's connection still there
	} {
		dialed := h.pool.dialed.Load()
		if got := ask(c.within); got != c.code {
			t.Errorf("within %q: %d, want %d", c.within, got, c.code)
		}
		if n := h.pool.dialed.Load() - dialed; n != c.dials {
			t.Errorf("within %q: %d connections opened, want %d", c.within, n, c.dials)
		}
	}
	for _, within := range []string{a, root, ""} {
		if n := h.pool.idleCount(leanKey{within, port}); n != 1 {
			t.Errorf("within %q: %d kept connections, want 1", within, n)
		}
	}
	if n := h.pool.idleCount(leanKey{b, port}); n != 0 {
		t.Errorf("the sibling scope has %d kept connections", n)
	}
}

// TestAttackLeanClientCap: MaxConns bounds the two pools together: idle
// connections of the lean path give their places up to a request that
// needs one (here ReverseProxy's, a request with a body), and requests
// under way are never closed for another: over the cap the next one is
// refused (503) and those under way still get their answers.
func TestAttackLeanClientCap(t *testing.T) {
	ex, root := newExecutor(t, sandbox.ModeSoftware)
	p, err := New(Options{Executor: ex, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	port := startServer(t, ex, root, root, "")
	admitAll := func(http.ResponseWriter, *http.Request) (Caller, bool) { return Caller{Face: "http"}, true }
	h := p.Proxy("/preview/", admitAll).(*proxy)
	srv := &http.Server{Handler: h}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer func() { srv.Close(); h.closeIdle() }()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer client.CloseIdleConnections()
	base := "http://" + ln.Addr().String() + "/preview/" + strconv.Itoa(port)
	ask := func(method, path, body string) (int, error) {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, base+path, rd)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Two lean requests at once: two connections, kept.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if code, err := ask("GET", "/gather?n=2", ""); code != 200 || err != nil {
				t.Errorf("gathered: %d %v", code, err)
			}
		})
	}
	wg.Wait()
	if n := h.pool.idleCount(leanKey{"", port}); n != 2 || p.Held() != 2 {
		t.Fatalf("the lean pool keeps %d, %d places held; want 2 and 2", n, p.Held())
	}
	// A request with a body (ReverseProxy's path) takes a place from them.
	if code, err := ask("POST", "/dump", "body"); code != 200 || err != nil {
		t.Fatalf("a request at the cap with idle connections: %d %v", code, err)
	}
	if n := h.pool.idleCount(leanKey{"", port}); n != 0 {
		t.Errorf("the lean pool keeps %d after giving its places up", n)
	}

	// Two requests held by the server take both places; the third is
	// refused, and the two still get their answers once released. The
	// POST's connection goes back to ReverseProxy's pool on the Transport's
	// own goroutine, possibly after the client has its answer: the idle
	// connections are closed until no place is held (one closed too soon
	// missed it, under load, and then held the place a gathering request
	// needed).
	for start := time.Now(); ; h.closeIdle() {
		if p.Held() == 0 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%d places still held after closing the idle connections", p.Held())
		}
		time.Sleep(5 * time.Millisecond)
	}
	results := make(chan string, 2)
	for range 2 {
		go func() {
			code, err := ask("GET", "/gather?n=3", "")
			results <- fmt.Sprint(code, err)
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for p.Held() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the two held requests took no places")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code, err := ask("GET", "/", ""); code != http.StatusServiceUnavailable || err != nil {
		t.Errorf("a request over the cap: %d %v, want 503", code, err)
	}
	// The third of the gathering, sent to the server directly, releases them.
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, "/gather?n=3"); got != "gathered" {
		t.Fatalf("the direct third: %q", got)
	}
	for range 2 {
		if r := <-results; r != "200 <nil>" {
			t.Errorf("a held request: %s, want 200", r)
		}
	}
}

// TestAttackLeanClientStatusUnder100: an answer whose status has three
// digits but is under 100 ("099", "000": http.ReadResponse takes them,
// the Transport too) would make the proxy's WriteHeader panic (net/http
// refuses such a code), a stack trace in the daemon's log for each
// request the server answers so; both paths answer 502 instead, naming
// the status, and what follows it never reaches the client.
func TestAttackLeanClientStatusUnder100(t *testing.T) {
	lp := newLeanPair(t)
	for _, status := range []string{"099", "000", "001"} {
		r := "GET " + rawAnswer("HTTP/1.1 "+status+" Odd\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nSECRET") + " HTTP/1.1\r\nHost: daemon.test\r\nConnection: close\r\n\r\n"
		got, want := lp.raw(t, lp.leanAddr, r), lp.raw(t, lp.refAddr, r)
		if got != want {
			t.Errorf("%s: the lean path answered\n%s\nReverseProxy answered\n%s", status, got, want)
		}
		if !strings.HasPrefix(got, "502 Bad Gateway\n") || !strings.Contains(got, "status "+status) || strings.Contains(got, "SECRET") {
			t.Errorf("%s: want a 502 naming the status, without the body:\n%s", status, got)
		}
	}
}

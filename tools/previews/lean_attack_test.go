//go:build linux

package previews

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/sandbox"
)

// leanPair is a lean proxy and a ReverseProxy-only one (the reference),
// each served on a loopback listener of its own, to one workspace server
// (previewsrv).
type leanPair struct {
	p                 *Previews
	lean, ref         *proxy
	leanAddr, refAddr string
	port              int
}

func newLeanPair(t *testing.T) *leanPair {
	t.Helper()
	p, ex, root := newProvider(t, sandbox.ModeSoftware)
	lp := &leanPair{p: p, port: startServer(t, ex, root, root, "")}
	admitAll := func(http.ResponseWriter, *http.Request) (Caller, bool) { return Caller{Face: "http"}, true }
	lp.lean, lp.ref = p.newProxy("/preview/", admitAll), p.newProxy("/preview/", admitAll)
	lp.ref.noLean = true
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
	lp.leanAddr, lp.refAddr = serve(lp.lean), serve(lp.ref)
	return lp
}

// raw sends req (its {P} the workspace server's port) as it is on a new
// connection to addr and returns every answer read until the connection
// ends: status, headers but Date, body and trailers, with addr written as
// PROXY. A connection that ends with bytes that are no answer says so.
func (lp *leanPair) raw(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A guard against a test that would hang; no answer takes this long.
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	if _, err := io.WriteString(c, strings.ReplaceAll(req, "{P}", strconv.Itoa(lp.port))); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var b strings.Builder
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(&b, "read: %v\n", err)
			}
			break
		}
		body, berr := io.ReadAll(resp.Body)
		resp.Body.Close()
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
		fmt.Fprintf(&b, "length %d te %q\n%s\ntrailer %v body error %v\n", resp.ContentLength, resp.TransferEncoding, body, resp.Trailer, berr)
		if berr != nil || resp.Close {
			break
		}
	}
	return strings.ReplaceAll(b.String(), addr, "PROXY")
}

// rawAnswer is the /raw target that makes previewsrv write b as its
// answer. A streamed answer (no length) names its type: ReverseProxy's
// first flush races its first write there (a timer of -1), so whether
// net/http sniffs a type for it is not the same from run to run, where the
// lean path flushes the header at once.
func rawAnswer(b string) string { return "/preview/{P}/raw?b=" + url.QueryEscape(b) }

// TestAttackLeanPath: hostile requests and hostile answers, sent on the
// wire to the lean proxy and to ReverseProxy alone, get the same result
// from both (what the workspace server saw, what the client got), and
// each case's own rule holds: a Connection header that names the
// credentials, Host or the forwarding headers does not bring them back; a
// GET that carries a body (Content-Length or chunked) goes through
// ReverseProxy, which sends the body as a body, and what follows it on
// the connection is one more request, never a second request smuggled to
// the server; a path that climbs out of "/preview/{port}/" reaches only
// that port's server; a server that answers 101 to a request that asked
// for no upgrade, floods 1xx answers, answers with both a length and
// chunks, or with a header folded over lines gets the same answer from
// both paths, and never a switched connection.
func TestAttackLeanPath(t *testing.T) {
	lp := newLeanPair(t)
	type attack struct {
		name   string
		req    string
		leaned int64                   // requests of req the lean path must serve
		check  func(out string) string // what must hold beyond equality; "" when it does
	}
	get := func(target string, hdr ...string) string {
		return "GET " + target + " HTTP/1.1\r\nHost: daemon.test\r\n" + strings.Join(hdr, "") + "Connection: close\r\n\r\n"
	}
	never := func(words ...string) func(string) string {
		return func(out string) string {
			for _, w := range words {
				if strings.Contains(out, w) {
					return fmt.Sprintf("%q reached the server or the client", w)
				}
			}
			return ""
		}
	}
	// Its length is taken with the port in place.
	smuggled := "GET /preview/" + strconv.Itoa(lp.port) + "/dump?smuggled=1 HTTP/1.1\r\nHost: x\r\n\r\n"
	attacks := []attack{
		{"connection names the credentials, host and forwarding headers",
			"GET /preview/{P}/dump HTTP/1.1\r\nHost: daemon.test\r\nConnection: Authorization, Host, X-Forwarded-For, X-Forwarded-Host, X-Forwarded-Prefix, Cookie, Te, close\r\n" +
				"Authorization: Bearer the-daemons-token\r\nCookie: session=stolen\r\nX-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Host: evil.example\r\nX-Forwarded-Prefix: /evil\r\nTe: trailers\r\n\r\n",
			1, func(out string) string {
				if s := never("the-daemons-token", "stolen", "6.6.6.6", "evil")(out); s != "" {
					return s
				}
				for _, want := range []string{"host=localhost:{P}", `X-Forwarded-For=["127.0.0.1"]`, `X-Forwarded-Host=["daemon.test"]`, `X-Forwarded-Prefix=["/preview/{P}"]`, `Te=["trailers"]`} {
					if !strings.Contains(out, strings.ReplaceAll(want, "{P}", strconv.Itoa(lp.port))) {
						return "the server did not see " + want
					}
				}
				return ""
			}},
		{"connection in another case and repeated", "GET /preview/{P}/dump HTTP/1.1\r\nHost: daemon.test\r\nconnection: x-a\r\nCONNECTION: , X-B ,\r\nX-A: 1\r\nX-B: 2\r\nX-C: 3\r\nConnection: close\r\n\r\n",
			1, func(out string) string {
				if strings.Contains(out, "X-A=") || strings.Contains(out, "X-B=") || !strings.Contains(out, "X-C=") {
					return "the headers the Connection header names were not the ones dropped"
				}
				return ""
			}},
		{"forwarding headers spoofed in another case", get("/preview/{P}/dump", "x-forwarded-for: 6.6.6.6\r\n", "FORWARDED: for=6.6.6.6\r\n", "authorization: Bearer the-daemons-token\r\n"),
			1, never("6.6.6.6", "the-daemons-token")},
		{"get with content-length and a smuggled request as its body",
			"GET /preview/{P}/dump HTTP/1.1\r\nHost: daemon.test\r\nContent-Length: " + strconv.Itoa(len(smuggled)) + "\r\n\r\n" + smuggled + get("/preview/{P}/dump?after=1"),
			1, func(out string) string {
				if strings.Contains(out, "smuggled=1") || strings.Count(out, "200 OK") != 2 || !strings.Contains(out, "body="+strconv.Itoa(len(smuggled))) {
					return "the body was not a body, or the request after it was not the second answer"
				}
				return ""
			}},
		{"get with a chunked body", "GET /preview/{P}/dump HTTP/1.1\r\nHost: daemon.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
			0, func(out string) string {
				if !strings.Contains(out, "body=5") {
					return "the chunked body did not arrive as a body"
				}
				return ""
			}},
		{"get with both a length and chunks", "GET /preview/{P}/dump HTTP/1.1\r\nHost: daemon.test\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
			0, func(out string) string {
				// RFC 9112: the chunks win and the length is dropped.
				if !strings.Contains(out, "body=5") || strings.Contains(out, "Content-Length=") {
					return "the request was not read by its chunks"
				}
				return ""
			}},
		{"get with content-length 0", get("/preview/{P}/dump", "Content-Length: 0\r\n"), 1, never("Content-Length=")},
		{"post with content-length 0", "POST /preview/{P}/dump HTTP/1.1\r\nHost: daemon.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 1, nil},
		{"dot segments", get("/preview/{P}/../../dump"), 1, nil},
		{"http/1.0", "GET /preview/{P}/dump HTTP/1.0\r\nHost: daemon.test\r\n\r\n", 1, nil},
		{"expect 100-continue without a body", get("/preview/{P}/dump", "Expect: 100-continue\r\n"), 1, nil},
		{"connect in path form", "CONNECT /preview/{P}/dump HTTP/1.1\r\nHost: daemon.test\r\nConnection: close\r\n\r\n", 1, nil},
		{"connect to the raw server", "CONNECT " + rawAnswer("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\ntunnelled") + " HTTP/1.1\r\nHost: daemon.test\r\nConnection: close\r\n\r\n", 1, func(out string) string {
			// What the server sends after its 200 reaches the client as a
			// body the proxy frames, never over a handed-over connection.
			if !strings.Contains(out, `te ["chunked"]`) {
				return "the answer to CONNECT was not a framed body"
			}
			return ""
		}},
		{"escaped dot segments toward another port", get("/preview/{P}/%2e%2e/%2e%2e/1/dump"), 1, func(out string) string {
			// previewsrv's "/" handler names the target it got.
			if !strings.Contains(out, "hello from the workspace at /%2e%2e/%2e%2e/1/dump") {
				return "the climbing path did not stay on the port's server"
			}
			return ""
		}},
		{"escaped slash in the port", get("/preview/{P}%2F..%2F1/dump"), 0, func(out string) string {
			if !strings.Contains(out, "400 Bad Request") {
				return "a port segment with an escaped slash was not refused"
			}
			return ""
		}},
		{"authority-looking path", get("/preview/{P}//evil.example/dump"), 1, nil},
		{"absolute form", "GET http://evil.example/preview/{P}/dump HTTP/1.1\r\nHost: daemon.test\r\nConnection: close\r\n\r\n", 1, nil},
		{"query escapes cut short", get("/preview/{P}/dump?a=%2&b=%"), 1, nil},
		{"backend switches protocol unasked", get(rawAnswer("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: evil\r\n\r\nraw bytes")), 1, never("raw bytes")},
		{"backend switches protocol without naming one", get(rawAnswer("HTTP/1.1 101 Switching Protocols\r\n\r\nraw bytes")), 1, never("raw bytes")},
		{"backend switches to an unprintable protocol", get(rawAnswer("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: \x80\x7f\r\n\r\n")), 1, nil},
		{"backend floods 1xx", get(rawAnswer(strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n", 20) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")), 1, nil},
		{"backend answers with a length and chunks", get(rawAnswer("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")), 1, nil},
		{"backend folds a header", get(rawAnswer("HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok")), 1, nil},
		{"backend's connection names its cookie and type", get(rawAnswer("HTTP/1.1 200 OK\r\nConnection: Set-Cookie, Content-Type\r\nSet-Cookie: s=1\r\nContent-Type: text/event-stream\r\nContent-Length: 2\r\n\r\nok")), 1, never("s=1", "event-stream")},
		{"backend announces hop-by-hop trailers", get(rawAnswer("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTrailer: Content-Length, Connection, X-T\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nContent-Length: 99\r\nX-T: 1\r\nX-U: 2\r\n\r\n")), 1, nil},
		{"backend closes before an answer", get(rawAnswer("")), 1, nil},
		{"backend sends 100 continue unasked", get(rawAnswer("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")), 1, nil},
		{"backend's body ends with its connection", get(rawAnswer("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end")), 1, nil},
		{"backend's header cut short", get(rawAnswer("HTTP/1.1 200 OK\r\nContent-Le")), 1, nil},
		{"backend answers garbage", get(rawAnswer("SSH-2.0-OpenSSH\r\n\r\n")), 1, nil},
		{"backend's answer cut short", get(rawAnswer("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")), 1, nil},
	}
	for _, a := range attacks {
		before := lp.lean.leaned.Load()
		got, want := lp.raw(t, lp.leanAddr, a.req), lp.raw(t, lp.refAddr, a.req)
		if n := lp.lean.leaned.Load() - before; n != a.leaned {
			t.Errorf("%s: the lean path served %d requests, want %d", a.name, n, a.leaned)
		}
		if got != want {
			t.Errorf("%s: the lean path answered\n%s\nReverseProxy answered\n%s", a.name, got, want)
		}
		if got == "" {
			t.Errorf("%s: no answer", a.name)
		}
		if a.check != nil {
			if msg := a.check(got); msg != "" {
				t.Errorf("%s: %s:\n%s", a.name, msg, got)
			}
		}
	}
	if n := lp.ref.leaned.Load(); n != 0 {
		t.Errorf("the reference proxy took the lean path %d times", n)
	}
}

// TestAttackLeanPathClientGone: a workspace server that never answers,
// whose answer never ends, or that sends 1xx answers without end, holds the daemon only while the client waits:
// once the client closes its connection the preview connection is closed
// and its place given back (Held is 0 again), on the lean path as on
// ReverseProxy's; nothing panics out of the handler (an answer under way
// is aborted with http.ErrAbortHandler, which net/http takes quietly), and
// the workspace server sees its connection closed.
func TestAttackLeanPathClientGone(t *testing.T) {
	lp := newLeanPair(t)
	waitHeld := func(what string, n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for lp.p.Held() != n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d preview connections held, want %d", what, lp.p.Held(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for _, target := range []string{"/preview/{P}/raw?hold=1", "/preview/{P}/forever", "/preview/{P}/hints"} {
		for _, side := range []struct {
			name string
			addr string
			h    *proxy
		}{{"ReverseProxy", lp.refAddr, lp.ref}, {"lean", lp.leanAddr, lp.lean}} {
			what := side.name + " " + target
			c, err := net.Dial("tcp", side.addr)
			if err != nil {
				t.Fatal(err)
			}
			before := lp.lean.leaned.Load()
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: daemon.test\r\n\r\n", strings.ReplaceAll(target, "{P}", strconv.Itoa(lp.port)))
			if strings.HasSuffix(target, "hints") {
				// 1xx answers are the caller's to bound (net/http counts
				// none once a trace sees them): some of the endless ones.
				if _, err := io.CopyN(io.Discard, c, 1<<20); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			if strings.HasSuffix(target, "forever") {
				// Some of the endless body, so the copy is under way.
				br := bufio.NewReader(c)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if _, err := io.CopyN(io.Discard, resp.Body, 1<<20); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			waitHeld(what+": while the client waits", 1)
			// The request has reached the server (a connection closed
			// before it is written goes to the pool of idle ones, given
			// back after IdleConnTimeout or when the cap is reached).
			deadline := time.Now().Add(30 * time.Second)
			for sent := int64(0); sent == 0; {
				lp.p.mu.Lock()
				for oc := range lp.p.open {
					sent += oc.in.Load()
				}
				lp.p.mu.Unlock()
				if time.Now().After(deadline) {
					t.Fatalf("%s: the request did not reach the server", what)
				}
				time.Sleep(5 * time.Millisecond)
			}
			c.Close()
			waitHeld(what+": after the client left", 0)
			// The server sees the connection go (not kept in a pool).
			waitOpen(t, strconv.Itoa(lp.port), what+": the server's side after the client left", 0)
			if served := lp.lean.leaned.Load() - before; (side.h == lp.lean) != (served == 1) {
				t.Errorf("%s: the lean path served %d", what, served)
			}
		}
	}
}

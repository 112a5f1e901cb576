package netguard

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The attack review of the network door (docs/security.md, "Attack
// review: the network door"): the cases that held, each against the real
// Client, with loopback servers the options admit by prefix or with no
// server at all.

// TestReviewAddressForms: the ways of writing a refused address. Each is
// refused by Vet (the rules Fetch and Dial apply) before anything is
// dialled; a name is judged by the address it resolves to, whatever its
// spelling, so the resolver here answers for names as a permissive one
// would (an IDN mapped, a trailing dot, a numeric name read as inet_aton
// reads it).
func TestReviewAddressForms(t *testing.T) {
	c := New(Options{AllowPorts: []uint16{80, 443, 8080}, Resolve: stub(map[string]string{
		"ｌｏｃａｌｈｏｓｔ": "127.0.0.1", "xn--lcalhost-x0a.test": "127.0.0.1", "127.0.0.1.": "127.0.0.1",
		"0x7f.1.": "127.0.0.1", "good.example": "93.184.216.34", "ⅰⅰ.test": "10.0.0.1",
	})})
	for _, raw := range []string{
		// IPv4 inside IPv6: mapped, compatible, NAT64, 6to4, Teredo.
		"http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/", "http://[::ffff:169.254.169.254]/",
		"http://[0:0:0:0:0:ffff:127.0.0.1]/", "http://[::127.0.0.1]/", "http://[::7f00:1]/",
		"http://[64:ff9b::a9fe:a9fe]/", "http://[64:ff9b::7f00:1]/", "http://[64:ff9b:1::a9fe:a9fe]/",
		"http://[2002:7f00:1::]/", "http://[2002:a9fe:a9fe::1]/", "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
		// Zones, the unspecified addresses, broadcast, loopback.
		"http://[fe80::1%25eth0]/", "http://[fe80::1%25lo]:8080/", "http://[2606:4700::1%25lo]/", "http://[::1%25lo]/",
		"http://0.0.0.0/", "http://0/", "http://[::]/", "http://[::1]/", "http://255.255.255.255/", "http://127.255.255.254/",
		// Names: trailing dots, case, percent-encoding, IDN and punycode.
		"http://localhost./", "http://LOCALHOST/", "http://LocalHost.:80/", "http://x.LOCALHOST./",
		"http://%6c%6f%63%61%6c%68%6f%73%74/", "http://%31%32%37.0.0.1/", "http://127.0.0.1./", "http://0x7f.1./",
		"http://ｌｏｃａｌｈｏｓｔ/", "http://xn--lcalhost-x0a.test/", "http://ⅰⅰ.test/", "http://metadata/", "http://METADATA.GOOGLE.INTERNAL./",
		// Userinfo: the host is what follows the last @.
		"http://good.example@127.0.0.1/", "http://good.example:80@127.0.0.1:8080/", "http://good.example%40127.0.0.1@127.0.0.2/",
		// Non-canonical IPv4.
		"http://0x7f000001/", "http://017700000001/", "http://127.0.1/", "http://0177.0.0.01/", "http://0x7F.0.0.1/",
		// Ports: the rules' port, as the dialler reads it.
		"http://good.example:8443/", "http://good.example:22/", "http://good.example:65616/", "https://good.example:0/",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			continue // Go's parser refuses it: no request is made
		}
		if addrs, err := c.Vet(context.Background(), u); !isBlocked(err) {
			t.Errorf("%s (host %q): %v, %v; want a refusal", raw, u.Hostname(), addrs, err)
		}
	}
	// Userinfo that only looks like a host, and a backslash: the host is
	// the one Go parses, which is the one dialled.
	for raw, want := range map[string]string{
		"http://127.0.0.1:80@good.example/": "93.184.216.34",
		"http://127.0.0.1@good.example:80/": "93.184.216.34",
		"http://good.example/\\@127.0.0.1/": "93.184.216.34",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if addrs, err := c.Vet(context.Background(), u); err != nil || fmt.Sprint(addrs) != "["+want+"]" {
			t.Errorf("%s: %v, %v; want [%s]", raw, addrs, err, want)
		}
	}
	for _, raw := range []string{"http://good.example\\@127.0.0.1/", "http://127.0.0.1\\.good.example/", "http://[::1]x/"} {
		if u, err := url.Parse(raw); err == nil {
			if _, err := c.Vet(context.Background(), u); err == nil {
				t.Errorf("%s (host %q) passed", raw, u.Host)
			}
		}
	}
	// Default and explicit ports are the same port; 0080 is port 80 to
	// the rules as to the dialler.
	for raw, ok := range map[string]bool{"http://good.example/": true, "http://good.example:80/": true, "http://good.example:0080/": true,
		"https://good.example:443/": true, "http://good.example:8081/": false, "https://good.example:80/": true} {
		u, _ := url.Parse(raw)
		if err := c.CheckURL(u); (err == nil) != ok {
			t.Errorf("CheckURL(%s): %v; want allowed %v", raw, err, ok)
		}
	}
}

// TestReviewRebinding: a resolver that answers an admitted address first
// and a refused one afterwards. Fetch resolves once per connection and
// dials the address it checked (the server is reached, the resolver asked
// once); the next connection gets the refused answer and is refused. Vet
// followed by Dial, the browser's path, is the same: Dial resolves and
// checks again rather than trusting Vet's answer.
func TestReviewRebinding(t *testing.T) {
	var hits atomic.Int32
	srv, opts := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1); w.Write([]byte("ok")) }))
	u, _ := url.Parse(srv.URL)
	var asked atomic.Int32
	opts.Resolve = func(_ context.Context, host string) ([]netip.Addr, error) {
		if asked.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("10.0.0.5")}, nil
	}
	c := New(opts)
	defer c.CloseIdleConnections()
	target := "http://rebind.test:" + u.Port() + "/"
	if res, err := get(t, c, target); err != nil || string(res.Body) != "ok" {
		t.Fatalf("first answer: %v", err)
	}
	if asked.Load() != 1 || hits.Load() != 1 {
		t.Errorf("resolver asked %d times, server hit %d times; want 1 and 1", asked.Load(), hits.Load())
	}
	c.CloseIdleConnections()
	if _, err := get(t, c, target); !isBlocked(err) || !strings.Contains(err.Error(), "10.0.0.5") {
		t.Errorf("second answer: %v; want a refusal naming 10.0.0.5", err)
	}
	if hits.Load() != 1 {
		t.Errorf("server hit %d times", hits.Load())
	}

	asked.Store(0)
	tu, _ := url.Parse(target)
	if _, err := c.Vet(context.Background(), tu); err != nil {
		t.Fatalf("Vet on the first answer: %v", err)
	}
	if conn, err := c.Dial(context.Background(), "tcp", tu.Host); !isBlocked(err) {
		if conn != nil {
			conn.Close()
		}
		t.Errorf("Dial after Vet, on the second answer: %v; want a refusal", err)
	}
}

// TestReviewRedirectTargets: a redirect to another scheme, a refused
// address in any spelling, a refused port; each is refused and the target
// is never reached.
func TestReviewRedirectTargets(t *testing.T) {
	var second atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { second.Add(1) }))
	defer other.Close()
	ou, _ := url.Parse(other.URL)
	srv, opts := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", r.URL.Query().Get("to"))
		w.WriteHeader(http.StatusFound)
	}))
	op, _ := strconv.Atoi(ou.Port())
	opts.AllowPorts = append(opts.AllowPorts, uint16(op), 80)
	c := New(opts)
	defer c.CloseIdleConnections()
	p := ou.Port()
	for _, to := range []string{
		"file:///etc/passwd", "gopher://127.0.0.1:" + p + "/_GET", "data:text/plain,hi", "ftp://127.0.0.1/", "javascript:alert(1)",
		"dict://127.0.0.1:" + p + "/", "ws://127.0.0.1:" + p + "/",
		"http://localhost:" + p + "/", "http://localhost.:" + p + "/", "http://0x7f.0.0.1:" + p + "/", "http://2130706433:" + p + "/",
		"http://127.1:" + p + "/", "http://[::ffff:127.0.0.2]:" + p + "/", "http://[::ffff:7f00:2]:" + p + "/",
		"//127.0.0.2:" + p + "/", "http://127.0.0.1:22/", "http://169.254.169.254/latest/meta-data/",
	} {
		_, err := get(t, c, srv.URL+"/?to="+url.QueryEscape(to))
		if err == nil {
			t.Errorf("redirect to %s followed", to)
		}
	}
	if second.Load() != 0 {
		t.Errorf("the other server was reached %d times", second.Load())
	}
}

// TestReviewResponseBodies: what a hostile server sends back is bounded:
// an endless chunked body and a gzip bomb are cut at the cap (the
// transport's transparent decoding counts decoded bytes); a body the
// caller asked compressed stays compressed; deflate is not decoded; a
// server that trickles its header or its body, or sends 100 Continue
// forever, ends with an error within the timeout.
func TestReviewResponseBodies(t *testing.T) {
	const limit = 64 << 10
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zw.Write(make([]byte, 4<<20)) // 4 KiB on the wire, 64 times the cap decoded
	zw.Close()
	cases := map[string]func(w *bufio.Writer, conn net.Conn){
		"/endless-chunked": func(w *bufio.Writer, conn net.Conn) {
			w.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
			chunk := strings.Repeat("x", 4096)
			for {
				fmt.Fprintf(w, "%x\r\n%s\r\n", len(chunk), chunk)
				if w.Flush() != nil {
					return
				}
			}
		},
		"/gzip-bomb": func(w *bufio.Writer, conn net.Conn) {
			fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n", bomb.Len())
			w.Write(bomb.Bytes())
			w.Flush()
		},
		"/deflate": func(w *bufio.Writer, conn net.Conn) {
			fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Encoding: deflate\r\nContent-Length: %d\r\n\r\n", bomb.Len())
			w.Write(bomb.Bytes())
			w.Flush()
		},
		"/slow-header": func(w *bufio.Writer, conn net.Conn) {
			for _, b := range []byte("HTTP/1.1 200 OK\r\nX-Slow: " + strings.Repeat("a", 1000)) {
				if _, err := conn.Write([]byte{b}); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		},
		"/slow-body": func(w *bufio.Writer, conn net.Conn) {
			conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"))
			for range 1000 {
				if _, err := conn.Write([]byte("x")); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		},
		"/continue-forever": func(w *bufio.Writer, conn net.Conn) {
			for {
				w.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
				if w.Flush() != nil {
					return
				}
			}
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer func() { ln.Close(); <-done }()
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				for {
					l, err := r.ReadString('\n')
					if err != nil || l == "\r\n" {
						break
					}
				}
				path := strings.Fields(line)[1]
				if f, ok := cases[path]; ok {
					f(bufio.NewWriter(conn), conn)
				}
			}()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	cl := New(Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, AllowPorts: []uint16{uint16(port)},
		MaxBodyBytes: limit, Timeout: time.Second})
	defer cl.CloseIdleConnections()
	base := "http://" + ln.Addr().String()

	for _, path := range []string{"/endless-chunked", "/gzip-bomb"} {
		res, err := get(t, cl, base+path)
		if err != nil || !res.Truncated || len(res.Body) != limit {
			t.Errorf("%s: %v; want the body cut at %d", path, err, limit)
		}
	}
	if res, err := get(t, cl, base+"/gzip-bomb", "Accept-Encoding", "gzip"); err != nil || res.Truncated || !bytes.Equal(res.Body, bomb.Bytes()) {
		t.Errorf("gzip asked for: %v; want the compressed bytes as sent", err)
	}
	if res, err := get(t, cl, base+"/deflate"); err != nil || res.Truncated || !bytes.Equal(res.Body, bomb.Bytes()) {
		t.Errorf("deflate: %v; want the bytes as sent", err)
	}
	for _, path := range []string{"/slow-header", "/slow-body", "/continue-forever"} {
		if res, err := get(t, cl, base+path); err == nil {
			t.Errorf("%s: answered %d with %d bytes; want an error", path, res.Status, len(res.Body))
		}
	}
}

// TestReviewNoEnvironmentProxy: a proxy named in the daemon's environment
// is not taken; the request goes straight to the admitted server.
func TestReviewNoEnvironmentProxy(t *testing.T) {
	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { proxied.Add(1) }))
	defer proxy.Close()
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"} {
		t.Setenv(k, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	srv, opts := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("direct")) }))
	c := New(opts)
	defer c.CloseIdleConnections()
	if res, err := get(t, c, srv.URL+"/"); err != nil || string(res.Body) != "direct" {
		t.Fatalf("%v", err)
	}
	if proxied.Load() != 0 {
		t.Errorf("the environment's proxy got %d requests", proxied.Load())
	}
}

// TestReviewDialRefusesBeforeConnecting: Dial's refusals need no server,
// and Dial refuses what is not TCP, whatever the address.
func TestReviewDialRefusesBeforeConnecting(t *testing.T) {
	c := New(Options{AllowPorts: []uint16{5432}})
	for _, addr := range []string{"[::ffff:127.0.0.1]:5432", "[64:ff9b::a9fe:a9fe]:5432", "[fe80::1%lo]:5432", "0.0.0.0:5432", "[::]:5432",
		"localhost.:5432", "LOCALHOST:5432", "0x7f.1:5432", "10.0.0.1:5432", "100.64.0.1:5432", "127.0.0.1:05432", "127.0.0.1:22"} {
		conn, err := c.Dial(context.Background(), "tcp", addr)
		var be *BlockedError
		if !errors.As(err, &be) {
			if conn != nil {
				conn.Close()
			}
			t.Errorf("Dial(%s): %v; want a refusal", addr, err)
		}
	}
	for _, network := range []string{"udp", "unix", "ip4:icmp", ""} {
		if _, err := c.Dial(context.Background(), network, "93.184.216.34:5432"); !isBlocked(err) {
			t.Errorf("Dial(%q): %v; want a refusal", network, err)
		}
	}
}

package netguard

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// rawServer serves every connection with answer, which reads the request
// line and writes what it likes, on a loopback port the returned client
// admits.
func rawServer(t *testing.T, opts Options, answer func(c net.Conn, r *bufio.Reader)) (*Client, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r := bufio.NewReader(c)
			if _, err := r.ReadString('\n'); err == nil {
				answer(c, r)
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	opts.AllowPrefixes = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	opts.AllowPorts = []uint16{uint16(port)}
	c := New(opts)
	t.Cleanup(c.CloseIdleConnections)
	return c, "http://" + ln.Addr().String() + "/"
}

// TestResponseHeadersBounded: a header of many short lines is refused past
// MaxResponseHeaderBytes, whether in the response or in 1xx responses
// before it; a header under the bound is read.
func TestResponseHeadersBounded(t *testing.T) {
	header := func(n int) string {
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			b.WriteString("h" + strconv.Itoa(i) + ": v\r\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, head string
		ok         bool
	}{
		{"small", header(64 << 10), true},
		{"past the bound", header(MaxResponseHeaderBytes + 64<<10), false},
		{"1xx responses past the bound", strings.Repeat("HTTP/1.1 103 Early Hints\r\n"+header(16<<10)+"\r\n", MaxResponseHeaderBytes/(16<<10)+2), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, u := rawServer(t, Options{}, func(c net.Conn, _ *bufio.Reader) {
				w := bufio.NewWriter(c)
				if strings.HasPrefix(tc.head, "HTTP/") { // 1xx responses, then the answer
					w.WriteString(tc.head + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				} else {
					w.WriteString("HTTP/1.1 200 OK\r\n" + tc.head + "Content-Length: 2\r\n\r\nok")
				}
				w.Flush()
			})
			res, err := get(t, c, u)
			if tc.ok && (err != nil || string(res.Body) != "ok") {
				t.Fatalf("%v", err)
			}
			if !tc.ok && err == nil {
				t.Fatalf("a header past %d bytes was read: %d fields", MaxResponseHeaderBytes, len(res.Header))
			}
		})
	}
}

// TestProxyGetsNoRefusedAddress: with the operator's proxy, a URL that
// names a refused address (metadata, loopback, private, IPv4 in IPv6),
// first or after a redirect, is refused before the request reaches the
// proxy; a name still goes to the proxy, which resolves it.
func TestProxyGetsNoRefusedAddress(t *testing.T) {
	got := make(chan string, 16)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.String()
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		}
	}))
	defer proxy.Close()
	pu, _ := url.Parse(proxy.URL)
	c := New(Options{Proxy: pu})
	defer c.CloseIdleConnections()
	for _, raw := range []string{"http://169.254.169.254/latest/meta-data/", "http://127.0.0.1/", "http://10.0.0.1/", "http://[::ffff:169.254.169.254]/",
		"http://[fd00:ec2::254]/", "http://100.100.100.200/"} {
		if _, err := get(t, c, raw); !isBlocked(err) {
			t.Errorf("%s through the proxy: %v; want a refusal", raw, err)
		}
	}
	if _, err := get(t, c, "http://api.example/redirect"); !isBlocked(err) {
		t.Errorf("a redirect to the metadata address through the proxy: %v; want a refusal", err)
	}
	close(got)
	var seen []string
	for u := range got {
		seen = append(seen, u)
	}
	if len(seen) != 1 || seen[0] != "http://api.example/redirect" {
		t.Errorf("the proxy got %q; want only the named host's request", seen)
	}
}

package netguard

import (
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
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stub resolves the test names; anything else does not exist.
func stub(names map[string]string) func(context.Context, string) ([]netip.Addr, error) {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := names[host]; ok {
			var out []netip.Addr
			for _, s := range strings.Split(a, ",") {
				out = append(out, netip.MustParseAddr(s))
			}
			return out, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
}

func get(t *testing.T, c *Client, raw string, hdr ...string) (*Result, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return c.Fetch(context.Background(), req)
}

// TestRefused: every rule, before and after resolution.
func TestRefused(t *testing.T) {
	c := New(Options{AllowPorts: []uint16{80, 443, 8080}, Resolve: stub(map[string]string{
		"loop.test": "127.0.0.1", "private.test": "10.0.0.5", "private172.test": "172.16.3.4", "private192.test": "192.168.1.1",
		"meta.test": "169.254.169.254", "cgnat.test": "100.64.1.1", "v6loop.test": "::1", "mapped.test": "::ffff:127.0.0.1",
		"mapped-private.test": "::ffff:10.0.0.1", "ula.test": "fd00::1", "linklocal6.test": "fe80::1", "multicast.test": "224.0.0.1",
		"unspecified.test": "0.0.0.0", "doc.test": "192.0.2.1", "nat64.test": "64:ff9b::7f00:1", "mixed.test": "10.0.0.1,127.0.0.1",
		"benchmark.test": "198.18.0.1", "broadcast.test": "255.255.255.255",
	})})
	defer c.CloseIdleConnections()
	for _, tc := range []struct{ url, want string }{
		{"ftp://example.com/x", "only http and https"},
		{"file:///etc/passwd", "only http and https"},
		{"gopher://example.com/", "only http and https"},
		{"http://example.com:22/", "port 22 is not allowed"},
		{"http://localhost/", "is this machine"},
		{"http://LOCALHOST./", "is this machine"},
		{"http://api.localhost/", "is this machine"},
		{"http://printer.local/", "local or internal"},
		{"http://metadata.google.internal/computeMetadata/v1/", "local or internal"},
		{"http://db.internal/", "local or internal"},
		{"http://2130706433/", "non-canonical"},
		{"http://0177.0.0.1/", "non-canonical"},
		{"http://0x7f.1/", "non-canonical"},
		{"http://0x7f000001/", "non-canonical"},
		{"http://127.1/", "non-canonical"},
		{"http://127.0.0.1/", "prohibited IP"},
		{"http://[::1]/", "prohibited IP"},
		{"http://169.254.169.254/latest/meta-data/", "prohibited IP"},
		{"http://[::ffff:127.0.0.1]/", "prohibited IP"},
		{"http://[fe80::1]/", "prohibited IP"},
		{"http://0.0.0.0:8080/", "prohibited IP"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, err := get(t, c, tc.url)
			var be *BlockedError
			if !errors.As(err, &be) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v; want a BlockedError containing %q", err, tc.want)
			}
		})
	}
	for _, name := range []string{"loop", "private", "private172", "private192", "meta", "cgnat", "v6loop", "mapped", "mapped-private",
		"ula", "linklocal6", "multicast", "unspecified", "doc", "nat64", "mixed", "benchmark", "broadcast"} {
		t.Run(name+".test", func(t *testing.T) {
			_, err := get(t, c, "http://"+name+".test/")
			var be *BlockedError
			if !errors.As(err, &be) || !strings.Contains(err.Error(), "resolves to") {
				t.Fatalf("%v; want a BlockedError saying what %s resolves to", err, name)
			}
		})
	}
}

// loopbackServer is a test server the client explicitly allows.
func loopbackServer(t *testing.T, h http.Handler) (*httptest.Server, Options) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	return srv, Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, AllowPorts: []uint16{uint16(port)}}
}

func TestAllowedServerAndBodyCap(t *testing.T) {
	srv, opts := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("x", 3000)))
	}))
	opts.MaxBodyBytes = 1000
	c := New(opts)
	defer c.CloseIdleConnections()
	res, err := get(t, c, srv.URL+"/")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 200 || len(res.Body) != 1000 || !res.Truncated {
		t.Errorf("status %d, %d bytes, truncated %v", res.Status, len(res.Body), res.Truncated)
	}
}

// TestRedirects: each hop is checked, credentials stay with their origin,
// loops and long chains end with an error.
func TestRedirects(t *testing.T) {
	var second *httptest.Server
	gotAuth := make(chan string, 4)
	first, opts := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-private":
			http.Redirect(w, r, "http://10.0.0.5/", http.StatusFound)
		case "/to-name":
			http.Redirect(w, r, "http://loop.test:"+r.URL.Query().Get("port")+"/", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/chain":
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			http.Redirect(w, r, fmt.Sprintf("/chain?n=%d", n+1), http.StatusFound)
		case "/same-origin":
			http.Redirect(w, r, "/echo-auth", http.StatusFound)
		case "/cross-origin":
			http.Redirect(w, r, second.URL+"/echo-auth", http.StatusFound)
		case "/echo-auth":
			gotAuth <- "first:" + r.Header.Get("Authorization") + r.Header.Get("X-Api-Key")
		}
	}))
	second = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth <- "second:" + r.Header.Get("Authorization") + r.Header.Get("Cookie") + r.Header.Get("X-Api-Key") + "|" + r.Header.Get("Accept")
	}))
	defer second.Close()
	u2, _ := url.Parse(second.URL)
	p2, _ := strconv.Atoi(u2.Port())
	opts.AllowPorts = append(opts.AllowPorts, uint16(p2), 80)
	opts.Resolve = stub(map[string]string{"loop.test": "127.0.0.2"})
	c := New(opts)
	defer c.CloseIdleConnections()

	if _, err := get(t, c, first.URL+"/to-private"); !isBlocked(err) {
		t.Errorf("redirect to a private address: %v", err)
	}
	if _, err := get(t, c, first.URL+"/to-name?port="+u2.Port()); !isBlocked(err) {
		t.Errorf("redirect to a name resolving to loopback: %v", err)
	}
	if _, err := get(t, c, first.URL+"/loop"); err == nil || !strings.Contains(err.Error(), "redirect loop") {
		t.Errorf("loop: %v", err)
	}
	if _, err := get(t, c, first.URL+"/chain?n=0"); err == nil || !strings.Contains(err.Error(), "too many redirects (more than 3)") {
		t.Errorf("chain: %v", err)
	}
	if _, err := get(t, c, first.URL+"/same-origin", "Authorization", "Bearer s3cret", "X-Api-Key", "k1"); err != nil {
		t.Fatal(err)
	}
	if got := <-gotAuth; got != "first:Bearer s3cretk1" {
		t.Errorf("same-origin hop: %q", got)
	}
	// An API key travels in a header of any name: another origin (which
	// may be the agent's) gets none but those that carry no credential.
	if _, err := get(t, c, first.URL+"/cross-origin", "Authorization", "Bearer s3cret", "Cookie", "session=1", "X-Api-Key", "k1", "Accept", "application/json"); err != nil {
		t.Fatal(err)
	}
	if got := <-gotAuth; got != "second:|application/json" {
		t.Errorf("cross-origin hop kept credentials: %q", got)
	}
}

func isBlocked(err error) bool {
	var be *BlockedError
	return errors.As(err, &be)
}

// TestOperatorKnobs: AllowHosts exempts a name; AllowPrivate admits
// loopback and private addresses but never link-local (metadata).
func TestOperatorKnobs(t *testing.T) {
	srv, opts := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	u, _ := url.Parse(srv.URL)
	names := stub(map[string]string{"api.internal": "127.0.0.1", "meta.test": "169.254.169.254"})

	strict := New(Options{AllowPorts: opts.AllowPorts, Resolve: names})
	defer strict.CloseIdleConnections()
	if _, err := get(t, strict, "http://api.internal:"+u.Port()+"/"); !isBlocked(err) {
		t.Errorf("without AllowHosts: %v", err)
	}
	exempt := New(Options{AllowPorts: opts.AllowPorts, Resolve: names, AllowHosts: []string{"*.internal"}})
	defer exempt.CloseIdleConnections()
	if res, err := get(t, exempt, "http://api.internal:"+u.Port()+"/"); err != nil || string(res.Body) != "ok" {
		t.Errorf("AllowHosts: %v", err)
	}
	private := New(Options{AllowPorts: append(opts.AllowPorts, 80), Resolve: names, AllowPrivate: true})
	defer private.CloseIdleConnections()
	if res, err := get(t, private, srv.URL+"/"); err != nil || string(res.Body) != "ok" {
		t.Errorf("AllowPrivate, loopback: %v", err)
	}
	if _, err := get(t, private, "http://meta.test/"); !isBlocked(err) {
		t.Errorf("AllowPrivate, metadata: %v", err)
	}
}

func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"http://example.com/", "http://0x7f.1/", "http://[::1]:80/", "http://a.localhost/", "https://1.2.3.4:443/"} {
		f.Add(s)
	}
	c := New(Options{})
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		if c.CheckURL(u) == nil {
			h := strings.ToLower(u.Hostname())
			if strings.Contains(h, "localhost") && (h == "localhost" || strings.HasSuffix(h, ".localhost")) {
				t.Fatalf("accepted %q", raw)
			}
		}
	})
}

// TestDialRules: a raw TCP connection (a database client's) is held to the rules of a request (the
// port, the names, every resolved address) and reaches a loopback listener
// only when the options admit it; through a proxy none is made.
func TestDialRules(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	pn, _ := strconv.Atoi(port)
	ctx := context.Background()
	strict := New(Options{AllowPorts: []uint16{uint16(pn), 5432}, Resolve: stub(map[string]string{"rebind.example": "127.0.0.1", "db.example": "10.0.0.5"})})
	for _, tc := range []struct{ host, port, want string }{
		{"127.0.0.1", port, "127.0.0.1"},
		{"localhost", port, "is this machine"},
		{"rebind.example", port, "resolves to 127.0.0.1"},
		{"169.254.169.254", "5432", "169.254.169.254"},
		{"db.example", "5432", "resolves to 10.0.0.5"},
		{"2130706433", "5432", "non-canonical"},
		{"127.0.0.1", "22", "port 22 is not allowed"},
	} {
		c, err := strict.Dial(ctx, "tcp", net.JoinHostPort(tc.host, tc.port))
		var be *BlockedError
		if err == nil || !errors.As(err, &be) || !strings.Contains(err.Error(), tc.want) {
			if c != nil {
				c.Close()
			}
			t.Errorf("Dial(%s, %s): %v; want a refusal with %q", tc.host, tc.port, err, tc.want)
		}
	}
	open := New(Options{AllowPorts: []uint16{uint16(pn)}, AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	c, err := open.Dial(ctx, "tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := c.Read(buf); err != nil || string(buf) != "hi" {
		t.Errorf("read %q %v", buf, err)
	}
	c.Close()
	proxied := New(Options{AllowPorts: []uint16{uint16(pn)}, AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Proxy: &url.URL{Scheme: "http", Host: "proxy.example:3128"}})
	if c, err := proxied.Dial(ctx, "tcp", net.JoinHostPort("127.0.0.1", port)); err == nil || !strings.Contains(err.Error(), "proxy") {
		if c != nil {
			c.Close()
		}
		t.Errorf("through a proxy: %v", err)
	}
}

// TestVet: the rules for a URL another fetcher will load: the URL rules,
// then every resolved address; what passes is returned.
func TestVet(t *testing.T) {
	c := New(Options{Resolve: stub(map[string]string{
		"public.example": "93.184.216.34", "meta.example": "169.254.169.254", "mixed.example": "10.0.0.1,93.184.216.35",
	})})
	for _, tc := range []struct {
		url, want string
	}{
		{"https://public.example/x", "93.184.216.34"},
		{"https://mixed.example/", "93.184.216.35"},
		{"https://meta.example/", "refused https://meta.example/: meta.example resolves to 169.254.169.254"},
		{"http://169.254.169.254/latest/", "refused"},
		{"https://127.0.0.1/", "refused"},
		{"file:///etc/passwd", "only http and https"},
		{"https://public.example:8443/", "port 8443 is not allowed"},
		{"https://user:secret@meta.example/", "refused https://meta.example/"},
		{"https://nowhere.example/", "no such host"},
	} {
		u, _ := url.Parse(tc.url)
		addrs, err := c.Vet(context.Background(), u)
		got := fmt.Sprint(addrs)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, tc.want) || strings.Contains(got, "secret") {
			t.Errorf("%s: %s; want %q", tc.url, got, tc.want)
		}
	}
}

// TestDial: a connection by address (a proxy's tunnel) gets the port, name
// and address rules, and reaches an admitted server.
func TestDial(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	c := New(Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, AllowPorts: []uint16{uint16(port), 443},
		Resolve: stub(map[string]string{"meta.example": "169.254.169.254"})})
	conn, err := c.Dial(context.Background(), "tcp", u.Host)
	if err != nil {
		t.Fatalf("admitted server: %v", err)
	}
	conn.Close()
	for _, addr := range []string{"127.0.0.2:" + u.Port(), "127.0.0.1:1", "localhost:" + u.Port(), "0x7f.1:443", "meta.example:443", "[::1]:443", "nonsense"} {
		_, err := c.Dial(context.Background(), "tcp", addr)
		var be *BlockedError
		if !errors.As(err, &be) {
			t.Errorf("%s: %v; want a refusal", addr, err)
		}
	}
	if _, err := c.Dial(context.Background(), "udp", u.Host); err == nil || !strings.Contains(err.Error(), "only TCP connections are made, not udp") {
		t.Errorf("udp to an admitted address: %v", err)
	}
}

// TestErrorsRedactURLs: a refusal or a failed connection names the URL
// without its credentials, query or fragment, which may hold a key an
// operator's code put there; the message reaches the agent.
func TestErrorsRedactURLs(t *testing.T) {
	srv, opts := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	u, _ := url.Parse(srv.URL)
	srv.Close() // a closed port: the connection is refused
	c := New(opts)
	defer c.CloseIdleConnections()
	for _, raw := range []string{
		"http://10.0.0.1/weather?appid=SECRET-1&q=x",       // refused by the door
		"http://user:SECRET-2@10.0.0.1/x#SECRET-3",         // credentials and fragment
		"http://" + u.Host + "/weather?appid=SECRET-4&q=x", // refused by the kernel
	} {
		_, err := get(t, c, raw)
		if err == nil {
			t.Fatalf("%s: no error", raw)
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("the error names a secret of %s: %v", raw, err)
		}
		t.Logf("%s: %v", raw, err)
	}
	if got := redact(&url.URL{Scheme: "https", Host: "api.test", Path: "/v1", RawQuery: "key=s"}); got != "https://api.test/v1?…" {
		t.Errorf("redact: %q", got)
	}
}

package netguard

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// TestAllowLoopback: with AllowLoopback a host written as this machine
// (localhost, a name under .localhost, 127.0.0.0/8, ::1) passes at any
// port, over http and https, and only its loopback addresses are dialled;
// a name that resolves to loopback, a private address and another port of
// a remote host stay refused; without it loopback stays refused. Fetch
// reaches a real loopback server on a port of its own.
func TestAllowLoopback(t *testing.T) {
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "localhost", "dev.localhost":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.0.0.7")}, nil
		case "rebind.example.com":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
	}
	on := New(Options{AllowLoopback: true, Resolve: resolve})
	off := New(Options{Resolve: resolve})
	ctx := context.Background()
	for _, tc := range []struct {
		url    string
		on     bool
		onlyLo bool // the addresses returned are loopback only
	}{
		{"http://127.0.0.1:5173/", true, true},
		{"https://127.0.0.2:8443/", true, true},
		{"http://[::1]:3000/", true, true},
		{"http://localhost:8080/", true, true},
		{"http://dev.localhost:9/", true, true},
		{"http://rebind.example.com:8080/", false, false},
		{"http://rebind.example.com/", false, false},
		{"http://10.0.0.7:8080/", false, false},
		{"http://example.com:8080/", false, false},
		{"https://example.com/", true, false},
	} {
		u, _ := url.Parse(tc.url)
		addrs, err := on.Vet(ctx, u)
		if (err == nil) != tc.on {
			t.Errorf("AllowLoopback, %s: %v, %v; want allowed %v", tc.url, addrs, err, tc.on)
		}
		if tc.onlyLo {
			for _, a := range addrs {
				if !a.IsLoopback() {
					t.Errorf("AllowLoopback, %s: address %s is not loopback", tc.url, a)
				}
			}
		}
		if LoopbackHost(u.Hostname()) {
			var be *BlockedError
			if _, err := off.Vet(ctx, u); !errors.As(err, &be) {
				t.Errorf("without AllowLoopback, %s: %v; want a refusal", tc.url, err)
			}
		}
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("local page")) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	real := New(Options{AllowLoopback: true})
	defer real.CloseIdleConnections()
	for _, host := range []string{"127.0.0.1", "localhost"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+host+":"+port+"/", nil)
		res, err := real.Fetch(ctx, req)
		if err != nil || res.Status != 200 || !strings.Contains(string(res.Body), "local page") {
			t.Errorf("Fetch http://%s:%s/ with AllowLoopback: %v, %+v", host, port, err, res)
		}
	}
	conn, err := real.Dial(ctx, "tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		t.Errorf("Dial 127.0.0.1:%s with AllowLoopback: %v", port, err)
	} else {
		conn.Close()
	}
}

// TestLoopbackJudge: a connection to this machine (a loopback address, by
// address or by a name the rules admit, and the unspecified address) made
// under a context holding a judge passes it first, with the port: its
// error refuses the connection as a *BlockedError, through Dial and Fetch
// alike; without a judge, or for another address, nothing is asked.
func TestLoopbackJudge(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "local") })}
	go srv.Serve(ln)
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	c := New(Options{AllowLoopback: true, AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/32")}, AllowPorts: []uint16{uint16(port)}})
	var asked []int
	refuse := WithLoopbackJudge(context.Background(), func(p int) error { asked = append(asked, p); return errors.New("not this caller's") })
	admit := WithLoopbackJudge(context.Background(), func(p int) error { asked = append(asked, p); return nil })
	for _, host := range []string{"127.0.0.1", "localhost", "0.0.0.0"} {
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		asked = nil
		var be *BlockedError
		if conn, err := c.Dial(refuse, "tcp", addr); !errors.As(err, &be) || !strings.Contains(err.Error(), "not this caller's") {
			if conn != nil {
				conn.Close()
			}
			t.Errorf("Dial %s under a refusing judge: %v", addr, err)
		}
		req, _ := http.NewRequestWithContext(refuse, http.MethodGet, "http://"+addr+"/", nil)
		if _, err := c.Fetch(refuse, req); !errors.As(err, &be) {
			t.Errorf("Fetch %s under a refusing judge: %v", addr, err)
		}
		if len(asked) != 2 || asked[0] != port || asked[1] != port {
			t.Errorf("%s: the judge was asked %v, want port %d twice", addr, asked, port)
		}
		conn, err := c.Dial(admit, "tcp", addr)
		if err != nil {
			t.Errorf("Dial %s under an admitting judge: %v", addr, err)
		} else {
			conn.Close()
		}
		if conn, err := c.Dial(context.Background(), "tcp", addr); err != nil {
			t.Errorf("Dial %s without a judge: %v", addr, err)
		} else {
			conn.Close()
		}
	}
	// A connection admitted for one caller does not serve another's
	// request: judged requests share no keep-alive pool.
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequestWithContext(admit, http.MethodGet, url, nil)
		if res, err := c.Fetch(admit, req); err != nil || string(res.Body) != "local" {
			t.Fatalf("Fetch under an admitting judge: %v", err)
		}
		req, _ = http.NewRequestWithContext(refuse, http.MethodGet, url, nil)
		if _, err := c.Fetch(refuse, req); err == nil {
			t.Errorf("Fetch under a refusing judge right after an admitted one (%d) was served", i)
		}
	}
	asked = nil
	if _, err := c.Dial(refuse, "tcp", "10.255.255.1:80"); err == nil || len(asked) != 0 {
		t.Errorf("a refused non-loopback address: %v, judge asked %v", err, asked)
	}
	// An address of this machine's own interfaces reaches a listener on
	// 0.0.0.0 too: judged the same (the test's servers listen on loopback
	// only, so the refusal is all that is checked).
	ifs, _ := net.InterfaceAddrs()
	for _, ia := range ifs {
		ipn, ok := ia.(*net.IPNet)
		own, ok2 := netip.AddrFromSlice(ipn.IP)
		if !ok || !ok2 || own.Unmap().IsLoopback() || !own.Unmap().Is4() {
			continue
		}
		own = own.Unmap()
		oc := New(Options{AllowPrefixes: []netip.Prefix{netip.PrefixFrom(own, 32)}, AllowPorts: []uint16{uint16(port)}})
		asked = nil
		var be *BlockedError
		if _, err := oc.Dial(refuse, "tcp", net.JoinHostPort(own.String(), strconv.Itoa(port))); !errors.As(err, &be) || len(asked) != 1 {
			t.Errorf("this machine's address %s under a refusing judge: %v, asked %v", own, err, asked)
		}
		break
	}
}

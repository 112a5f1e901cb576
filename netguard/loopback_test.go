package netguard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
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

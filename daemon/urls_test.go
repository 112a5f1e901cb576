package daemon

import (
	"net"
	"reflect"
	"testing"
)

// TestPasteableURLs: a wildcard bind lists loopback and the interface
// addresses (IPv4 first, no link-local, capped); a bind to one address
// lists nothing more.
func TestPasteableURLs(t *testing.T) {
	ifaces := func() ([]net.Addr, error) {
		var out []net.Addr
		for _, c := range []string{"127.0.0.1/8", "::1/128", "10.1.2.3/24", "fe80::1/64", "2001:db8::5/64", "192.168.7.9/24"} {
			ip, n, _ := net.ParseCIDR(c)
			out = append(out, &net.IPNet{IP: ip, Mask: n.Mask})
		}
		return out, nil
	}
	got := pasteableURLs("http", &net.TCPAddr{IP: net.IPv4zero, Port: 3001}, "/mcp", ifaces)
	want := []string{"http://127.0.0.1:3001/mcp", "http://10.1.2.3:3001/mcp", "http://192.168.7.9:3001/mcp", "http://[2001:db8::5]:3001/mcp"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("0.0.0.0: %q, want %q", got, want)
	}
	if got := pasteableURLs("https", &net.TCPAddr{IP: net.IPv6unspecified, Port: 443}, "/mcp", ifaces); len(got) != 4 || got[0] != "https://127.0.0.1:443/mcp" {
		t.Errorf("[::]: %q", got)
	}
	if got := pasteableURLs("http", &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 3001}, "/mcp", ifaces); got != nil {
		t.Errorf("a single address: %q", got)
	}
	many := func() ([]net.Addr, error) {
		var out []net.Addr
		for i := 1; i <= 20; i++ {
			out = append(out, &net.IPNet{IP: net.IPv4(10, 0, 0, byte(i)), Mask: net.CIDRMask(24, 32)})
		}
		return out, nil
	}
	if got := pasteableURLs("http", &net.TCPAddr{IP: net.IPv4zero, Port: 1}, "/mcp", many); len(got) != maxListedURLs {
		t.Errorf("capped: %d URLs", len(got))
	}
}

package admit

import (
	"go/ast"
	"go/token"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/srcscan"
)

func TestClientAddr(t *testing.T) {
	v4 := netip.MustParseAddr("192.0.2.7")
	for _, c := range []struct {
		name string
		a    net.Addr
		want netip.Addr
	}{
		{"tcp4", &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 1}, v4},
		{"tcp4 in 4 bytes", &net.TCPAddr{IP: net.IP{192, 0, 2, 7}, Port: 1}, v4},
		{"tcp4-mapped", &net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 1}, v4},
		{"tcp6", &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 1}, netip.MustParseAddr("2001:db8::1")},
		{"tcp6 zone", &net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 1, Zone: "eth0"}, netip.MustParseAddr("fe80::1")},
		{"written", addrString("[::ffff:192.0.2.7]:22"), v4},
		{"written zone", addrString("[fe80::1%eth0]:22"), netip.MustParseAddr("fe80::1")},
		{"pipe", addrString("pipe"), netip.Addr{}},
		{"unix", &net.UnixAddr{Name: "@", Net: "unix"}, netip.Addr{}},
		{"nil", nil, netip.Addr{}},
	} {
		if got := ClientAddr(c.a); got != c.want {
			t.Errorf("%s: ClientAddr = %v, want %v", c.name, got, c.want)
		}
	}
	// A request's RemoteAddr gives the key its connection gives.
	for _, s := range []string{"192.0.2.7:80", "[::ffff:192.0.2.7]:80", "[::1]:80"} {
		ap := netip.MustParseAddrPort(s)
		if got, want := ClientAddrOf(s), ClientAddr(net.TCPAddrFromAddrPort(ap)); got != want {
			t.Errorf("ClientAddrOf(%q) = %v; its connection's ClientAddr is %v", s, got, want)
		}
	}
}

// TestInflightOneKeyPerClient: the requests in flight of one client are
// one count however its address is written.
func TestInflightOneKeyPerClient(t *testing.T) {
	f := NewInflight(1, 1)
	s, ok := f.Acquire(t.Context(), "192.0.2.7:1")
	if !ok {
		t.Fatal("refused the first request")
	}
	defer f.Release(s)
	if _, ok := f.Acquire(t.Context(), "[::ffff:192.0.2.7]:2"); ok {
		t.Error("the same client, its address written IPv4-mapped, got a second slot over a limit of 1")
	}
}

type addrString string

func (a addrString) Network() string { return "test" }
func (a addrString) String() string  { return string(a) }

// otherAddrs are the files that read a peer's address by a rule of their
// own, each with the reason.
var otherAddrs = map[string]string{
	"tools/previews/lean.go": "X-Forwarded-For is the host of RemoteAddr as written, as httputil.ReverseProxy writes it (TestLeanMatchesReverseProxy)",
	"tools/browser/proxy.go": "the proxy's peer and local socket addresses with their ports, to find the socket's owner in /proc/net/tcp",
}

// TestClientAddrHasOneHome: a client's address, the key of every
// per-address bound, is ClientAddr (or ClientAddrOf), so no other file
// reads one from a RemoteAddr itself (a *net.TCPAddr assertion, a
// netip.AddrFromSlice, or a parse of a RemoteAddr) and perhaps keys a
// mapped or zoned address apart from its plain one.
func TestClientAddrHasOneHome(t *testing.T) {
	allowed := srcscan.NewExceptions("otherAddrs", otherAddrs)
	remotes := 0
	srcscan.OtherFiles(t, "../..", func(rel string, fset *token.FileSet, f *ast.File) {
		rel = filepath.ToSlash(rel)
		imports := srcscan.ImportNames(f)
		ast.Inspect(f, func(n ast.Node) bool {
			var why string
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if n.Sel.Name == "RemoteAddr" {
					remotes++
				}
				return true
			case *ast.TypeAssertExpr:
				if mentionsRemote(n.X) {
					why = "asserts a RemoteAddr's type"
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				switch imports[pkg.Name] + "." + sel.Sel.Name {
				case "net/netip.AddrFromSlice":
					why = "turns a net.IP into a netip.Addr"
				case "net.SplitHostPort", "net/netip.ParseAddrPort", "net/netip.ParseAddr", "net.ParseIP":
					for _, a := range n.Args {
						if mentionsRemote(a) {
							why = "parses a RemoteAddr"
						}
					}
				}
			}
			if why == "" {
				return true
			}
			if allowed.Allows(rel) {
				return true
			}
			t.Errorf("%s: %s: a client's address is admit.ClientAddr (or ClientAddrOf); or list the file in otherAddrs with the reason", fset.Position(n.Pos()), why)
			return true
		})
	})
	if remotes < 10 {
		t.Fatalf("only %d RemoteAddr selectors found: the scan no longer reads the module", remotes)
	}
	allowed.Check(t, "reads a RemoteAddr itself")
}

// mentionsRemote reports whether e refers to a RemoteAddr (a field, a
// method or a variable so named, in any case).
func mentionsRemote(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && strings.EqualFold(id.Name, "remoteAddr") {
			found = true
		}
		return !found
	})
	return found
}

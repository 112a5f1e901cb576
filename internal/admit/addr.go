package admit

import (
	"net"
	"net/netip"
)

// ClientAddr is the client address of a connection whose peer is a, the key
// of every per-address bound of the daemon: the listener's connections per
// address (daemon/connlimit.go), the SSH servers' handshakes and channels
// (ssh/sshd), the SSH port's login back-off (ssh/sshauth) and the requests
// in flight (Inflight). An IPv4-mapped IPv6 address is taken as the IPv4
// one, so a client on a dual-stack listener has one key whichever way its
// address is written, and the zone is not part of it. The zero Addr is the
// address of a peer that has none (net.Pipe, a Unix socket): such peers
// share one key.
//
// TestClientAddrHasOneHome fails on a file that derives a client's address
// itself.
func ClientAddr(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return ip.Unmap()
		}
	}
	if a == nil {
		return netip.Addr{}
	}
	return ClientAddrOf(a.String())
}

// ClientAddrOf is ClientAddr of an address as written "host:port"
// (http.Request.RemoteAddr).
func ClientAddrOf(hostport string) netip.Addr {
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().WithZone("").Unmap()
}

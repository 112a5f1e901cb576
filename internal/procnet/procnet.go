// Package procnet parses the kernel's TCP socket tables (/proc/net/tcp,
// /proc/PID/net/tcp and tcp6), which its callers read: the listening
// sockets of a network namespace (previews) and the owner of one connection
// (the browser's proxy). One parser for both, fuzzed.
package procnet

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
)

// Listener is a TCP socket in state LISTEN, as a /proc/net/tcp table shows
// it: its local address and the inode that names it in /proc/PID/fd.
type Listener struct {
	Addr  netip.AddrPort
	Inode uint64
}

// stateListen is TCP_LISTEN in the "st" column.
const stateListen = "0A"

// Listeners reads a /proc/PID/net/tcp or tcp6 table and returns its
// listening sockets. The first line is the header. Lines of other states
// are skipped after their state is read; a listening line that does not
// parse is an error naming the line, since a half-read table must not pass
// for a whole one.
//
// Addresses are printed as 32-bit words in the kernel's byte order (each
// word with %08X), the port as a 16-bit number in hex.
func Listeners(data []byte) ([]Listener, error) {
	var out []Listener
	for n := 0; len(data) > 0; n++ {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		if n == 0 {
			continue // header: "  sl  local_address rem_address   st ..."
		}
		f := bytes.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 10 {
			return nil, fmt.Errorf("line %d: %d fields, want at least 10", n+1, len(f))
		}
		if string(f[3]) != stateListen {
			continue
		}
		addr, err := parseHexAddrPort(f[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: local address %q: %v", n+1, f[1], err)
		}
		inode, err := strconv.ParseUint(string(f[9]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: inode %q: %v", n+1, f[9], err)
		}
		out = append(out, Listener{Addr: addr, Inode: inode})
	}
	return out, nil
}

// parseHexAddrPort reads "0100007F:1F90" (IPv4) or 32 hex digits and a port
// (IPv6).
func parseHexAddrPort(b []byte) (netip.AddrPort, error) {
	i := bytes.IndexByte(b, ':')
	if i < 0 {
		return netip.AddrPort{}, fmt.Errorf("no ':'")
	}
	hexAddr, hexPort := b[:i], b[i+1:]
	if len(hexPort) != 4 {
		return netip.AddrPort{}, fmt.Errorf("port is not 4 hex digits")
	}
	var pb [2]byte
	if _, err := hex.Decode(pb[:], hexPort); err != nil {
		return netip.AddrPort{}, fmt.Errorf("port: %v", err)
	}
	port := binary.BigEndian.Uint16(pb[:])
	var raw [16]byte
	switch len(hexAddr) {
	case 8, 32:
	default:
		return netip.AddrPort{}, fmt.Errorf("address is %d hex digits, want 8 or 32", len(hexAddr))
	}
	words := len(hexAddr) / 8
	for w := range words {
		var wb [4]byte
		if _, err := hex.Decode(wb[:], hexAddr[w*8:w*8+8]); err != nil {
			return netip.AddrPort{}, fmt.Errorf("address: %v", err)
		}
		// The kernel printed the word as a number in its own byte order.
		binary.NativeEndian.PutUint32(raw[w*4:], binary.BigEndian.Uint32(wb[:]))
	}
	var a netip.Addr
	if words == 1 {
		a = netip.AddrFrom4([4]byte(raw[:4]))
	} else {
		a = netip.AddrFrom16(raw)
	}
	return netip.AddrPortFrom(a, port), nil
}

// SocketUID is the owner of the TCP connection from local to remote in a
// table read whole (the uid column): false when no line has both
// addresses, or a matching line does not parse.
func SocketUID(data []byte, local, remote netip.AddrPort) (int, bool) {
	for n, line := range bytes.Split(data, []byte("\n")) {
		f := bytes.Fields(line)
		if n == 0 || len(f) < 10 {
			continue
		}
		l, err := parseHexAddrPort(f[1])
		if err != nil || l != local {
			continue
		}
		if r, err := parseHexAddrPort(f[2]); err != nil || r != remote {
			continue
		}
		uid, err := strconv.Atoi(string(f[7]))
		return uid, err == nil
	}
	return 0, false
}

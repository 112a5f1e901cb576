package previews

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

// ParseNetTCP reads a /proc/PID/net/tcp or tcp6 table and returns its
// listening sockets. The first line is the header. Lines of other states
// are skipped after their state is read; a listening line that does not
// parse is an error naming the line, since a half-read table must not pass
// for a whole one.
//
// Addresses are printed as 32-bit words in the kernel's byte order (each
// word with %08X), the port as a 16-bit number in hex.
func ParseNetTCP(data []byte) ([]Listener, error) {
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

// formatNetTCPLine writes l as the kernel would in a table of its family
// (the fuzz test's round trip).
func formatNetTCPLine(sl int, l Listener) string {
	raw := l.Addr.Addr().AsSlice()
	var s []byte
	for w := 0; w < len(raw); w += 4 {
		s = fmt.Appendf(s, "%08X", binary.NativeEndian.Uint32(raw[w:w+4]))
	}
	zero := "00000000:0000"
	if len(raw) == 16 {
		zero = "00000000000000000000000000000000:0000"
	}
	return fmt.Sprintf("%4d: %s:%04X %s 0A 00000000:00000000 00:00000000 00000000     0        0 %d 1 0000000000000000 100 0 0 10 0",
		sl, s, l.Addr.Port(), zero, l.Inode)
}

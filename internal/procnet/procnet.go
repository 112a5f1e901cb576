// Package procnet reads the kernel's TCP socket tables (/proc/net/tcp,
// /proc/PID/net/tcp and tcp6): the listening sockets of a network namespace
// (ListenersOf, for previews) and the owner of one connection (SocketUID,
// for the browser's proxy). It is the one place that opens these tables
// (TestSocketTablesHaveOneHome): a namespace's table lists every
// connection, TIME_WAIT ones included, which a workspace sharing it can
// make tens of MB without holding a descriptor, so each is read a line at
// a time (ListenersIn, SocketUIDIn), and a table that cannot be read whole
// is an error its caller sees, never a shorter table. One parser for both,
// fuzzed.
package procnet

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"strconv"
)

// procRoot is where /proc is (tests point it at a directory of tables).
var procRoot = "/proc"

// ListenersOf reads the listening sockets of the network namespace that
// process (or thread) pid is in, from /proc/PID/net/tcp (v4) and tcp6
// (v6), each a line at a time (ListenersIn). v6 is nil without an error
// where the kernel has no IPv6 table. An error that wraps fs.ErrNotExist
// says pid shows no namespace: it ended, or it is a main thread that
// ended before the process's other threads (which show it still).
// Any other error (a table that cannot be opened or read whole, or a line
// that does not parse) names the table: the listeners are unknown.
func ListenersOf(pid int) (v4, v6 []Listener, err error) {
	dir := procRoot + "/" + strconv.Itoa(pid) + "/net/"
	if v4, err = listenersAt(dir + "tcp"); err != nil {
		return nil, nil, err
	}
	v6, err = listenersAt(dir + "tcp6")
	if errors.Is(err, fs.ErrNotExist) {
		// No IPv6 in this kernel, or pid ended since tcp was read: which,
		// the IPv4 table says.
		if _, serr := os.Stat(dir + "tcp"); serr != nil {
			return nil, nil, fmt.Errorf("%s: %w", dir+"tcp", serr)
		}
		return v4, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return v4, v6, nil
}

// listenersAt is ListenersIn on the table at path.
func listenersAt(path string) ([]Listener, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError: names path
	}
	defer f.Close()
	ls, err := ListenersIn(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ls, nil
}

// SocketUID is the owner (the uid column) of the TCP connection from local
// to remote in the daemon's own network namespace, read from /proc/net/tcp
// (tcp6 for IPv6 addresses; an IPv4 address in its IPv6 form is read as
// IPv4) a line at a time, up to the connection's line (SocketUIDIn). found
// is false when no line has both addresses; err is set when the table
// could not be read up to that line, or the line's uid does not parse.
func SocketUID(local, remote netip.AddrPort) (uid int, found bool, err error) {
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	if !local.IsValid() || !remote.IsValid() || local.Addr().Is4() != remote.Addr().Is4() {
		return 0, false, fmt.Errorf("%v to %v: not a TCP connection's two addresses", local, remote)
	}
	path := procRoot + "/net/tcp"
	if !local.Addr().Is4() {
		path += "6"
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	uid, found, err = SocketUIDIn(f, local, remote)
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", path, err)
	}
	return uid, found, nil
}

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
		l, ok, err := listenerLine(n, line)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, l)
		}
	}
	return out, nil
}

// ListenersIn is Listeners on a table read from r a line at a time (a
// line of the kernel's is under 200 bytes; one over maxLine is an error),
// so what it holds is the listeners, not the table: a namespace's table
// lists every connection too, TIME_WAIT ones included, and a workspace can
// make it tens of MB without holding a descriptor.
func ListenersIn(r io.Reader) ([]Listener, error) {
	var out []Listener
	err := eachLine(r, func(n int, line []byte) (bool, error) {
		l, ok, err := listenerLine(n, line)
		if ok {
			out = append(out, l)
		}
		return false, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// maxFields is how many fields of a line are kept (a line of the kernel's
// has 12 to 17; the first 10 are read): more are dropped.
const maxFields = 20

// appendFields appends the fields of line, split at spaces and tabs (the
// tables are ASCII), to dst, at most cap(dst) of them: with dst on the
// caller's stack, a line costs no allocation.
func appendFields(dst [][]byte, line []byte) [][]byte {
	for len(line) > 0 && len(dst) < cap(dst) {
		i := 0
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		line = line[i:]
		if len(line) == 0 {
			break
		}
		j := 0
		for j < len(line) && !isSpace(line[j]) {
			j++
		}
		dst = append(dst, line[:j])
		line = line[j:]
	}
	return dst
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' }

// maxLine bounds a line of a table read with ListenersIn or SocketUIDIn.
const maxLine = 4096

// eachLine calls fn with each line of r (its number from 0, without the
// newline) until fn says it is done or fails, or r ends.
func eachLine(r io.Reader, fn func(n int, line []byte) (bool, error)) error {
	br := bufio.NewReaderSize(r, maxLine)
	for n := 0; ; n++ {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return fmt.Errorf("line %d: longer than %d bytes", n+1, maxLine)
		}
		if len(line) > 0 {
			done, ferr := fn(n, bytes.TrimSuffix(line, []byte("\n")))
			if ferr != nil || done {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// listenerLine reads line n of a table: the listener it shows, if it shows
// one.
func listenerLine(n int, line []byte) (Listener, bool, error) {
	if n == 0 {
		return Listener{}, false, nil // header: "  sl  local_address rem_address   st ..."
	}
	var buf [maxFields][]byte
	f := appendFields(buf[:0], line)
	if len(f) == 0 {
		return Listener{}, false, nil
	}
	if len(f) < 10 {
		return Listener{}, false, fmt.Errorf("line %d: %d fields, want at least 10", n+1, len(f))
	}
	if string(f[3]) != stateListen {
		return Listener{}, false, nil
	}
	addr, err := parseHexAddrPort(f[1])
	if err != nil {
		return Listener{}, false, fmt.Errorf("line %d: local address %q: %v", n+1, f[1], err)
	}
	inode, err := strconv.ParseUint(string(f[9]), 10, 64)
	if err != nil {
		return Listener{}, false, fmt.Errorf("line %d: inode %q: %v", n+1, f[9], err)
	}
	return Listener{Addr: addr, Inode: inode}, true, nil
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

// SocketUIDIn is the owner of the TCP connection from local to remote in
// a table read from r a line at a time, up to the line it looks for
// (ListenersIn says why): found is false when no line has both addresses.
// A line over the reader's bound, a read that fails, or a matching line
// whose uid does not parse is an error.
func SocketUIDIn(r io.Reader, local, remote netip.AddrPort) (uid int, found bool, err error) {
	err = eachLine(r, func(n int, line []byte) (bool, error) {
		var ok bool
		uid, found, ok = uidLine(n, line, local, remote)
		if found && !ok {
			return true, fmt.Errorf("line %d: the connection's uid does not parse", n+1)
		}
		return found, nil
	})
	if err != nil {
		return 0, false, err
	}
	return uid, found, nil
}

// uidLine reads line n of a table: whether it is the connection from local
// to remote, and then its uid (ok false when that does not parse).
func uidLine(n int, line []byte, local, remote netip.AddrPort) (uid int, found, ok bool) {
	var buf [maxFields][]byte
	f := appendFields(buf[:0], line)
	if n == 0 || len(f) < 10 {
		return 0, false, false
	}
	l, err := parseHexAddrPort(f[1])
	if err != nil || l != local {
		return 0, false, false
	}
	if r, err := parseHexAddrPort(f[2]); err != nil || r != remote {
		return 0, false, false
	}
	uid, err = strconv.Atoi(string(f[7]))
	return uid, true, err == nil
}

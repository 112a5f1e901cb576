package procnet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
)

const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"

// On a little-endian machine (the kernel prints each address word in its
// own byte order); the big-endian forms are covered by the round trip.
func TestListeners(t *testing.T) {
	if !littleEndian() {
		t.Skip("the literal tables below are a little-endian kernel's; FuzzListeners's round trip covers this machine")
	}
	tcp := header +
		"   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n" +
		"   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 17 1 0000000000000000 100 0 0 10 0\n" +
		"   2: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 999 1 0000000000000000 20 4 30 10 -1\n"
	got, err := Listeners([]byte(tcp))
	if err != nil {
		t.Fatal(err)
	}
	want := []Listener{
		{netip.MustParseAddrPort("127.0.0.1:8080"), 4242},
		{netip.MustParseAddrPort("0.0.0.0:22"), 17},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("tcp: got %v, want %v", got, want)
	}
	tcp6 := header +
		"   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 77 1 0000000000000000 100 0 0 10 0\n" +
		"   1: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 78 1 0000000000000000 100 0 0 10 0\n" +
		"   2: 0000000000000000FFFF00000100007F:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 79 1 0000000000000000 100 0 0 10 0\n"
	got, err = Listeners([]byte(tcp6))
	if err != nil {
		t.Fatal(err)
	}
	want = []Listener{
		{netip.MustParseAddrPort("[::1]:8080"), 77},
		{netip.MustParseAddrPort("[::]:80"), 78},
		{netip.MustParseAddrPort("[::ffff:127.0.0.1]:80"), 79},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("tcp6: got %v, want %v", got, want)
	}
}

func TestListenersRefusesBrokenLines(t *testing.T) {
	for name, line := range map[string]string{
		"short":        "   0: 0100007F:1F90 00000000:0000 0A\n",
		"odd address":  "   0: 0100007:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1 1\n",
		"no colon":     "   0: 0100007F1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1 1\n",
		"hex in port":  "   0: 0100007F:1FZ0 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1 1\n",
		"inode":        "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 -1 1\n",
		"long port":    "   0: 0100007F:01F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1 1\n",
		"port too big": "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 99999999999999999999999 1\n",
	} {
		if got, err := Listeners([]byte(header + line)); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: got %v, %v; want an error naming line 2", name, got, err)
		}
	}
}

// The parser reads this kernel's own table: a socket the test listens on
// is found with the inode its descriptor names.
func TestListenersReadsTheKernelsTable(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	ls, err := Listeners(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Listener{netip.MustParseAddrPort(l.Addr().String()), st.Ino}
	for _, got := range ls {
		if got == want {
			return
		}
	}
	t.Fatalf("%v not among %v", want, ls)
}

// FuzzListeners: any input is refused or read without a panic, and what
// is read, written back as the kernel writes it, reads the same.
func FuzzListeners(f *testing.F) {
	f.Add([]byte(header + "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n"))
	f.Add([]byte(header + "   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 77 1 0000000000000000 100 0 0 10 0"))
	f.Add([]byte(header + "   0: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 999 1\n\n"))
	f.Add([]byte("garbage"))
	f.Add([]byte(header + "0: :: 0A 1 2 3 4 5 6 7\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ls, err := Listeners(data)
		// A line at a time, the same listeners (or error), unless a line
		// is over the bound that reading allows.
		if in, inErr := ListenersIn(bytes.NewReader(data)); (inErr == nil) != (err == nil) || !reflect.DeepEqual(in, ls) {
			if inErr == nil || !strings.Contains(inErr.Error(), "longer than") {
				t.Fatalf("Listeners: %v, %v; ListenersIn: %v, %v", ls, err, in, inErr)
			}
		}
		if err != nil {
			return
		}
		var b strings.Builder
		b.WriteString(header)
		for i, l := range ls {
			if !l.Addr.IsValid() {
				t.Fatalf("invalid address read: %v", l)
			}
			b.WriteString(formatNetTCPLine(i, l) + "\n")
		}
		again, err := Listeners([]byte(b.String()))
		if err != nil {
			t.Fatalf("%v does not read back: %v\n%s", ls, err, b.String())
		}
		if len(again) != len(ls) || (len(ls) > 0 && !reflect.DeepEqual(again, ls)) {
			t.Fatalf("read %v, read back %v", ls, again)
		}
	})
}

func littleEndian() bool { return binary.NativeEndian.Uint16([]byte{1, 0}) == 1 }

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

// SocketUID finds this process's own connection in the kernel's table
// with this process's uid, IPv4 and IPv6, and no uid for a pair of
// addresses no socket has.
func TestSocketUID(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		host := "127.0.0.1"
		if network == "tcp6" {
			host = "[::1]"
		}
		l, err := net.Listen(network, host+":0")
		if err != nil {
			if network == "tcp6" {
				t.Logf("no IPv6 loopback: %v", err)
				continue
			}
			t.Fatal(err)
		}
		defer l.Close()
		c, err := net.Dial(network, l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		local, remote := netip.MustParseAddrPort(c.LocalAddr().String()), netip.MustParseAddrPort(c.RemoteAddr().String())
		if uid, found, err := SocketUID(local, remote); err != nil || !found || uid != os.Getuid() {
			t.Errorf("%s: SocketUID(%v, %v) = %d, %v, %v; want %d", network, local, remote, uid, found, err, os.Getuid())
		}
		if uid, found, err := SocketUID(remote, netip.AddrPortFrom(remote.Addr(), 1)); found || err != nil {
			t.Errorf("%s: a pair no socket has: uid %d, %v, %v", network, uid, found, err)
		}
	}
	// An IPv4 address in its IPv6 form (as a dual-stack socket reports
	// it) is looked up in the IPv4 table.
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mapped := func(a net.Addr) netip.AddrPort {
		ap := netip.MustParseAddrPort(a.String())
		return netip.AddrPortFrom(netip.AddrFrom16(ap.Addr().As16()), ap.Port())
	}
	if uid, found, err := SocketUID(mapped(c.LocalAddr()), mapped(c.RemoteAddr())); err != nil || !found || uid != os.Getuid() {
		t.Errorf("mapped addresses: %d, %v, %v", uid, found, err)
	}
	if _, _, err := SocketUID(netip.AddrPort{}, mapped(c.RemoteAddr())); err == nil {
		t.Error("no local address: no error")
	}
}

// SocketUIDIn: a matching line whose uid does not parse, and a line over
// the reader's bound before the connection's, are errors (the proxy then
// refuses the connection), not "no such connection"; a line that does not
// parse and is not the connection's is passed over.
func TestSocketUIDInErrors(t *testing.T) {
	if !littleEndian() {
		t.Skip("the literal lines below are a little-endian kernel's")
	}
	local, remote := netip.MustParseAddrPort("127.0.0.1:8080"), netip.MustParseAddrPort("127.0.0.1:54321")
	match := "   9: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  %s        0 999 1 0000000000000000 20 4 30 10 -1\n"
	for name, tc := range map[string]struct {
		table   string
		uid     int
		found   bool
		failing bool
	}{
		"found":        {header + fmt.Sprintf(match, "1000"), 1000, true, false},
		"garbage line": {header + "   0: 0100007F:1F90 garbage 01 0 0 0 0 0 0 0\n" + fmt.Sprintf(match, "1000"), 1000, true, false},
		"absent":       {header + timeWaitString, 0, false, false},
		"bad uid":      {header + fmt.Sprintf(match, "x"), 0, false, true},
		"long line":    {header + strings.Repeat("x", maxLine+1) + "\n" + fmt.Sprintf(match, "1000"), 0, false, true},
	} {
		uid, found, err := SocketUIDIn(strings.NewReader(tc.table), local, remote)
		if uid != tc.uid || found != tc.found || (err != nil) != tc.failing {
			t.Errorf("%s: %d, %v, %v; want %d, %v, error %v", name, uid, found, err, tc.uid, tc.found, tc.failing)
		}
	}
}

// fakeProc points ListenersOf and SocketUID at a directory of tables for
// the test: name (relative to /proc) to content.
func fakeProc(t *testing.T, tables map[string]string) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range tables {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := procRoot
	procRoot = dir
	t.Cleanup(func() { procRoot = old })
}

// TestListenersOf reads this process's own namespace: a socket it listens
// on is among v4 (and an IPv6 one among v6); a pid that does not exist is
// fs.ErrNotExist (a process that ended).
func TestListenersOf(t *testing.T) {
	l4, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l4.Close()
	v4, _, err := ListenersOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(v4, func(l Listener) bool { return l.Addr.String() == l4.Addr().String() }) {
		t.Errorf("%v not among the IPv4 listeners %v", l4.Addr(), v4)
	}
	if l6, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		defer l6.Close()
		_, v6, err := ListenersOf(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(v6, func(l Listener) bool { return l.Addr.String() == l6.Addr().String() }) {
			t.Errorf("%v not among the IPv6 listeners %v", l6.Addr(), v6)
		}
	}
	// The largest pid the kernel hands out is 2^22: past it, none.
	if _, _, err := ListenersOf(1 << 23); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a pid that does not exist: %v; want fs.ErrNotExist", err)
	}
}

// TestListenersOfTables: a table that does not parse, or has a line over
// the reader's bound, is an error naming the table, in either family, so
// a caller cannot take a half-read namespace for one with fewer
// listeners; a kernel without tcp6 gives v6 nil and no error; a pid
// without tcp is one that ended (fs.ErrNotExist).
func TestListenersOfTables(t *testing.T) {
	if !littleEndian() {
		t.Skip("the literal lines below are a little-endian kernel's")
	}
	good := header + "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n"
	broken := header + "   0: 0100007F:1F90 00000000:0000 0A\n"
	long := header + strings.Repeat(" ", maxLine+1) + "\n"
	fakeProc(t, map[string]string{
		"1/net/tcp": good, "1/net/tcp6": "",
		"2/net/tcp": good,
		"3/net/tcp": broken, "3/net/tcp6": "",
		"4/net/tcp": good, "4/net/tcp6": broken,
		"5/net/tcp": long, "5/net/tcp6": "",
		"6/net/tcp": good, "6/net/tcp6": long,
		"7/net/tcp6": "",
	})
	want := []Listener{{netip.MustParseAddrPort("127.0.0.1:8080"), 4242}}
	for _, pid := range []int{1, 2} {
		v4, v6, err := ListenersOf(pid)
		if err != nil || !reflect.DeepEqual(v4, want) || v6 != nil {
			t.Errorf("pid %d: %v, %v, %v; want %v, none, no error", pid, v4, v6, err, want)
		}
	}
	for pid, table := range map[int]string{3: "/3/net/tcp", 4: "/4/net/tcp6", 5: "/5/net/tcp", 6: "/6/net/tcp6"} {
		v4, v6, err := ListenersOf(pid)
		if err == nil || !strings.Contains(err.Error(), table+":") || errors.Is(err, fs.ErrNotExist) {
			t.Errorf("pid %d: %v, %v, %v; want an error naming %s", pid, v4, v6, err, table)
		}
	}
	for _, pid := range []int{7, 8} {
		if _, _, err := ListenersOf(pid); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("pid %d: %v; want fs.ErrNotExist", pid, err)
		}
	}
	// SocketUID reads the daemon's own table there too.
	if _, _, err := SocketUID(netip.MustParseAddrPort("127.0.0.1:8080"), netip.MustParseAddrPort("127.0.0.1:1")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SocketUID without a table: %v", err)
	}
}

// bigTable is a reader of a socket table of n connection lines (state
// TIME_WAIT, as a workspace leaves behind by opening and closing
// connections, one per line, no descriptor held) around one listener
// (0.0.0.0:8080, inode 4242, first, as the kernel lists listeners) and one
// connection 127.0.0.1:8080 <- 127.0.0.1:54321 of uid 1000 (last). It is
// made as it is read: the test holds none of it.
func bigTable(n int) io.Reader {
	i := -2
	var cur []byte
	return readerFunc(func(p []byte) (int, error) {
		for len(cur) == 0 {
			switch {
			case i == -2:
				cur = []byte(header)
			case i == -1:
				cur = []byte("   0: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n")
			case i < n:
				cur = timeWaitLine
			case i == n:
				cur = []byte("   9: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 999 1 0000000000000000 20 4 30 10 -1\n")
			default:
				return 0, io.EOF
			}
			i++
		}
		k := copy(p, cur)
		cur = cur[k:]
		return k, nil
	})
}

const timeWaitString = "   1: 0100007F:9C4E 0100007F:1F90 06 00000000:00000000 03:00000A2B 00000000     0        0 0 3 0000000000000000\n"

var timeWaitLine = []byte(timeWaitString)

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// TestTablesReadALineAtATime: a workspace can fill its network namespace's
// socket table (and, in the modes that share it, the daemon's) with
// hundreds of thousands of TIME_WAIT lines, tens of MB, which previews
// read on every lookup of a workspace's ports and the browser's proxy on
// every connection to it. ListenersIn and SocketUIDIn read such a table a
// line at a time: a 45 MB table costs them well under 1 MiB, and what they
// find is the same as in a table read whole.
func TestTablesReadALineAtATime(t *testing.T) {
	if !littleEndian() {
		t.Skip("the literal lines of bigTable are a little-endian kernel's; FuzzListeners's round trip covers this machine")
	}
	const n = 300_000 // ~45 MB
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	var ls []Listener
	var err error
	if a := allocated(func() { ls, err = ListenersIn(bigTable(n)) }); a > 1<<20 {
		t.Errorf("ListenersIn allocated %d bytes for a table of %d lines; want it read a line at a time (under 1 MiB)", a, n)
	}
	want := []Listener{{Addr: netip.MustParseAddrPort("0.0.0.0:8080"), Inode: 4242}}
	if err != nil || !reflect.DeepEqual(ls, want) {
		t.Errorf("ListenersIn: %v, %v; want %v", ls, err, want)
	}
	var uid int
	var found bool
	local, remote := netip.MustParseAddrPort("127.0.0.1:8080"), netip.MustParseAddrPort("127.0.0.1:54321")
	if a := allocated(func() { uid, found, err = SocketUIDIn(bigTable(n), local, remote) }); a > 1<<20 {
		t.Errorf("SocketUIDIn allocated %d bytes for a table of %d lines; want it read a line at a time (under 1 MiB)", a, n)
	}
	if uid != 1000 || !found || err != nil {
		t.Errorf("SocketUIDIn: %d, %v, %v; want 1000, true, no error", uid, found, err)
	}
}

// FuzzSocketUIDIn: any table is read without a panic; a connection found
// has its uid, and one found in a table is found the same in that table
// with a line of another connection before it.
func FuzzSocketUIDIn(f *testing.F) {
	f.Add([]byte(header+"   9: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 999 1 0000000000000000 20 4 30 10 -1\n"), uint16(8080), uint16(54321))
	f.Add([]byte(header+"   9: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  x 0 999 1\n"), uint16(8080), uint16(54321))
	f.Add([]byte("garbage"), uint16(1), uint16(2))
	f.Fuzz(func(t *testing.T, data []byte, lport, rport uint16) {
		local := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), lport)
		remote := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), rport)
		uid, found, err := SocketUIDIn(bytes.NewReader(data), local, remote)
		if err != nil && (found || uid != 0) {
			t.Fatalf("an error with a result: %d, %v, %v", uid, found, err)
		}
		if !found && uid != 0 {
			t.Fatalf("not found, uid %d", uid)
		}
		if err != nil || !found {
			return
		}
		// The header is line 0 wherever it is: another connection's line
		// after it does not change what is found.
		i := bytes.IndexByte(data, '\n')
		if i < 0 || (lport == 0x9C4E && rport == 0x1F90) { // timeWaitLine's own pair
			return
		}
		other := append(append(append([]byte{}, data[:i+1]...), timeWaitLine...), data[i+1:]...)
		uid2, found2, err2 := SocketUIDIn(bytes.NewReader(other), local, remote)
		if uid2 != uid || found2 != found || err2 != nil {
			t.Fatalf("with another line: %d, %v, %v; alone: %d, %v", uid2, found2, err2, uid, found)
		}
	})
}

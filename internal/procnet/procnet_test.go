package procnet

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"reflect"
	"runtime"
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
// with this process's uid, and no uid for a pair of addresses no socket has.
func TestSocketUID(t *testing.T) {
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
	b, err := os.ReadFile("/proc/self/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	local, remote := netip.MustParseAddrPort(c.LocalAddr().String()), netip.MustParseAddrPort(c.RemoteAddr().String())
	if uid, ok := SocketUID(b, local, remote); !ok || uid != os.Getuid() {
		t.Errorf("SocketUID(%v, %v) = %d, %v; want %d", local, remote, uid, ok, os.Getuid())
	}
	if uid, ok := SocketUID(b, remote, netip.MustParseAddrPort("127.0.0.1:1")); ok {
		t.Errorf("a pair no socket has: uid %d", uid)
	}
	if _, ok := SocketUID([]byte(header+"   0: 0100007F:1F90 garbage 01 0 0 0 0 0 0 0\n"), local, remote); ok {
		t.Error("a line that does not parse matched")
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

var timeWaitLine = []byte("   1: 0100007F:9C4E 0100007F:1F90 06 00000000:00000000 03:00000A2B 00000000     0        0 0 3 0000000000000000\n")

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
	var ok bool
	local, remote := netip.MustParseAddrPort("127.0.0.1:8080"), netip.MustParseAddrPort("127.0.0.1:54321")
	if a := allocated(func() { uid, ok = SocketUIDIn(bigTable(n), local, remote) }); a > 1<<20 {
		t.Errorf("SocketUIDIn allocated %d bytes for a table of %d lines; want it read a line at a time (under 1 MiB)", a, n)
	}
	if uid != 1000 || !ok {
		t.Errorf("SocketUIDIn: %d, %v; want 1000, true", uid, ok)
	}
}

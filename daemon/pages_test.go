package daemon

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// The executable of the tables below: device fe:00, inode 12214289.
var tableExe = fileID{major: 0xfe, minor: 0, inode: 12214289}

// tableMaps is a /proc/self/maps of a daemon, with every kind of line the
// release must judge; want marks the lines it releases.
var tableMaps = []struct {
	line string
	want bool
	why  string
}{
	{"00400000-0115c000 r-xp 00000000 fe:00 12214289                           /usr/local/bin/agent-backend", true, "the executable's code"},
	{"0115c000-01fc8000 r--p 00d5c000 fe:00 12214289                           /usr/local/bin/agent-backend", true, "the executable's read-only data"},
	{"01fc8000-0207f000 rw-p 01bc8000 fe:00 12214289                           /usr/local/bin/agent-backend", false, "writable: .data, written pages would be reset"},
	{"0207f000-020d0000 rw-p 00000000 00:00 0 ", false, "anonymous: .bss"},
	{"020d0000-020e0000 rwxp 00000000 fe:00 12214289                           /usr/local/bin/agent-backend", false, "writable and executable"},
	{"020e0000-020f0000 r--s 00000000 fe:00 12214289                           /usr/local/bin/agent-backend", false, "shared"},
	{"020f0000-02100000 r-xs 00000000 fe:00 12214289                           /usr/local/bin/agent-backend", false, "shared"},
	{"02100000-02110000 ---p 00000000 fe:00 12214289                           /usr/local/bin/agent-backend", false, "not readable"},
	{"02110000-02120000 -w-p 00000000 fe:00 12214289                           /usr/local/bin/agent-backend", false, "writable"},
	{"02120000-02130000 r--p 00d5c000 fe:00 12214289                           /usr/local/bin/agent-backend (deleted)", true, "the executable, deleted since it started: still its inode"},
	{"02130000-02140000 r-xp 00000000 fe:00 12214290                           /usr/local/bin/agent-backend", false, "another file at the executable's path (replaced)"},
	{"02140000-02150000 r-xp 00000000 fe:01 12214289                           /usr/local/bin/agent-backend", false, "the executable's inode number on another device"},
	{"7f0000000000-7f0000020000 r-xp 00000000 fe:00 247785                     /usr/lib/x86_64-linux-gnu/libc.so.6", false, "another file"},
	{"7f0000020000-7f0000030000 r--p 00020000 fe:00 247785                     /usr/lib/x86_64-linux-gnu/libc.so.6", false, "another file, read-only"},
	{"c000000000-c000400000 rw-p 00000000 00:00 0 ", false, "the Go heap"},
	{"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]", false, "the stack"},
	{"7ffd00100000-7ffd00104000 r--p 00000000 00:00 0                          [vvar]", false, "the vDSO's data"},
	{"7ffd00104000-7ffd00106000 r-xp 00000000 00:00 0                          [vdso]", false, "the vDSO"},
	{"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]", false, "vsyscall"},
}

func parseTableMaps(t *testing.T) []mapping {
	t.Helper()
	var maps []mapping
	for _, c := range tableMaps {
		m, err := parseMapsLine(c.line)
		if err != nil {
			t.Fatal(err)
		}
		maps = append(maps, m)
	}
	return maps
}

// TestCandidates: of a process's mappings, exactly the executable's
// read-only private ones (r-xp, r--p) are released, the executable known by
// device and inode whatever its path says.
func TestCandidates(t *testing.T) {
	maps := parseTableMaps(t)
	code := maps[0].start + 0x1234 // in the executable's code
	for _, exe := range []struct {
		id fileID
		by string
	}{
		{tableExe, "fstat"},
		// stat's numbers differ from maps' (a btrfs subvolume, overlayfs): the
		// mapping that holds this code names the executable.
		{fileID{major: 0, minor: 0x2c, inode: 77}, "code address"},
		// stat names another mapped file: the code's mapping still wins.
		{fileID{major: 0xfe, minor: 0, inode: 247785}, "code address"},
	} {
		got, by := candidates(maps, exe.id, code)
		if by != exe.by {
			t.Errorf("exe %v: identified by %q, want %q", exe.id, by, exe.by)
		}
		for i, c := range tableMaps {
			released := slices.ContainsFunc(got, func(m mapping) bool { return m == maps[i] })
			if released != c.want {
				t.Errorf("exe %v: %q released %v, want %v (%s)", exe.id, c.line, released, c.want, c.why)
			}
		}
	}
	// Code in no file mapping: the executable is not known, nothing is
	// released.
	if got, by := candidates(maps, tableExe, 0x1000); len(got) != 0 || by != "none" {
		t.Errorf("code in no mapping: %d candidates by %q, want none", len(got), by)
	}
	// Code in the vDSO (inode 0) names no file either.
	if got, by := candidates(maps, fileID{}, maps[len(maps)-2].start); len(got) != 0 || by != "none" {
		t.Errorf("code in the vDSO: %d candidates by %q, want none", len(got), by)
	}
}

// TestParseMapsLine: the fields of a line, the padding before the path, a
// path with spaces, and the lines refused, each naming what is bad.
func TestParseMapsLine(t *testing.T) {
	m, err := parseMapsLine("7f12a0000000-7f12a0021000 r--p 0001a000 103:05 4242                       /opt/my app/bin (deleted)")
	if err != nil {
		t.Fatal(err)
	}
	want := mapping{start: 0x7f12a0000000, end: 0x7f12a0021000, perms: "r--p", offset: 0x1a000,
		file: fileID{major: 0x103, minor: 5, inode: 4242}, path: "/opt/my app/bin (deleted)"}
	if m != want {
		t.Errorf("got %+v, want %+v", m, want)
	}
	m, err = parseMapsLine("c000000000-c000400000 rw-p 00000000 00:00 0 ")
	if err != nil || m.path != "" || m.file != (fileID{}) {
		t.Errorf("anonymous line: %+v, %v", m, err)
	}
	for _, c := range []struct{ line, bad string }{
		{"", "address range"},
		{"00400000 r-xp 00000000 fe:00 1 /x", "address range"},
		{"00500000-00400000 r-xp 00000000 fe:00 1 /x", "address range"},
		{"00400000-00400000 r-xp 00000000 fe:00 1 /x", "address range"},
		{"0040000g-00500000 r-xp 00000000 fe:00 1 /x", "address range"},
		{"00400000-00500000 r-xpx 00000000 fe:00 1 /x", "permissions"},
		{"00400000-00500000 r-x 00000000 fe:00 1 /x", "permissions"},
		{"00400000-00500000 r-xp 0000000z fe:00 1 /x", "offset"},
		{"00400000-00500000 r-xp 00000000 fe00 1 /x", "device"},
		{"00400000-00500000 r-xp 00000000 fe:0x 1 /x", "device"},
		{"00400000-00500000 r-xp 00000000 fe:00 -1 /x", "inode"},
		{"00400000-00500000 r-xp 00000000 fe:00", "inode"},
		{"Rss:                2944 kB", "address range"},
	} {
		_, err := parseMapsLine(c.line)
		if err == nil || !strings.Contains(err.Error(), "bad "+c.bad) {
			t.Errorf("%q: %v, want an error naming the %s", c.line, err, c.bad)
		}
	}
}

// formatMapsLine writes m the way the kernel does.
func formatMapsLine(m mapping) string {
	return fmt.Sprintf("%08x-%08x %s %08x %02x:%02x %-26d %s", m.start, m.end, m.perms, m.offset,
		m.file.major, m.file.minor, m.file.inode, m.path)
}

// FuzzParseMapsLine: the parser never panics; what it accepts is a valid
// range with four permission characters, and written back the kernel's way
// it reads the same.
func FuzzParseMapsLine(f *testing.F) {
	for _, c := range tableMaps {
		f.Add(c.line)
	}
	f.Add("7f12a0000000-7f12a0021000 r--p 0001a000 103:05 4242                       /opt/my app/bin (deleted)")
	f.Add("00400000-00500000 r-xp 00000000 fe:00")
	f.Add("1-2 abcd 0 0:0 0")
	f.Fuzz(func(t *testing.T, line string) {
		m, err := parseMapsLine(line)
		if err != nil {
			return
		}
		if m.start >= m.end || len(m.perms) != 4 || strings.HasPrefix(m.path, " ") {
			t.Fatalf("%q parsed as %+v", line, m)
		}
		if strings.Contains(m.perms, " ") {
			t.Fatalf("%q: permissions %q hold a space", line, m.perms)
		}
		again, err := parseMapsLine(formatMapsLine(m))
		if err != nil || again != m {
			t.Fatalf("%q parsed as %+v; written back %q, it reads %+v, %v", line, m, formatMapsLine(m), again, err)
		}
	})
}

// fakePagemap is a /proc/self/pagemap: entry i at offset 8*i; reads past
// its end are short.
type fakePagemap []uint64

func (p fakePagemap) ReadAt(b []byte, off int64) (int, error) {
	n := 0
	for i := off / 8; n+8 <= len(b); i++ {
		if i >= int64(len(p)) {
			return n, io.EOF
		}
		binary.LittleEndian.PutUint64(b[n:], p[i])
		n += 8
	}
	return n, nil
}

// TestResidentPages: a mapping whose present pages are all file pages is
// counted; one anonymous page (a written page of RELRO, a breakpoint) or
// one swapped page (only anonymous pages swap) keeps it from release.
func TestResidentPages(t *testing.T) {
	const page = 4096
	file, absent := uint64(pagePresent|pageFile|0x1234), uint64(0)
	anon, swapped := uint64(pagePresent|0x1234), uint64(pageSwapped|0x77)
	// 3000 pages: more than one read of the 8 KiB buffer.
	base := make(fakePagemap, 16+3000+4)
	for i := range 3000 {
		if i%3 == 0 {
			base[16+i] = file
		}
	}
	base[16+3000] = anon // just past the mapping: not its page
	m := mapping{start: 16 * page, end: (16 + 3000) * page}
	if present, isAnon, err := residentPages(base, m, page); err != nil || isAnon || present != 1000 {
		t.Errorf("file pages: %d present, anonymous %v, %v; want 1000, false", present, isAnon, err)
	}
	for _, c := range []struct {
		name  string
		entry uint64
	}{{"anonymous", anon}, {"swapped", swapped}, {"swapped file bit", swapped | pageFile}} {
		pm := slices.Clone(base)
		pm[16+2999] = c.entry // the last page, in the second read
		if _, isAnon, err := residentPages(pm, m, page); err != nil || !isAnon {
			t.Errorf("%s page: anonymous %v, %v; want true", c.name, isAnon, err)
		}
	}
	pm := slices.Clone(base)
	pm[17] = absent | pageFile // not present: a file page not mapped
	if present, isAnon, err := residentPages(pm, mapping{start: 16 * page, end: 19 * page}, page); err != nil || isAnon || present != 1 {
		t.Errorf("absent pages: %d present, anonymous %v, %v; want 1, false", present, isAnon, err)
	}
	// A pagemap that ends inside the mapping is an error, not a release.
	if _, _, err := residentPages(base[:100], m, page); !errors.Is(err, io.EOF) {
		t.Errorf("short pagemap: %v, want EOF", err)
	}
}

// TestTrustPagemap: the pagemap is believed only when it shows the page of
// the caller's code as a present file page; one that reads all zeros, or an
// anonymous or absent page there, or fails to read, releases nothing.
func TestTrustPagemap(t *testing.T) {
	const page = 4096
	code := uint64(5*page + 123)
	for _, c := range []struct {
		name  string
		entry uint64
		short bool
		want  bool
	}{
		{"present file page", pagePresent | pageFile | 0x42, false, true},
		{"all zeros", 0, false, false},
		{"anonymous", pagePresent | 0x42, false, false},
		{"file bit, not present", pageFile, false, false},
		{"short read", 0, true, false},
	} {
		pm := make(fakePagemap, 8)
		pm[5] = c.entry
		if c.short {
			pm = pm[:5]
		}
		err := trustPagemap(pm, code, page)
		if (err == nil) != c.want {
			t.Errorf("%s: %v, want trusted %v", c.name, err, c.want)
		}
	}
	// This process's own pagemap passes (the release tests below rely on it).
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := trustPagemap(f, uint64(reflect.ValueOf(TestTrustPagemap).Pointer()), uint64(os.Getpagesize())); err != nil {
		t.Errorf("this process's pagemap: %v", err)
	}
}

// pagesMarker is initialised data: it lies in a page of the executable's
// writable mapping (.noptrdata), file-backed until the test writes it.
var pagesMarker = [1024]uint64{1, 2, 3, 4}

// exeMapping is one of the executable's mappings as smaps shows it.
type exeMapping struct {
	mapping
	rss, anon int64 // KiB
}

// exeSmaps reads the executable's mappings from /proc/self/smaps.
func exeSmaps(t *testing.T, exe fileID) []exeMapping {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []exeMapping
	var cur *exeMapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), ":")
		if name == "Rss" || name == "Anonymous" {
			if cur == nil {
				continue
			}
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("smaps: %q: %v", sc.Text(), err)
			}
			if name == "Rss" {
				cur.rss = n
			} else {
				cur.anon = n
			}
			continue
		}
		if strings.ContainsAny(name, " -") { // a header line
			m, err := parseMapsLine(sc.Text())
			if err != nil {
				t.Fatal(err)
			}
			cur = nil
			if m.file == exe {
				out = append(out, exeMapping{mapping: m})
				cur = &out[len(out)-1]
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReleaseExecutablePages releases this test binary's read-only pages
// after touching all of them: their resident KiB fall by more than half,
// the writable mappings keep every page (the written one with what was
// written), and the code runs on.
func TestReleaseExecutablePages(t *testing.T) {
	pagesMarker[0] = 0xfeed // a written private page: anonymous from now on
	exe, err := executableID()
	if err != nil {
		t.Fatal(err)
	}
	before := exeSmaps(t, exe)
	if len(before) == 0 {
		t.Fatalf("no mapping of the executable %+v in /proc/self/smaps", exe)
	}
	// Read every page of the executable's mappings through /proc/self/mem,
	// which maps them in as a read of the memory would.
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for _, m := range before {
		if m.perms[0] != 'r' {
			continue
		}
		for a := m.start; a < m.end; a += uint64(len(buf)) {
			n := min(uint64(len(buf)), m.end-a)
			if _, err := mem.ReadAt(buf[:n], int64(a)); err != nil {
				t.Fatalf("reading %x-%x: %v", a, a+n, err)
			}
		}
	}
	mem.Close()
	before = exeSmaps(t, exe)

	r, err := releaseExecutablePages()
	if err != nil {
		t.Fatal(err)
	}
	after := exeSmaps(t, exe)

	// By fstat, or by this code's mapping where the file system shows maps
	// other numbers than stat (overlayfs, btrfs).
	if r.by == "none" || r.mappings == 0 || r.held != 0 {
		t.Errorf("release: %+v, want the executable's mappings found, none held", r)
	}
	var roBefore, roAfter, mapped int64
	for i, b := range before {
		a := after[i]
		if a.mapping != b.mapping {
			t.Fatalf("the executable's mappings changed: %+v, then %+v", b.mapping, a.mapping)
		}
		if readOnlyPrivate(b.perms) {
			roBefore += b.rss
			roAfter += a.rss
			mapped += int64(b.end-b.start) / 1024
			continue
		}
		// Never released: every page stays, the written ones with them.
		if a.rss < b.rss || a.anon < b.anon {
			t.Errorf("%s mapping %x-%x: Rss %d → %d KiB, Anonymous %d → %d KiB; want none lost", b.perms, b.start, b.end, b.rss, a.rss, b.anon, a.anon)
		}
	}
	t.Logf("read-only mappings of the executable: %d KiB mapped, %d KiB resident before, %d after; release: %+v", mapped, roBefore, roAfter, r)
	if roBefore < mapped/2 {
		t.Fatalf("only %d of %d KiB resident after reading every page", roBefore, mapped)
	}
	if roAfter*2 >= roBefore {
		t.Errorf("resident KiB of the read-only mappings %d → %d: want less than half", roBefore, roAfter)
	}
	if r.mappedKiB != mapped {
		t.Errorf("release reports %d KiB mapped, smaps %d", r.mappedKiB, mapped)
	}

	// The code runs on, refaulting what it needs: a collection walks every
	// stack and the binary's tables; reflection reads type data.
	runtime.GC()
	if pagesMarker[0] != 0xfeed || pagesMarker[1] != 2 {
		t.Fatalf("written data lost: %d %d", pagesMarker[0], pagesMarker[1])
	}
	var sb bytes.Buffer
	fmt.Fprintf(&sb, "%v %x", reflect.TypeOf(r), sortedCopy([]int{3, 1, 2}))
	if got := sb.String(); got != "daemon.pagesReleased [1 2 3]" {
		t.Errorf("formatted %q", got)
	}
}

func sortedCopy(s []int) []int {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestBurstReturnGivesBackPages: the daemon's return of memory after a
// burst of connections gives back the executable's pages too, the same
// release as at ready, logged at debug.
func TestBurstReturnGivesBackPages(t *testing.T) {
	var logged bytes.Buffer
	m := newMemoryReturner(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug})))
	m.free()
	line := regexp.MustCompile(`level=DEBUG msg="gave back the executable's read-only pages" why=burst mappings=([1-9]\d*) held=0 `)
	if !line.MatchString(logged.String()) {
		t.Errorf("after a burst's return, the log has no release of the executable's pages:\n%s", logged.String())
	}
}

// TestReleaseFailureWarnsOnce: a release that keeps failing (pagemap
// refused, madvise refused) warns once per process, not at every burst's
// return, which a client can bring about every 10 s; the later failures
// are still logged, at debug, with their error.
func TestReleaseFailureWarnsOnce(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	refused := func() (pagesReleased, error) {
		return pagesReleased{by: "fstat"}, &os.PathError{Op: "open", Path: "/proc/self/pagemap", Err: syscall.EACCES}
	}
	var warned atomic.Bool
	logRelease(log, slog.LevelInfo, "ready", refused, &warned)
	for range 3 {
		logRelease(log, slog.LevelDebug, "burst", refused, &warned)
	}
	out := logged.String()
	if n := strings.Count(out, `level=WARN msg="giving back the executable's pages"`); n != 1 {
		t.Errorf("%d warnings for 4 failed releases, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, `level=WARN msg="giving back the executable's pages" why=ready err="open /proc/self/pagemap: permission denied"`) {
		t.Errorf("the first failure's warning does not name it:\n%s", out)
	}
	if n := strings.Count(out, `level=DEBUG msg="giving back the executable's pages" why=burst err="open /proc/self/pagemap: permission denied"`); n != 3 {
		t.Errorf("%d of the 3 later failures logged at debug with their error, want 3:\n%s", n, out)
	}
	if n := strings.Count(out, `msg="gave back the executable's read-only pages"`); n != 4 {
		t.Errorf("%d outcome lines for 4 releases, want 4:\n%s", n, out)
	}
}

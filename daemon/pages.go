package daemon

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Giving back the executable's pages once the daemon is ready. Of the
// daemon's RSS at ready, most is the executable's own clean pages
// (docs/performance.md, "RSS at ready"): package initialisation and the
// runtime's start (its walks over the itabs and the function tables) touch
// code and read-only data all over the binary, and each fault maps the
// 64 KiB around it (fault-around). The daemon never touches most of them
// again. Once it is ready, it drops its mappings of them, so that it holds
// only the pages it serves with.
//
// Why this is safe, and for which mappings only:
//
//   - A private file mapping that was never written holds no anonymous
//     (copy-on-write) page: every present page is the page cache's. For such
//     a mapping MADV_DONTNEED only removes our page-table entries; the next
//     access faults the same bytes back in from the page cache (a minor
//     fault; a major one if the kernel evicted them meanwhile, which it could
//     do under pressure anyway). No byte the program sees changes.
//   - A written private page is anonymous: MADV_DONTNEED throws it away and
//     the next access reads the file's bytes again, so on a writable mapping
//     (.data, .noptrdata) it would reset variables: corruption. The heap,
//     the stacks and .bss are anonymous mappings, whose pages DONTNEED would
//     zero. Only the executable's mappings whose permissions are exactly
//     r-xp or r--p are candidates, compared strictly.
//   - A read-only mapping may still hold written pages: RELRO (a PIE or
//     dynamically linked build, whose loader relocates .data.rel.ro and then
//     makes it read-only: `r--p` in /proc/self/maps), a debugger's
//     breakpoints, or a uprobe in the code. So each page of a candidate is
//     looked up in /proc/self/pagemap first: a mapping is released only when
//     none of its pages is anonymous (present without the file-page bit) or
//     swapped (a file page is never swapped; an anonymous one may be). Nothing
//     can write to a read-only private mapping between that look-up and the
//     madvise but a debugger or an mprotect, and the daemon makes neither.
//     The pagemap itself is believed only when it shows the page of the
//     release's own code as a present file page (trustPagemap): one served
//     without its flags reads all zeros, which would pass every mapping.
//     (smaps' per-mapping Anonymous count says the same, but reading smaps
//     walks every mapping's pages, the heap's too, and formats two dozen
//     fields for each: 0.8 – 1.2 ms in the test binary, against 0.25 ms for
//     maps and the executable's pagemap entries.)
//   - The executable is identified by the device and inode of
//     /proc/self/exe (fstat of the opened link), not by a path name: a
//     mapping of another file with the same name, or a path the executable
//     was replaced at, never matches, and an executable deleted since it
//     started (" (deleted)") still does (its inode lives while mapped). Where
//     a file system shows /proc/self/maps other numbers than stat does
//     (btrfs subvolumes; overlayfs, a container's root, on some kernels),
//     the mapping that holds this function's own code names the executable
//     instead: that mapping is the executable's by construction.
//
// MADV_COLD (Linux 5.4; EINVAL before, ignored) comes first: it moves the
// pages to the inactive list, so that a container's working set, which
// leaves inactive file pages out, falls as well as RSS, and the kernel
// reclaims them first under pressure. DONTNEED alone would leave them active
// in the page cache.
//
// The same release follows each return of memory after a burst of
// connections (the memory returner's free, daemon/memory.go): the SSH, SFTP
// and exec paths page in code that the quiet time after a burst does not
// need, the same rule as at ready. It costs a read of /proc/self/maps and of
// the executable's pagemap entries and two madvise calls per mapping (about
// 2 ms on the 2-core VM, docs/performance.md), at most once per return,
// which is at most every 10 s; the connections that follow refault what
// they use.

// fileID is a file as /proc/self/maps names it: its device and inode.
type fileID struct {
	major, minor uint32
	inode        uint64
}

// mapping is one line of /proc/self/maps.
type mapping struct {
	start, end uint64
	perms      string
	offset     uint64
	file       fileID
	path       string // "" for an anonymous mapping; may end in " (deleted)"
}

// parseMapsLine parses one line of /proc/self/maps: "start-end perms offset
// major:minor inode [path]", the numbers in hexadecimal but the inode, in
// decimal.
func parseMapsLine(line string) (mapping, error) {
	var m mapping
	rest := line
	next := func() string {
		var f string
		f, rest, _ = strings.Cut(rest, " ")
		return f
	}
	bad := func(what string) (mapping, error) {
		return mapping{}, fmt.Errorf("maps line %q: bad %s", line, what)
	}
	addr, perms, off, dev, ino := next(), next(), next(), next(), next()
	lo, hi, ok := strings.Cut(addr, "-")
	if !ok {
		return bad("address range")
	}
	var err error
	if m.start, err = strconv.ParseUint(lo, 16, 64); err != nil {
		return bad("address range")
	}
	if m.end, err = strconv.ParseUint(hi, 16, 64); err != nil || m.end <= m.start {
		return bad("address range")
	}
	if len(perms) != 4 {
		return bad("permissions")
	}
	m.perms = perms
	if m.offset, err = strconv.ParseUint(off, 16, 64); err != nil {
		return bad("offset")
	}
	maj, mnr, ok := strings.Cut(dev, ":")
	if !ok {
		return bad("device")
	}
	a, err1 := strconv.ParseUint(maj, 16, 32)
	b, err2 := strconv.ParseUint(mnr, 16, 32)
	if err1 != nil || err2 != nil {
		return bad("device")
	}
	m.file.major, m.file.minor = uint32(a), uint32(b)
	if m.file.inode, err = strconv.ParseUint(ino, 10, 64); err != nil {
		return bad("inode")
	}
	// The kernel pads the path to a column with spaces.
	m.path = strings.TrimLeft(rest, " ")
	return m, nil
}

// readMaps reads every line of a maps file.
func readMaps(r io.Reader) ([]mapping, error) {
	var maps []mapping
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m, err := parseMapsLine(sc.Text())
		if err != nil {
			return nil, err
		}
		maps = append(maps, m)
	}
	return maps, sc.Err()
}

// readOnlyPrivate is the strict permission rule: readable, not writable,
// private; executable or not.
func readOnlyPrivate(perms string) bool {
	return perms == "r-xp" || perms == "r--p"
}

// candidates picks the executable's read-only private mappings: those of
// exe, or, when no mapping of exe holds code (the address of a function of
// this binary), those of the file of the mapping that does. by says which
// identified the executable ("none" when neither did).
func candidates(maps []mapping, exe fileID, code uint64) (out []mapping, by string) {
	holder := -1
	for i, m := range maps {
		if m.start <= code && code < m.end && m.file.inode != 0 {
			holder = i
		}
	}
	switch {
	case holder >= 0 && maps[holder].file == exe:
		by = "fstat"
	case holder >= 0:
		by, exe = "code address", maps[holder].file
	default:
		return nil, "none"
	}
	for _, m := range maps {
		if m.file == exe && readOnlyPrivate(m.perms) {
			out = append(out, m)
		}
	}
	return out, by
}

// The bits of a /proc/PID/pagemap entry (Documentation/admin-guide/mm/pagemap.rst).
const (
	pagePresent = 1 << 63
	pageSwapped = 1 << 62
	pageFile    = 1 << 61 // a file page or shared anonymous memory
)

// residentPages reads m's pagemap entries: how many of its pages are
// present, and whether any is anonymous (present and not a file page) or
// swapped, which a release would lose.
func residentPages(pagemap io.ReaderAt, m mapping, pageSize uint64) (present int64, anon bool, err error) {
	var buf [8 << 10]byte
	for page := m.start / pageSize; page < m.end/pageSize; {
		n := min((m.end/pageSize-page)*8, uint64(len(buf)))
		k, err := pagemap.ReadAt(buf[:n], int64(page*8))
		if k < 8 {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return 0, false, fmt.Errorf("pagemap at page %#x: %w", page, err)
		}
		for j := 0; j+8 <= k; j += 8 {
			e := binary.LittleEndian.Uint64(buf[j:])
			if e&pageSwapped != 0 || (e&pagePresent != 0 && e&pageFile == 0) {
				return 0, true, nil
			}
			if e&pagePresent != 0 {
				present++
			}
		}
		page += uint64(k / 8)
	}
	return present, false, nil
}

// errPagemapUntrusted: the pagemap does not show a page known to be mapped.
var errPagemapUntrusted = errors.New("pagemap does not show this code's own page as a present file page: its flags are not trusted, nothing is released")

// trustPagemap checks the pagemap against a page whose state is known: the
// page at code, which holds the caller's own instructions, is present and a
// file page. A pagemap that reads all zeros (a kernel or sandbox that
// serves the file without its flags) would otherwise pass every mapping as
// holding no anonymous page.
func trustPagemap(pagemap io.ReaderAt, code, pageSize uint64) error {
	var b [8]byte
	if _, err := pagemap.ReadAt(b[:], int64(code/pageSize*8)); err != nil {
		return fmt.Errorf("pagemap at this code's page: %w", err)
	}
	if e := binary.LittleEndian.Uint64(b[:]); e&pagePresent == 0 || e&pageFile == 0 {
		return errPagemapUntrusted
	}
	return nil
}

// pagesReleased is what one release did.
type pagesReleased struct {
	mappings    int    // released
	held        int    // left alone: they hold anonymous pages
	mappedKiB   int64  // the size of the mappings released
	residentKiB int64  // their resident pages before the release
	by          string // how the executable was identified
	took        time.Duration
}

// executableID is the device and inode of the running executable.
func executableID() (fileID, error) {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return fileID{}, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fileID{}, err
	}
	return fileID{major: unix.Major(st.Dev), minor: unix.Minor(st.Dev), inode: st.Ino}, nil
}

// madvise advises on [start, end) of this process's address space. It takes
// addresses, not a slice: the mappings are the kernel's, not Go memory.
func madvise(start, end uint64, advice int) error {
	if _, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), uintptr(advice)); e != 0 {
		return e
	}
	return nil
}

// releaseExecutablePages gives back this process's mappings of the
// executable's read-only pages (the rules are above). The pages stay in the
// page cache; the next access maps them again.
func releaseExecutablePages() (pagesReleased, error) {
	began := time.Now()
	exe, err := executableID()
	if err != nil {
		return pagesReleased{}, fmt.Errorf("the executable's device and inode: %w", err)
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return pagesReleased{}, err
	}
	maps, err := readMaps(f)
	f.Close()
	if err != nil {
		return pagesReleased{}, fmt.Errorf("/proc/self/maps: %w", err)
	}
	code := uint64(reflect.ValueOf(releaseExecutablePages).Pointer())
	pick, by := candidates(maps, exe, code)
	r := pagesReleased{by: by}
	if len(pick) == 0 {
		r.took = time.Since(began)
		return r, nil
	}
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return r, err
	}
	defer pagemap.Close()
	pageSize := uint64(os.Getpagesize())
	if err := trustPagemap(pagemap, code, pageSize); err != nil {
		r.took = time.Since(began)
		return r, err
	}
	var errs []error
	for _, m := range pick {
		present, anon, err := residentPages(pagemap, m, pageSize)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if anon {
			r.held++
			continue
		}
		if err := madvise(m.start, m.end, unix.MADV_COLD); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("madvise(MADV_COLD) %x-%x: %w", m.start, m.end, err))
		}
		if err := madvise(m.start, m.end, unix.MADV_DONTNEED); err != nil {
			errs = append(errs, fmt.Errorf("madvise(MADV_DONTNEED) %x-%x: %w", m.start, m.end, err))
			continue
		}
		r.mappings++
		r.mappedKiB += int64(m.end-m.start) / 1024
		r.residentKiB += present * int64(pageSize) / 1024
	}
	r.took = time.Since(began)
	return r, errors.Join(errs...)
}

// releaseWarned is set once a failed release was logged as a warning. A
// failure that lasts (pagemap absent or refused by a hardened kernel,
// madvise refused by a seccomp filter or on locked memory) fails the same
// way at each burst's return, which a client can cause every 10 s
// (minFreeInterval) by opening and closing connections: the first failure
// warns, later ones are logged at debug.
var releaseWarned atomic.Bool

// releasePages is releaseExecutablePages with its outcome logged at level,
// for the daemon's two moments (why): "ready", and "burst" after a burst's
// return of memory.
func releasePages(log *slog.Logger, level slog.Level, why string) {
	logRelease(log, level, why, releaseExecutablePages, &releaseWarned)
}

// logRelease runs release and logs what it did; of its failures, only the
// first that finds warned unset is a warning.
func logRelease(log *slog.Logger, level slog.Level, why string, release func() (pagesReleased, error), warned *atomic.Bool) {
	r, err := release()
	if err != nil {
		if warned.CompareAndSwap(false, true) {
			log.Warn("giving back the executable's pages", "why", why, "err", err, "later_failures", "logged at debug level")
		} else {
			log.Debug("giving back the executable's pages", "why", why, "err", err)
		}
	}
	log.Log(context.Background(), level, "gave back the executable's read-only pages", "why", why,
		"mappings", r.mappings, "held", r.held, "mapped_kib", r.mappedKiB, "resident_kib", r.residentKiB,
		"identified_by", r.by, "took", r.took)
}

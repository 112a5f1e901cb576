package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestReadyGivesBackExecutablePages: the release-built daemon, once ready,
// holds less than three quarters of the executable's read-only pages it held
// before it gave them back, after serving /health (which maps back what it
// runs). The figure before is the daemon's own log line (pagemap, just
// before the release); the figure after is smaps, read from outside. On the
// 2-core VM: 17.4 MiB before, about 9 after (docs/performance.md, "RSS at
// ready").
func TestReadyGivesBackExecutablePages(t *testing.T) {
	p := startDaemon(t, "--rootDir", t.TempDir())
	// identified_by is fstat, or "code address" where the file system shows
	// maps other numbers than stat (overlayfs, btrfs).
	line := regexp.MustCompile(`msg="gave back the executable's read-only pages" why=ready mappings=(\d+) held=0 mapped_kib=(\d+) resident_kib=(\d+) identified_by=(fstat|"code address") `)
	var m []string
	waitFor(t, func() bool { m = line.FindStringSubmatch(p.stderr.String()); return m != nil })
	mapped, _ := strconv.ParseInt(m[2], 10, 64)
	before, _ := strconv.ParseInt(m[3], 10, 64)
	if m[1] == "0" || before < mapped/4 {
		t.Fatalf("release at ready: %s mappings, %d of %d KiB resident; want the executable's pages found", m[1], before, mapped)
	}

	resp, err := http.Get(p.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/health: %d", resp.StatusCode)
	}

	// The test knows the binary by its path, as maps shows it.
	path, err := filepath.EvalSymlinks(binary)
	if err != nil {
		t.Fatal(err)
	}
	if path, err = filepath.Abs(path); err != nil {
		t.Fatal(err)
	}
	after, mappedAfter := exeReadOnlyRss(t, p.cmd.Process.Pid, path)
	t.Logf("the executable's read-only mappings: %d KiB, %d KiB resident before the release, %d after /health", mapped, before, after)
	if mappedAfter != mapped {
		t.Fatalf("smaps shows %d KiB of the executable's read-only mappings, the log %d", mappedAfter, mapped)
	}
	if after*4 >= before*3 {
		t.Errorf("%d KiB of the executable's read-only pages resident after /health, %d before the release: want under three quarters", after, before)
	}
}

// exeReadOnlyRss sums Rss and size (KiB) of pid's r-xp and r--p mappings of
// the file at path.
func exeReadOnlyRss(t *testing.T, pid int, path string) (rss, mapped int64) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 5 && strings.Contains(fields[0], "-") {
			in = (fields[1] == "r-xp" || fields[1] == "r--p") && len(fields) >= 6 && strings.Join(fields[5:], " ") == path
			if in {
				lo, hi, _ := strings.Cut(fields[0], "-")
				a, _ := strconv.ParseUint(lo, 16, 64)
				b, _ := strconv.ParseUint(hi, 16, 64)
				mapped += int64(b-a) / 1024
			}
			continue
		}
		if in && len(fields) == 3 && fields[0] == "Rss:" {
			n, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			rss += n
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if mapped == 0 {
		t.Fatalf("no r-xp or r--p mapping of %s in /proc/%d/smaps", path, pid)
	}
	return rss, mapped
}

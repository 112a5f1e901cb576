package resolvepath

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzWalkVisitsTheKernelsWay: for a tree of directories, files and
// symlinks whose targets the fuzzer writes, and a path through it, every
// entry of the tree the kernel looks up when it opens the path is one
// Walk visits, with its Lstat, at its own path: what internal/opfile's
// rule judges is all the open depends on. The kernel's way is told by
// taking each entry away in turn (renamed aside): the open, without
// O_CREAT, fails exactly when the kernel looked that name up. Where the
// open succeeds, Walk leads where the open's descriptor is
// (/proc/self/fd); where the open fails with ELOOP, Walk fails with
// ErrTooManyLinks. Opened with O_PATH, so that a device or a FIFO a link
// leads to is never acted on.
func FuzzWalkVisitsTheKernelsWay(f *testing.F) {
	for _, s := range [][2]string{
		{"../c/d\n/a/b\n\n\n\n", "l0/../f"},
		{"b/../../c\n\n\n\nl4\n", "a/l1/d/g"},
		{"l5\nl0\n\n\n\nl0", "l0/x"},
		{"/c/d/../d/g\n\n\n\n\n", "l0"},
		{"a/b\n..\n../..\n.\n/\n//a", "l0/l2/l2/f"},
		{"\n\n\n\n\n/c/d/l4", "c/d/l4/../../a//b/./"},
		{"a\nb/../../l5\n\n\n\nl0/b", "l5/../a/l1"},
		{"missing/../c\n\n\n\n\n", "l0/d/g"},
		{"a/f/..\n\n\n\n\n", "l0/b"},
	} {
		f.Add(s[0], s[1])
	}
	// Where the fuzzer's links go, and the tree's other entries.
	linkAt := []string{"l0", "a/l1", "a/b/l2", "c/l3", "c/d/l4", "l5"}
	dirs := []string{"a", "a/b", "c", "c/d"}
	files := []string{"a/f", "c/d/g"}
	f.Fuzz(func(t *testing.T, targets, rel string) {
		if len(rel) > 200 || len(targets) > 400 || strings.ContainsRune(rel+targets, 0) || strings.Contains(rel+targets, "aside") || strings.HasPrefix(rel, "/") {
			return
		}
		base, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dirs {
			if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range files {
			if err := os.WriteFile(filepath.Join(base, n), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		entries := append(append([]string{}, dirs...), files...)
		for i, target := range strings.SplitN(targets, "\n", len(linkAt)) {
			if target == "" {
				continue
			}
			if strings.HasPrefix(target, "/") {
				target = base + target // absolute, into the tree
			}
			if os.Symlink(target, filepath.Join(base, linkAt[i])) == nil {
				entries = append(entries, linkAt[i])
			}
		}
		p := base + "/" + rel
		visited := map[string]bool{}
		got, werr := Walk(p, func(st Step) error {
			if st.Info != nil {
				visited[st.Path] = true
			}
			return nil
		})
		fd, oerr := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if errors.Is(oerr, unix.ELOOP) && !errors.Is(werr, ErrTooManyLinks) {
			t.Fatalf("%q (links %q): the open fails with ELOOP, Walk with %v", rel, targets, werr)
		}
		if oerr != nil {
			return
		}
		there, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		if werr != nil || got != there {
			t.Fatalf("%q (links %q): Walk = %q, %v; the open is at %s", rel, targets, got, werr, there)
		}
		for _, e := range entries {
			full := filepath.Join(base, e)
			aside := filepath.Join(filepath.Dir(full), "aside")
			if err := os.Rename(full, aside); err != nil {
				t.Fatal(err)
			}
			fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			if err := os.Rename(aside, full); err != nil {
				t.Fatal(err)
			}
			if err != nil && !visited[full] {
				t.Fatalf("%q (links %q): the open looks up %s (without it: %v), which Walk never visits (visited %v)", rel, targets, e, err, visited)
			}
		}
	})
}

package resolvepath

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// TestWalkStopsWhereTheKernelDoes: a chain of 40 symlinks (MaxLinks)
// leads where the open does; at 41 the open fails with ELOOP and Walk,
// and so Resolve, with ErrTooManyLinks, never with a path.
func TestWalkStopsWhereTheKernelDoes(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	prev := filepath.Join(dir, "file")
	if err := os.WriteFile(prev, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= MaxLinks+1; i++ {
		link := filepath.Join(dir, "c"+strconv.Itoa(i))
		if err := os.Symlink(filepath.Base(prev), link); err != nil {
			t.Fatal(err)
		}
		prev = link
	}
	forty := filepath.Join(dir, "c"+strconv.Itoa(MaxLinks))
	if f, err := os.Open(forty); err != nil {
		t.Fatalf("the kernel opens a chain of %d: %v", MaxLinks, err)
	} else {
		f.Close()
	}
	if got, err := Resolve(forty); err != nil || got != filepath.Join(dir, "file") {
		t.Errorf("Resolve(a chain of %d) = %q, %v", MaxLinks, got, err)
	}
	over := filepath.Join(dir, "c"+strconv.Itoa(MaxLinks+1))
	if _, err := os.Open(over); !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("the kernel opens a chain of %d: %v, want ELOOP", MaxLinks+1, err)
	}
	if got, err := Resolve(over); !errors.Is(err, ErrTooManyLinks) {
		t.Errorf("Resolve(a chain of %d) = %q, %v, want ErrTooManyLinks", MaxLinks+1, got, err)
	}
}

// TestWalkFailsWhenALinkIsReplacedMidWalk: a link replaced by a regular
// file between its Lstat (the visit sees a link) and its Readlink is an
// error of the walk, not a path and not an accepted end: the rights rule
// (internal/opfile.CheckModes) refuses, and Resolve's callers, which
// fail closed on an error, refuse too.
func TestWalkFailsWhenALinkIsReplacedMidWalk(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink("elsewhere", link); err != nil {
		t.Fatal(err)
	}
	got, err := Walk(link, func(st Step) error {
		if st.Path == link && st.Info != nil && st.Info.Mode()&os.ModeSymlink != 0 {
			if err := os.Remove(link); err != nil {
				return err
			}
			return os.WriteFile(link, nil, 0o600)
		}
		return nil
	})
	if err == nil || errors.Is(err, ErrStopWalk) {
		t.Fatalf("Walk with the link replaced by a file after its Lstat: %q, %v, want the Readlink's error", got, err)
	}
}

// TestEmptySymlinkCannotBeMade: a symlink whose target is empty, which
// Walk would take as its own directory, cannot be made on Linux
// (symlink(2) refuses it with ENOENT), so no walk meets one.
func TestEmptySymlinkCannotBeMade(t *testing.T) {
	if err := os.Symlink("", filepath.Join(t.TempDir(), "empty")); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("symlink with an empty target: %v, want ENOENT", err)
	}
}

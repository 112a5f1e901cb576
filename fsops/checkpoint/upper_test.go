package checkpoint

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// layer is a hand-made overlay upper layer (the tmpfs's directory, with
// upper/ in it), as the kernel leaves one: files, whiteouts (character
// devices 0:0, which need CAP_MKNOD) and opaque directories.
type layer struct {
	t   *testing.T
	dir string
}

func newLayer(t *testing.T) *layer {
	t.Helper()
	d := t.TempDir()
	if err := os.Mkdir(filepath.Join(d, "upper"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &layer{t, d}
}

func (l *layer) file(p, content string) {
	l.t.Helper()
	full := filepath.Join(l.dir, "upper", p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		l.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		l.t.Fatal(err)
	}
}

func (l *layer) whiteout(p string) {
	l.t.Helper()
	if err := unix.Mknod(filepath.Join(l.dir, "upper", p), unix.S_IFCHR, 0); err != nil {
		if errors.Is(err, unix.EPERM) {
			l.t.Skip("making a whiteout (mknod c 0 0) needs CAP_MKNOD: run the test as root")
		}
		l.t.Fatal(err)
	}
}

func (l *layer) opaqueDir(p string) {
	l.t.Helper()
	full := filepath.Join(l.dir, "upper", p)
	if err := os.MkdirAll(full, 0o755); err != nil {
		l.t.Fatal(err)
	}
	if err := unix.Setxattr(full, "user.overlay.opaque", []byte("y"), 0); err != nil {
		l.t.Skipf("user extended attributes on %s: %v", l.dir, err)
	}
}

func (l *layer) read(ws fsops.Workspace, since time.Time) *Upper {
	l.t.Helper()
	f, err := os.Open(l.dir)
	if err != nil {
		l.t.Fatal(err)
	}
	defer f.Close()
	u, err := ReadUpper(context.Background(), f, ws, since, UpperLimits{})
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { u.Close() })
	return u
}

func wsWith(t *testing.T, files map[string]string) (fsops.Workspace, string) {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws, root
}

func kinds(s ChangeSet) string {
	var out []string
	for _, c := range s.Changes {
		out = append(out, c.Kind[:1]+" "+c.Path)
	}
	return strings.Join(out, ", ")
}

// TestReadUpperAndApply: a layer that edits, adds, deletes a directory,
// hides one behind an opaque directory and copies a file up unchanged reads
// as exactly those changes, with diffs, and Apply makes them.
func TestReadUpperAndApply(t *testing.T) {
	ws, root := wsWith(t, map[string]string{
		"a": "old\n", "keep": "same\n", "src/x.go": "package x\n", "src/y.go": "package y\n", "d2/z": "z\n", "t/x": "x\n",
	})
	l := newLayer(t)
	l.file("a", "new\n")
	l.file("b", "added\n")
	l.file("keep", "same\n")
	l.whiteout("src")
	l.opaqueDir("d2")
	l.file("d2/w", "w\n")
	l.file("t", "now a file\n") // was a directory: deleted, then added
	u := l.read(ws, time.Now())
	// d2/w is new in d2, which the layer made opaque: d2 stays, z goes.
	want := "m a, a b, a d2/w, d d2/z, d src, d src/x.go, d src/y.go, d t, a t, d t/x"
	if got := kinds(u.Set); got != want || u.Set.Added != 3 || u.Set.Modified != 1 || u.Set.Deleted != 6 {
		t.Fatalf("changes %q (%d/%d/%d); want %q", got, u.Set.Added, u.Set.Modified, u.Set.Deleted, want)
	}
	text := Text(u.Set)
	for _, s := range []string{"-old\n+new", "+added", "-package x"} {
		if !strings.Contains(text, s) {
			t.Fatalf("text lacks %q:\n%s", s, text)
		}
	}
	if _, err := u.Apply(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"a": "new\n", "b": "added\n", "keep": "same\n", "d2/w": "w\n", "t": "now a file\n"} {
		if b, err := os.ReadFile(filepath.Join(root, p)); err != nil || string(b) != want {
			t.Fatalf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	for _, p := range []string{"src", "d2/z"} {
		if _, err := os.Lstat(filepath.Join(root, p)); !os.IsNotExist(err) {
			t.Fatalf("%s still there: %v", p, err)
		}
	}
}

// TestApplyRefusesConflicts: a path changed in the workspace since the
// command, one changed while it ran, and a symlink planted since are each
// a conflict; Apply lists them all and changes nothing.
func TestApplyRefusesConflicts(t *testing.T) {
	ws, root := wsWith(t, map[string]string{"a": "old\n", "c": "c\n"})
	since := time.Now()
	// The kernel stamps ctime from a clock that lags by up to a tick: "c"
	// changes after the command's start by its clock too.
	time.Sleep(50 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(root, "c"), []byte("during\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := newLayer(t)
	l.file("a", "new\n")
	l.file("b", "b\n")
	l.file("c", "mine\n")
	l.file("e", "e\n")
	u := l.read(ws, since)
	if err := os.WriteFile(filepath.Join(root, "a"), []byte("someone else\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	_, err := u.Apply(context.Background(), ws)
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v", err)
	}
	got := map[string]string{}
	for _, c := range ce.Conflicts {
		got[c.Path] = c.Why
	}
	if len(got) != 3 || !strings.Contains(got["a"], "since the command") || !strings.Contains(got["b"], "symlink") ||
		!strings.Contains(got["c"], "while the command ran") {
		t.Fatalf("conflicts %v", got)
	}
	if _, err := os.Lstat(filepath.Join(root, "e")); !os.IsNotExist(err) {
		t.Fatal("e applied despite the conflicts")
	}
	if b, _ := os.ReadFile("/etc/passwd"); strings.Contains(string(b), "b\n") && len(b) == 2 {
		t.Fatal("written through the planted link")
	}
}

// TestApplyRefusesLinkOut: a symlink the command made that leads out of
// the workspace is refused before anything is applied.
func TestApplyRefusesLinkOut(t *testing.T) {
	ws, root := wsWith(t, map[string]string{})
	l := newLayer(t)
	l.file("a", "a\n")
	if err := os.Symlink("../../etc/shadow", filepath.Join(l.dir, "upper", "out")); err != nil {
		t.Fatal(err)
	}
	u := l.read(ws, time.Now())
	_, err := u.Apply(context.Background(), ws)
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Conflicts) != 1 || ce.Conflicts[0].Path != "out" {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "a")); !os.IsNotExist(err) {
		t.Fatal("a applied despite the refusal")
	}
}

// TestApplyChecksWhatADeletionTakes: a file edited, since the command,
// below a directory the command deleted is a conflict: the apply does not
// take the edit with the directory.
func TestApplyChecksWhatADeletionTakes(t *testing.T) {
	ws, root := wsWith(t, map[string]string{"src/deep/a.go": "package a\n"})
	l := newLayer(t)
	l.whiteout("src")
	u := l.read(ws, time.Now())
	if err := os.WriteFile(filepath.Join(root, "src/deep/a.go"), []byte("package a // edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := u.Apply(context.Background(), ws)
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Conflicts) != 1 || ce.Conflicts[0].Path != "src/deep/a.go" {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "src/deep/a.go")); string(b) != "package a // edited\n" {
		t.Fatalf("a.go = %q", b)
	}
}

// TestReadUpperRefusesSparseFileOverLimit holds that a layer's files are
// bounded by their apparent sizes, not the blocks the tmpfs counts: a
// command's `truncate -s 4G big` uses no block, yet applying it would write
// 4 GiB. ReadUpper refuses it (TOO_LARGE), naming the bound and the file.
func TestReadUpperRefusesSparseFileOverLimit(t *testing.T) {
	ws, _ := wsWith(t, map[string]string{"keep": "k\n"})
	since := time.Now()
	l := newLayer(t)
	l.file("small", "s\n")
	if err := os.WriteFile(filepath.Join(l.dir, "upper", "big"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(l.dir, "upper", "big"), 4<<30); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(l.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, err := ReadUpper(context.Background(), f, ws, since, UpperLimits{MaxBytes: 1 << 20})
	if err == nil {
		u.Close()
		t.Fatalf("a layer with a 4 GiB sparse file was read under a 1 MiB bound: %d bytes, %d changes", u.Bytes, len(u.Set.Changes))
	}
	if !errcode.Is(err, errcode.TooLarge) || !strings.Contains(err.Error(), "1048576") || !strings.Contains(err.Error(), "big") {
		t.Fatalf("want TOO_LARGE naming the bound and the file, got %v", err)
	}
}

// TestApplyStreamsFiles holds that Apply copies a layer's file without
// holding it in memory (a 64 MiB file, sparse in the layer, allocates a
// small fraction of it), with its mode and every byte.
func TestApplyStreamsFiles(t *testing.T) {
	ws, root := wsWith(t, map[string]string{"keep": "k\n"})
	since := time.Now()
	l := newLayer(t)
	big := filepath.Join(l.dir, "upper", "big")
	if err := os.WriteFile(big, []byte("head\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(big, 0o640); err != nil { // whatever the umask
		t.Fatal(err)
	}
	if err := os.Truncate(big, 64<<20); err != nil {
		t.Fatal(err)
	}
	u := l.read(ws, since)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := u.Apply(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	if alloc > 8<<20 {
		t.Fatalf("applying a 64 MiB file allocated %d bytes: it was held in memory", alloc)
	}
	t.Logf("applying a 64 MiB file allocated %d bytes", alloc)
	fi, err := os.Stat(filepath.Join(root, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 64<<20 || fi.Mode().Perm() != 0o640 {
		t.Fatalf("applied big: %d bytes, mode %v", fi.Size(), fi.Mode())
	}
	head := make([]byte, 5)
	g, err := os.Open(filepath.Join(root, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.Read(head); err != nil || string(head) != "head\n" {
		t.Fatalf("applied big starts %q (%v)", head, err)
	}
}

// dacWS plays an unprivileged daemon's permission checks whatever the
// test's user (root ignores directory modes): it refuses to make an entry
// in a directory without the owner's write bit.
type dacWS struct{ fsops.Workspace }

func (w dacWS) check(p string) error {
	d := path.Dir(p)
	fi, err := w.Workspace.Lstat(d)
	if err == nil && fi.Mode.IsDir() && fi.Mode.Perm()&0o200 == 0 {
		return &os.PathError{Op: "create", Path: p, Err: fs.ErrPermission}
	}
	return nil
}

func (w dacWS) OpenFile(p string, flag int, perm fs.FileMode) (fsops.File, error) {
	if flag&os.O_CREATE != 0 {
		if err := w.check(p); err != nil {
			return nil, err
		}
	}
	return w.Workspace.OpenFile(p, flag, perm)
}

func (w dacWS) Mkdir(p string, parents bool) error {
	if err := w.check(p); err != nil {
		return err
	}
	return w.Workspace.Mkdir(p, parents)
}

func (w dacWS) WriteFile(p string, data []byte) error {
	if err := w.check(p); err != nil {
		return err
	}
	return w.Workspace.WriteFile(p, data)
}

func (w dacWS) Remove(p string, opts fsops.RemoveOptions) error {
	if err := w.check(p); err != nil {
		return err
	}
	return w.Workspace.Remove(p, opts)
}

func (w dacWS) Rename(src, dst string) error {
	if err := w.check(dst); err != nil {
		return err
	}
	return w.Workspace.Rename(src, dst)
}

// TestApplyReadOnlyDirectory holds that Apply sets a directory's mode after
// writing what it holds, deepest first: a transaction that ran `mkdir -p
// d/e; echo x > d/e/f; chmod 555 d/e d` applies whole. (dacWS refuses what
// an unprivileged daemon's kernel would; the same runs as any user.)
func TestApplyReadOnlyDirectory(t *testing.T) {
	ws, root := wsWith(t, map[string]string{"keep": "k\n"})
	since := time.Now()
	l := newLayer(t)
	l.file("d/e/f", "x\n")
	for _, d := range []string{"d/e", "d"} {
		if err := os.Chmod(filepath.Join(l.dir, "upper", d), 0o555); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		os.Chmod(filepath.Join(l.dir, "upper", "d"), 0o755)
		os.Chmod(filepath.Join(l.dir, "upper", "d", "e"), 0o755)
		os.Chmod(filepath.Join(root, "d"), 0o755)
		os.Chmod(filepath.Join(root, "d", "e"), 0o755)
	})
	u := l.read(ws, since)
	done, err := u.Apply(context.Background(), dacWS{ws})
	if err != nil {
		t.Fatalf("apply of read-only directories with a file: %v (made before the error: %d changes)", err, len(done.Changes))
	}
	if b, _ := os.ReadFile(filepath.Join(root, "d", "e", "f")); string(b) != "x\n" {
		t.Fatalf("d/e/f = %q", b)
	}
	for _, d := range []string{"d", "d/e"} {
		fi, err := os.Stat(filepath.Join(root, d))
		if err != nil || fi.Mode().Perm() != 0o555 {
			t.Fatalf("%s applied as %v (%v), want 0555", d, fi.Mode(), err)
		}
	}
}

// TestOpaqueDirectoryStepsBounded holds that a directory the command
// emptied and made again (`rm -rf d && mkdir d`: opaque in the layer) over
// 5,000 workspace files plans no more than MaxListed's order of steps (a
// million files would otherwise be a million steps held for the TTL), and
// that Apply still deletes every one of them and keeps what the layer made.
func TestOpaqueDirectoryStepsBounded(t *testing.T) {
	ws, root := wsWith(t, nil)
	if err := os.Mkdir(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		if err := os.WriteFile(filepath.Join(root, "d", strconv.Itoa(i)), []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	since := time.Now()
	l := newLayer(t)
	l.opaqueDir("d")
	l.file("d/new", "n\n")
	l.file("d/7", "seven again\n")
	f, err := os.Open(l.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, err := ReadUpper(context.Background(), f, ws, since, UpperLimits{MaxListed: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if len(u.steps) > 10*100 {
		t.Fatalf("an opaque directory over 5000 workspace files planned %d steps (MaxListed 100)", len(u.steps))
	}
	if u.Set.Deleted != 4999 || !u.Set.Truncated {
		t.Fatalf("the set counts %d deletions (truncated %v), want 4999 and truncated", u.Set.Deleted, u.Set.Truncated)
	}
	if _, err := u.Apply(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Join(root, "d"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "7,new" {
		t.Fatalf("after apply d holds %d entries (%.60v), want 7 and new", len(names), names)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "d", "7")); string(b) != "seven again\n" {
		t.Fatalf("d/7 = %q", b)
	}
}

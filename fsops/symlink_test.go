package fsops

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// escapeFixture is a workspace next to an "outside" directory, with links of
// every kind planted inside.
type escapeFixture struct {
	base, root, outside string
	ws                  Workspace
}

func newEscapeFixture(t testing.TB) *escapeFixture {
	t.Helper()
	base := t.TempDir()
	fx := &escapeFixture{base: base, root: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside")}
	writeTree(t, fx.outside, map[string]string{
		"secret.txt":     "SECRET\n",
		"f.txt":          "SECRET\n",
		"sub/nested.txt": "SECRET\n",
	})
	writeTree(t, fx.root, map[string]string{
		"data/f.txt":     "INSIDE\n",
		"out_abs":        "->" + fx.outside,
		"out_file_abs":   "->" + fx.outside + "/secret.txt",
		"out_rel":        "->../outside",
		"out_rel_file":   "->../outside/secret.txt",
		"deep/out_rel2":  "->../../outside",
		"deep/dot_chain": "->../data/../../outside",
		"dangling_abs":   "->" + fx.outside + "/new.txt",
		"dangling_rel":   "->../outside/newdir/new.txt",
		"chain1":         "->chain2",
		"chain2":         "->deep/out_rel2",
		"loop1":          "->loop2",
		"loop2":          "->loop1",
		"in_abs":         "->" + fx.root + "/data",
		"in_rel":         "->data",
		"in_file":        "->data/f.txt",
		"in_chain":       "->in_abs",
		"deep/in_up":     "->../data/f.txt",
	})
	fx.ws = newDirWS(t, fx.root)
	return fx
}

// snapshot lists everything below dir with a hash of each file and its mode,
// to prove an operation changed nothing there.
func snapshot(t testing.TB, dir string) string {
	t.Helper()
	var lines []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, _ := os.Lstat(p)
		line := fmt.Sprintf("%s %v", p, fi.Mode())
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			line += fmt.Sprintf(" %x %d", sha256.Sum256(b), fi.ModTime().UnixNano())
		}
		lines = append(lines, line)
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func TestSymlinkEscapeSuite(t *testing.T) {
	fx := newEscapeFixture(t)
	ws := fx.ws
	before := snapshot(t, fx.outside)
	ctx := context.Background()

	escaping := []string{
		"out_abs/secret.txt", "out_file_abs", "out_rel/secret.txt", "out_rel_file",
		"deep/out_rel2/secret.txt", "deep/dot_chain/secret.txt", "chain1/secret.txt",
		"out_rel/sub/nested.txt", "/out_rel/secret.txt", ws.Root() + "/out_abs/secret.txt",
	}
	type op struct {
		name string
		run  func(p string) error
	}
	// Operations that act on a final link itself rather than follow it (rm,
	// the source and destination of a move) are only escapes when a directory
	// on the way leads out; on a final link they act on the link, inside.
	noFollow := map[string]bool{"rm": true, "move-src": true, "move-dst": true, "rename-dst": true}
	finalLink := map[string]bool{"out_file_abs": true, "out_rel_file": true}
	ops := []op{
		{"read", func(p string) error { _, err := ws.ReadFile(p); return err }},
		{"readlines", func(p string) error { _, err := ws.ReadLines(context.Background(), p, LineRange{}); return err }},
		{"stat", func(p string) error { _, err := ws.Stat(p); return err }},
		{"exists", func(p string) error { _, err := ws.Exists(p); return err }},
		{"resolve", func(p string) error { _, err := ws.Resolve(p); return err }},
		{"write", func(p string) error { return ws.WriteFile(p, []byte("PWNED")) }},
		{"edit", func(p string) error {
			_, err := ws.Edit(p, []Edit{{OldText: "SECRET", NewText: "PWNED"}}, false)
			return err
		}},
		{"touch", func(p string) error { return ws.Touch(p) }},
		{"rm", func(p string) error { return ws.Remove(p, RemoveOptions{Recursive: true}) }},
		{"chmod", func(p string) error { return ws.Chmod(p, 0o777) }},
		{"truncate", func(p string) error { return ws.Truncate(p, 0) }},
		{"open", func(p string) error {
			f, err := ws.OpenFile(p, os.O_RDWR, 0)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"move-src", func(p string) error { return ws.Move(p, "stolen.txt") }},
		{"move-dst", func(p string) error {
			ws.WriteFile("victim.txt", []byte("v"))
			return ws.Move("victim.txt", p+".moved")
		}},
		{"rename-dst", func(p string) error {
			ws.WriteFile("victim.txt", []byte("v"))
			return ws.Rename("victim.txt", p)
		}},
	}
	for _, o := range ops {
		for _, p := range escaping {
			if noFollow[o.name] && finalLink[p] {
				continue
			}
			err := o.run(p)
			if !errcode.Is(err, errcode.PathEscapeAttempt) {
				t.Errorf("%s %q: got %v, want PATH_ESCAPE_ATTEMPT", o.name, p, err)
				continue
			}
			e := wantCode(t, err, errcode.PathEscapeAttempt)
			if !strings.Contains(e.Path, p) {
				t.Errorf("%s %q: error names %q, want the caller's path", o.name, p, e.Path)
			}
		}
	}
	// Directory operations through links to outside directories.
	dirOps := []op{
		{"mkdir", func(p string) error { return ws.Mkdir(p+"/newdir", true) }},
		{"mkdir-final", func(p string) error { return ws.Mkdir(p+"/x", false) }},
		{"readdir", func(p string) error { _, err := ws.ReadDir(p); return err }},
		{"tree", func(p string) error { _, err := ws.Tree(ctx, p, TreeOptions{}); return err }},
		{"search", func(p string) error { _, err := ws.Search(ctx, p, "**", SearchOptions{}); return err }},
		{"grep", func(p string) error { _, err := ws.Grep(ctx, GrepOptions{Pattern: "SECRET", Path: p}); return err }},
		{"scope-write", func(p string) error {
			s, err := ws.Scope(p)
			if err != nil {
				return err
			}
			defer s.Close()
			return s.WriteFile("x.txt", []byte("PWNED"))
		}},
		{"scope-read", func(p string) error {
			s, err := ws.Scope(p)
			if err != nil {
				return err
			}
			defer s.Close()
			_, err = s.ReadFile("secret.txt")
			return err
		}},
	}
	for _, o := range dirOps {
		for _, p := range []string{"out_abs", "out_rel", "deep/out_rel2", "chain1", "out_rel/sub"} {
			if err := o.run(p); !errcode.Is(err, errcode.PathEscapeAttempt) {
				t.Errorf("%s %q: got %v, want PATH_ESCAPE_ATTEMPT", o.name, p, err)
			}
		}
	}
	// Dangling links out: writing through them must not create the target.
	for _, p := range []string{"dangling_abs", "dangling_rel"} {
		wantCode(t, ws.WriteFile(p, []byte("PWNED")), errcode.PathEscapeAttempt)
		wantCode(t, ws.Touch(p), errcode.PathEscapeAttempt)
		f, err := ws.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
		if err == nil {
			f.Close()
		}
		wantCode(t, err, errcode.PathEscapeAttempt)
	}
	// Loops fail (no hang, no success).
	for _, p := range []string{"loop1", "loop1/x"} {
		if _, err := ws.ReadFile(p); err == nil || errcode.Of(err) == "" {
			t.Errorf("read through a loop: %v", err)
		}
	}
	// Walks over the whole root list the links but never what lies outside.
	nodes, err := ws.Tree(ctx, ".", TreeOptions{})
	must(t, err)
	if js := TreeJSON(nodes); strings.Contains(js, "secret") || strings.Contains(js, "nested") {
		t.Errorf("tree shows outside content:\n%s", js)
	}
	hits, err := ws.Search(ctx, ".", "**", SearchOptions{})
	must(t, err)
	for _, h := range hits {
		if strings.Contains(h, "secret") || strings.Contains(h, "nested") {
			t.Errorf("search lists outside file %q", h)
		}
	}
	res, err := ws.Grep(ctx, GrepOptions{Pattern: "SECRET", OutputMode: "content"})
	must(t, err)
	if res.Matches != 0 {
		t.Errorf("grep found outside content: %q", res.Output)
	}
	// Removing an escaping link removes the link, not what it points to.
	must(t, ws.Remove("out_rel", RemoveOptions{Recursive: true}))
	if _, err := os.Lstat(filepath.Join(fx.root, "out_rel")); !os.IsNotExist(err) {
		t.Errorf("link not removed: %v", err)
	}
	if after := snapshot(t, fx.outside); after != before {
		t.Errorf("outside changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if _, err := os.Stat(filepath.Join(fx.base, "stolen.txt")); err == nil {
		t.Error("something was created next to the workspace")
	}
}

// Links that stay inside are followed, absolute ones included (os.Root alone
// refuses every absolute link; the fallback rewrites those that stay inside).
func TestSymlinkInsideAllowed(t *testing.T) {
	fx := newEscapeFixture(t)
	ws := fx.ws
	for _, p := range []string{"in_abs/f.txt", "in_rel/f.txt", "in_file", "in_chain/f.txt", "deep/in_up", ws.Root() + "/in_abs/f.txt"} {
		got, err := ws.ReadFile(p)
		if err != nil || string(got) != "INSIDE\n" {
			t.Errorf("read %q = %q, %v", p, got, err)
		}
		if _, err := ws.Stat(p); err != nil {
			t.Errorf("stat %q: %v", p, err)
		}
		if abs, err := ws.Resolve(p); err != nil || !strings.HasPrefix(abs, ws.Root()) {
			t.Errorf("resolve %q = %q, %v", p, abs, err)
		}
	}
	ents, err := ws.ReadDir("in_abs")
	if err != nil || len(ents) != 1 || ents[0].Name != "f.txt" {
		t.Errorf("readdir through absolute inside link = %+v, %v", ents, err)
	}
	must(t, ws.WriteFile("in_abs/new.txt", []byte("n")))
	if _, err := os.Stat(filepath.Join(fx.root, "data/new.txt")); err != nil {
		t.Errorf("write through inside link: %v", err)
	}
	// Writing through a file link changes the target and keeps the link.
	must(t, ws.WriteFile("in_file", []byte("CHANGED\n")))
	if fi, err := os.Lstat(filepath.Join(fx.root, "in_file")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(fx.root, "data/f.txt")); string(b) != "CHANGED\n" {
		t.Errorf("target = %q", b)
	}
	info, err := ws.Lstat("in_file")
	must(t, err)
	if info.Mode&fs.ModeSymlink == 0 {
		t.Errorf("Lstat mode %v", info.Mode)
	}
	// A scope reached through an inside link works.
	s, err := ws.Scope("in_abs")
	must(t, err)
	defer s.Close()
	if _, err := s.ReadFile("new.txt"); err != nil {
		t.Errorf("scope via inside link: %v", err)
	}
	// Symlink/Readlink confined.
	must(t, ws.Symlink("data/f.txt", "made_link"))
	if tgt, err := ws.Readlink("made_link"); err != nil || tgt != "data/f.txt" {
		t.Errorf("readlink = %q, %v", tgt, err)
	}
	must(t, ws.Symlink(ws.Root()+"/data", "deep/abs_made"))
	if tgt, err := os.Readlink(filepath.Join(fx.root, "deep/abs_made")); err != nil || tgt != "../data" {
		t.Errorf("absolute target stored as %q, %v (want relative)", tgt, err)
	}
	wantCode(t, ws.Symlink("../../outside", "deep/bad"), errcode.PathEscapeAttempt)
	wantCode(t, ws.Symlink("", "x"), errcode.InvalidArgument)
	_, err = ws.Readlink("out_rel")
	wantCode(t, err, errcode.PathEscapeAttempt)
	if tgt, err := ws.Readlink("in_abs"); err != nil || tgt != fx.root+"/data" {
		t.Errorf("readlink absolute inside = %q, %v", tgt, err)
	}
}

// A scope is a boundary of its own: a link inside the scope that leads to the
// parent workspace (still inside the root) is an escape from the scope.
func TestScopeSymlinkEscape(t *testing.T) {
	fx := newEscapeFixture(t)
	writeTree(t, fx.root, map[string]string{
		"users/u1/ok.txt":  "U1\n",
		"users/u2/s.txt":   "U2SECRET\n",
		"users/u1/to_u2":   "->../u2",
		"users/u1/to_root": "->" + fx.root + "/data",
	})
	s, err := fx.ws.Scope("users/u1")
	must(t, err)
	defer s.Close()
	if got, err := s.ReadFile("ok.txt"); err != nil || string(got) != "U1\n" {
		t.Fatalf("scope read = %q, %v", got, err)
	}
	for _, p := range []string{"to_u2/s.txt", "to_root/f.txt", "../u2/s.txt"} {
		_, err := s.ReadFile(p)
		wantCode(t, err, errcode.PathEscapeAttempt)
	}
}

// While one goroutine keeps swapping a link between an inside and an outside
// target, 10,000 reads through it never return outside content.
func TestSymlinkSwapRace(t *testing.T) {
	fx := newEscapeFixture(t)
	ws := fx.ws
	link := filepath.Join(fx.root, "swap")
	targets := []string{"data", "../outside", fx.root + "/data", fx.outside}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tmp := filepath.Join(fx.root, "swap.tmp")
		for i := 0; !stop.Load(); i++ {
			os.Remove(tmp)
			if err := os.Symlink(targets[i%len(targets)], tmp); err != nil {
				t.Error(err)
				return
			}
			if err := os.Rename(tmp, link); err != nil { // atomic replace
				t.Error(err)
				return
			}
		}
	}()
	inside, escaped := 0, 0
	for i := 0; i < 10000; i++ {
		got, err := ws.ReadFile("swap/f.txt")
		switch {
		case err == nil && string(got) == "INSIDE\n":
			inside++
		case err == nil:
			stop.Store(true)
			wg.Wait()
			t.Fatalf("read %d returned outside content %q", i, got)
		case errcode.Is(err, errcode.PathEscapeAttempt), errcode.Is(err, errcode.NotFound):
			escaped++
		default:
			var e *errcode.Error
			if !errors.As(err, &e) {
				t.Fatalf("untyped error %v", err)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("inside=%d refused=%d", inside, escaped)
}

// TestSymlinkThroughLinkedParent: a relative target is resolved by the
// kernel from the directory the link really lands in, not from the lexical
// parent the client named. "up/down" is a link to the root itself, so a
// link made as "up/down/l" lands in the root, where "../x" leaves the
// workspace although "up/down/../x" is lexically "up/x", inside.
func TestSymlinkThroughLinkedParent(t *testing.T) {
	fx := newEscapeFixture(t)
	ws := fx.ws
	writeTree(t, fx.root, map[string]string{
		"up/down":     "->..",                  // the root
		"a/b/c/d":     "x",                     // a real directory three deep
		"a/b/c/x.txt": "X\n",                   //
		"shallow":     "->a/b/c",               // a link down into it
		"rootlink":    "->" + fx.root,          // absolute, to the root
		"a/b/c/toout": "->../../../../outside", // a link out, for targets through it
	})
	for _, tc := range []struct {
		target, link string
		want         errcode.Code // "" = created
		points       string       // for created links: what the link must read back as
	}{
		// Lexically inside from the named parent, outside from the real one.
		{"../outside/secret.txt", "up/down/l1", errcode.PathEscapeAttempt, ""},
		{"../x", "up/down/l2", errcode.PathEscapeAttempt, ""},
		{"../../../outside", "rootlink/up/down/l3", errcode.PathEscapeAttempt, ""},
		// A target that climbs through a link out is refused too.
		{"toout/secret.txt", "shallow/l4", errcode.PathEscapeAttempt, ""},
		// Inside from the real directory (lexically it would be an escape).
		{"../../../data/f.txt", "shallow/l5", "", "INSIDE\n"},
		// Inside from both: stored as given.
		{"x.txt", "shallow/l6", "", "X\n"},
		{"data/f.txt", "up/down/l7", "", "INSIDE\n"},
		// An absolute target is stored relative to the real directory.
		{ws.Root() + "/data/f.txt", "shallow/l8", "", "INSIDE\n"},
		{"/data/f.txt", "rootlink/shallow/l9", "", "INSIDE\n"},
	} {
		t.Run(tc.link, func(t *testing.T) {
			err := ws.Symlink(tc.target, tc.link)
			if tc.want != "" {
				wantCode(t, err, tc.want)
				if _, err := os.Lstat(filepath.Join(fx.root, path.Base(tc.link))); err == nil {
					t.Errorf("the refused link was planted in the root")
				}
				if _, err := os.Lstat(filepath.Join(fx.root, "a/b/c", path.Base(tc.link))); err == nil {
					t.Errorf("the refused link was planted in a/b/c")
				}
				return
			}
			must(t, err)
			// Read by the kernel itself, outside the confinement: the link
			// must lead where the client meant.
			got, err := os.ReadFile(filepath.Join(fx.root, tc.link))
			if err != nil || string(got) != tc.points {
				t.Errorf("the link reads %q, %v; want %q", got, err, tc.points)
			}
			if _, err := ws.Readlink(tc.link); err != nil {
				t.Errorf("Readlink: %v", err)
			}
		})
	}
	// Readlink judges a link from where it really is, too: planted by hand,
	// "../outside" in the root reads as an escape through "up/down".
	must(t, os.Symlink("../outside", filepath.Join(fx.root, "planted")))
	_, err := ws.Readlink("up/down/planted")
	wantCode(t, err, errcode.PathEscapeAttempt)
}

// TestSymlinkInDoesNotFollow: the link is created in the directory Symlink
// judged, reached without following symlinks; a directory on the way that
// became a symlink meanwhile makes the creation fail instead of landing the
// link where it would point out.
func TestSymlinkInDoesNotFollow(t *testing.T) {
	fx := newEscapeFixture(t)
	r, err := os.OpenRoot(fx.root)
	must(t, err)
	defer r.Close()
	must(t, os.MkdirAll(filepath.Join(fx.root, "a/b"), 0o755))
	must(t, symlinkIn(r, "a/b", "ok", "../../data/f.txt", nil))
	if got, err := os.ReadFile(filepath.Join(fx.root, "a/b/ok")); err != nil || string(got) != "INSIDE\n" {
		t.Fatalf("a/b/ok reads %q, %v", got, err)
	}
	// "a" swapped for a link to the root: a/b would now be the root's "b".
	must(t, os.MkdirAll(filepath.Join(fx.root, "b"), 0o755))
	must(t, os.RemoveAll(filepath.Join(fx.root, "a")))
	must(t, os.Symlink(".", filepath.Join(fx.root, "a")))
	if err := symlinkIn(r, "a/b", "bad", "../../outside", nil); err == nil {
		t.Fatal("symlinkIn followed a symlink on the way")
	}
	if _, err := os.Lstat(filepath.Join(fx.root, "b/bad")); err == nil {
		t.Fatal("the link was created through the swapped directory")
	}
	// Symlink itself resolves again and judges from where the link lands.
	wantCode(t, fx.ws.Symlink("../../outside", "a/b/bad"), errcode.PathEscapeAttempt)
	must(t, fx.ws.Symlink("../data/f.txt", "a/b/good"))
	if got, err := os.ReadFile(filepath.Join(fx.root, "b/good")); err != nil || string(got) != "INSIDE\n" {
		t.Fatalf("b/good reads %q, %v", got, err)
	}
}

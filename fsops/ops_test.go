package fsops

import (
	"context"
	"io"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// Every test here runs against both implementations: the memory workspace
// must behave like the directory one (apart from its documented no-ops).

func TestReadWrite(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			must(t, ws.WriteFile("a/b/c.txt", []byte("hello\n")))
			got, err := ws.ReadFile("/a/b/c.txt")
			must(t, err)
			if string(got) != "hello\n" {
				t.Fatalf("read %q", got)
			}
			must(t, ws.WriteFile("a/b/c.txt", []byte("new")))
			got, _ = ws.ReadFile("a/b/c.txt")
			if string(got) != "new" {
				t.Fatalf("overwrite: read %q", got)
			}
			info, err := ws.Stat("a/b/c.txt")
			must(t, err)
			if info.Size != 3 || info.IsDir() || info.Name != "c.txt" || info.Path != "a/b/c.txt" {
				t.Errorf("stat = %+v", info)
			}
			if d, err := ws.Stat("a/b"); err != nil || !d.IsDir() {
				t.Errorf("stat dir = %+v, %v", d, err)
			}
			ok, err := ws.Exists("a/b/c.txt")
			if !ok || err != nil {
				t.Errorf("exists = %v, %v", ok, err)
			}
			ok, err = ws.Exists("nope")
			if ok || err != nil {
				t.Errorf("exists(nope) = %v, %v", ok, err)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			must(t, ws.WriteFile("f.txt", []byte("x")))
			must(t, ws.WriteFile("d/g.txt", []byte("x")))

			_, err := ws.ReadFile("missing.txt")
			e := wantCode(t, err, errcode.NotFound)
			if !isNotExistErr(err) || e.Path != "missing.txt" {
				t.Errorf("NotFound must wrap fs.ErrNotExist and name the path: %#v", e)
			}
			_, err = ws.ReadFile("d")
			wantCode(t, err, errcode.IsADirectory)
			_, err = ws.ReadFile("f.txt/x")
			if c := errcode.Of(err); c != errcode.NotADirectory && c != errcode.NotFound {
				t.Errorf("read under a file: %v", err)
			}
			_, err = ws.ReadFile("../x")
			wantCode(t, err, errcode.PathEscapeAttempt)
			_, err = ws.ReadLines(context.Background(), "missing", LineRange{})
			wantCode(t, err, errcode.NotFound)
			_, err = ws.ReadLines(context.Background(), "f.txt", LineRange{Offset: -1})
			wantCode(t, err, errcode.InvalidArgument)
			err = ws.WriteFile("d", []byte("x"))
			wantCode(t, err, errcode.IsADirectory)
			err = ws.WriteFile("f.txt/sub", []byte("x"))
			wantCode(t, err, errcode.NotADirectory)
		})
	}
}

func TestTooLarge(t *testing.T) {
	dir := t.TempDir()
	wsd, err := NewDir(dir, Options{MaxReadSize: 10})
	must(t, err)
	defer wsd.Close()
	wsm := NewMemory("/m", Options{MaxReadSize: 10})
	for _, ws := range []Workspace{wsd, wsm} {
		must(t, ws.WriteFile("big.txt", []byte("0123456789ABC\nline2\n")))
		_, err := ws.ReadFile("big.txt")
		e := wantCode(t, err, errcode.TooLarge)
		for _, want := range []string{"20 bytes", "10-byte limit", "use offset/limit to page"} {
			if !strings.Contains(e.Msg, want) {
				t.Errorf("TooLarge message %q lacks %q", e.Msg, want)
			}
		}
		// Paging still works on a file over the limit.
		ls, err := ws.ReadLines(context.Background(), "big.txt", LineRange{Offset: 2, Limit: 1})
		must(t, err)
		if !reflect.DeepEqual(ls.Lines, []string{"line2"}) || ls.Total != 3 {
			t.Errorf("paging a large file: %+v", ls)
		}
		_, err = ws.Edit("big.txt", []Edit{{OldText: "0", NewText: "1"}}, false)
		wantCode(t, err, errcode.TooLarge)
	}
}

func TestReadLines(t *testing.T) {
	text := "one\ntwo\nthree\nfour\nfive\n" // 6 lines by the reference's count
	long := strings.Repeat("é", MaxLineLength+5)
	cases := []struct {
		name string
		lr   LineRange
		want Lines
	}{
		{"default", LineRange{}, Lines{Lines: []string{"one", "two", "three", "four", "five", ""}, First: 1, Last: 6, Total: 6, WholeFile: true}},
		{"offset", LineRange{Offset: 2, Limit: 2}, Lines{Lines: []string{"two", "three"}, First: 2, Last: 3, Total: 6}},
		{"limit past end", LineRange{Offset: 5, Limit: 10}, Lines{Lines: []string{"five", ""}, First: 5, Last: 6, Total: 6}},
		{"offset past end", LineRange{Offset: 9}, Lines{First: 9, Last: 8, Total: 6}},
		{"head", LineRange{Head: 2, Offset: 4}, Lines{Lines: []string{"one", "two"}, First: 1, Last: 2, Total: 6}},
		{"tail", LineRange{Tail: 2}, Lines{Lines: []string{"five", ""}, First: 5, Last: 6, Total: 6}},
		{"tail all", LineRange{Tail: 99}, Lines{Lines: []string{"one", "two", "three", "four", "five", ""}, First: 1, Last: 6, Total: 6, WholeFile: true}},
	}
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			must(t, ws.WriteFile("f.txt", []byte(text)))
			for _, tc := range cases {
				got, err := ws.ReadLines(context.Background(), "f.txt", tc.lr)
				must(t, err)
				if got.Lines == nil {
					got.Lines = nil
				}
				if len(got.Lines) == 0 && len(tc.want.Lines) == 0 {
					got.Lines, tc.want.Lines = nil, nil
				}
				// Text is the lines joined, however the page was made;
				// then compare the exported fields only.
				if text, want := got.Text(), strings.Join(tc.want.Lines, "\n"); text != want {
					t.Errorf("%s: Text() = %q, want %q", tc.name, text, want)
				}
				got.text, got.joined = "", false
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
				}
			}
			must(t, ws.WriteFile("long.txt", []byte("a\n"+long+"\nb")))
			got, err := ws.ReadLines(context.Background(), "long.txt", LineRange{})
			must(t, err)
			if got.CutLines != 1 || len(got.Lines) != 3 {
				t.Fatalf("cut: %+v", got)
			}
			wantCut := strings.Repeat("é", MaxLineLength) + "… [line truncated, original 2005 chars]"
			if got.Lines[1] != wantCut {
				t.Errorf("cut line = %q...", got.Lines[1][:20])
			}
			must(t, ws.WriteFile("empty.txt", nil))
			got, err = ws.ReadLines(context.Background(), "empty.txt", LineRange{})
			must(t, err)
			if got.Total != 1 || len(got.Lines) != 1 || got.Lines[0] != "" || !got.WholeFile {
				t.Errorf("empty file: %+v", got)
			}
		})
	}
}

// The limit caps at MaxLineLimit; large files are streamed (dir only: the
// streaming path starts above 4 MiB).
func TestReadLinesLargeStreamed(t *testing.T) {
	ws := newDirWS(t, t.TempDir())
	var b strings.Builder
	for i := 0; i < 700000; i++ {
		b.WriteString("line of text\n")
	}
	must(t, ws.WriteFile("big.txt", []byte(b.String())))
	got, err := ws.ReadLines(context.Background(), "big.txt", LineRange{Offset: 10, Limit: 99999})
	must(t, err)
	if got.Total != 700001 || len(got.Lines) != MaxLineLimit || got.First != 10 || got.Last != 10+MaxLineLimit-1 {
		t.Errorf("streamed page: total=%d n=%d first=%d last=%d", got.Total, len(got.Lines), got.First, got.Last)
	}
	got, err = ws.ReadLines(context.Background(), "big.txt", LineRange{Tail: 3})
	must(t, err)
	if got.First != 699999 || !reflect.DeepEqual(got.Lines, []string{"line of text", "line of text", ""}) {
		t.Errorf("streamed tail: %+v", got)
	}
}

func TestMkdirReadDir(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			must(t, ws.Mkdir("x/y/z", true))
			must(t, ws.WriteFile("x/b.txt", []byte("12")))
			must(t, ws.WriteFile("x/B.txt", []byte("1")))
			must(t, ws.WriteFile("x/a.txt", []byte("")))
			must(t, ws.WriteFile("x/y/z/deep", []byte("")))
			ents, err := ws.ReadDir("x")
			must(t, err)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name)
			}
			if want := []string{"B.txt", "a.txt", "b.txt", "y"}; !reflect.DeepEqual(names, want) {
				t.Errorf("readdir names = %v, want %v (bytewise)", names, want)
			}
			if !ents[3].IsDir() || ents[2].Size != 2 || ents[2].Path != "x/b.txt" {
				t.Errorf("entries = %+v", ents)
			}
			_, err = ws.ReadDir("x/b.txt")
			wantCode(t, err, errcode.NotADirectory)
			_, err = ws.ReadDir("missing")
			wantCode(t, err, errcode.NotFound)
			_, err = ws.ReadDir("..")
			wantCode(t, err, errcode.PathEscapeAttempt)
			if im.name == "dir" {
				wantCode(t, ws.Mkdir("x", false), errcode.AlreadyExists)
				wantCode(t, ws.Mkdir("x/b.txt/q", true), errcode.NotADirectory)
				wantCode(t, ws.Mkdir("no/parent", false), errcode.NotFound)
			} else {
				must(t, ws.Mkdir("anything", false)) // a no-op
				wantCode(t, ws.Mkdir("x/b.txt", true), errcode.AlreadyExists)
			}
			root, err := ws.ReadDir("")
			must(t, err)
			if len(root) != 1 || root[0].Name != "x" {
				t.Errorf("root listing = %+v", root)
			}
		})
	}
}

// ReadDirTypes lists what ReadDir lists, with the same names, paths, types
// and errors, and nothing else set.
func TestReadDirTypesMatchesReadDir(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			must(t, ws.Mkdir("x/y/z", true))
			must(t, ws.WriteFile("x/b.txt", []byte("12")))
			must(t, ws.WriteFile("x/B.txt", []byte("1")))
			if im.name == "dir" {
				must(t, ws.Symlink("b.txt", "x/link"))
			}
			full, err := ws.ReadDir("x")
			must(t, err)
			typed, err := ws.ReadDirTypes("x")
			must(t, err)
			if len(full) != len(typed) {
				t.Fatalf("ReadDirTypes = %+v\nReadDir = %+v", typed, full)
			}
			for i := range full {
				want := Info{Name: full[i].Name, Path: full[i].Path, Mode: full[i].Mode.Type()}
				if typed[i] != want {
					t.Errorf("entry %d = %+v, want %+v", i, typed[i], want)
				}
			}
			if im.name == "dir" && (typed[2].Name != "link" || typed[2].Mode&fs.ModeSymlink == 0) {
				t.Errorf("the link is not reported as a link: %+v", typed[2])
			}
			_, err = ws.ReadDirTypes("x/b.txt")
			wantCode(t, err, errcode.NotADirectory)
			_, err = ws.ReadDirTypes("missing")
			wantCode(t, err, errcode.NotFound)
			_, err = ws.ReadDirTypes("..")
			wantCode(t, err, errcode.PathEscapeAttempt)
		})
	}
}

func TestMoveRenameRemoveTouch(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			must(t, ws.WriteFile("a.txt", []byte("A")))
			must(t, ws.WriteFile("b.txt", []byte("B")))
			wantCode(t, ws.Move("a.txt", "b.txt"), errcode.AlreadyExists)
			e := wantCode(t, ws.Move("zzz", "q"), errcode.NotFound)
			if !strings.Contains(e.Msg, "source does not exist") {
				t.Errorf("move message %q", e.Msg)
			}
			must(t, ws.Move("a.txt", "new/dir/a.txt"))
			if got, _ := ws.ReadFile("new/dir/a.txt"); string(got) != "A" {
				t.Errorf("moved content %q", got)
			}
			must(t, ws.Rename("new/dir/a.txt", "b.txt")) // replaces
			if got, _ := ws.ReadFile("b.txt"); string(got) != "A" {
				t.Errorf("renamed content %q", got)
			}
			must(t, ws.WriteFile("new/dir/keep", nil)) // memory directories exist while they hold keys
			must(t, ws.Move("new", "moved"))
			if ok, _ := ws.Exists("moved/dir"); !ok && im.name == "dir" {
				t.Errorf("moved directory missing")
			}
			wantCode(t, ws.Move("../x", "y"), errcode.PathEscapeAttempt)
			wantCode(t, ws.Move("b.txt", "../y"), errcode.PathEscapeAttempt)
			wantCode(t, ws.Move(".", "y"), errcode.InvalidArgument)

			// touch never truncates
			must(t, ws.Touch("b.txt"))
			if got, _ := ws.ReadFile("b.txt"); string(got) != "A" {
				t.Errorf("touch truncated: %q", got)
			}
			must(t, ws.Touch("t/new.txt"))
			if info, err := ws.Stat("t/new.txt"); err != nil || info.Size != 0 {
				t.Errorf("touch created %+v, %v", info, err)
			}

			// rm
			wantCode(t, ws.Remove("nope", RemoveOptions{}), errcode.NotFound)
			must(t, ws.Remove("nope", RemoveOptions{Force: true}))
			must(t, ws.WriteFile("r/x/y.txt", []byte("y")))
			wantCode(t, ws.Remove("r", RemoveOptions{}), errcode.AlreadyExists)
			must(t, ws.Remove("r", RemoveOptions{Recursive: true}))
			if ok, _ := ws.Exists("r/x/y.txt"); ok {
				t.Errorf("recursive rm left files")
			}
			must(t, ws.Remove("b.txt", RemoveOptions{}))
			wantCode(t, ws.Remove(".", RemoveOptions{Recursive: true, Force: true}), errcode.InvalidArgument)
			wantCode(t, ws.Remove("../etc", RemoveOptions{Recursive: true, Force: true}), errcode.PathEscapeAttempt)
		})
	}
}

func TestEdit(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			must(t, ws.WriteFile("f.txt", []byte("alpha\r\nbeta\r\nbeta\r\ngamma\r\n")))
			_, err := ws.Edit("f.txt", []Edit{{OldText: "alpha", NewText: "A"}, {OldText: "beta", NewText: "B"}}, false)
			e := wantCode(t, err, errcode.EditFailed)
			if !strings.Contains(e.Msg, "edit 2: oldText appears 2 times") {
				t.Errorf("ambiguous message %q", e.Msg)
			}
			if got, _ := ws.ReadFile("f.txt"); !strings.Contains(string(got), "alpha") {
				t.Errorf("a failed edit wrote: %q", got)
			}
			_, err = ws.Edit("f.txt", []Edit{{OldText: "zeta", NewText: "Z"}}, false)
			e = wantCode(t, err, errcode.EditFailed)
			if !strings.HasPrefix(e.Msg, "edit 1: could not find exact match") {
				t.Errorf("not-found message %q", e.Msg)
			}
			_, err = ws.Edit("f.txt", []Edit{{OldText: "", NewText: "Z"}}, false)
			wantCode(t, err, errcode.EditFailed)

			res, err := ws.Edit("f.txt", []Edit{{OldText: "beta\r\n", NewText: "B\n", ReplaceAll: true}}, true)
			must(t, err)
			if res.Replacements != 2 || !strings.Contains(res.Diff, "-beta\n-beta\n+B\n+B") {
				t.Errorf("dry run = %+v", res)
			}
			if got, _ := ws.ReadFile("f.txt"); !strings.Contains(string(got), "beta") {
				t.Errorf("dry run wrote: %q", got)
			}
			res, err = ws.Edit("f.txt", []Edit{{OldText: "alpha", NewText: "$& $1"}, {OldText: "$& $1", NewText: "A"}}, false)
			must(t, err)
			got, _ := ws.ReadFile("f.txt")
			if string(got) != "A\nbeta\nbeta\ngamma\n" {
				t.Errorf("after edit: %q (CRLF normalised, literal replacement)", got)
			}
			want := "--- f.txt\n+++ f.txt\n@@ -1,4 +1,4 @@\n-alpha\n+A\n beta\n beta\n gamma\n"
			if res.Diff != want {
				t.Errorf("diff = %q, want %q", res.Diff, want)
			}
			_, err = ws.Edit("missing", []Edit{{OldText: "a", NewText: "b"}}, false)
			e = wantCode(t, err, errcode.NotFound)
			if e.Op != "edit" {
				t.Errorf("op = %q", e.Op)
			}
		})
	}
}

func TestTreeAndSearch(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			for _, p := range []string{"src/main.go", "src/util/u.go", "src/.hidden.go", "node_modules/x/y.js",
				"README.md", "pkg.egg-info/PKG", "sub/pkg.egg-info/PKG", "logs/a.log"} {
				must(t, ws.WriteFile(p, []byte(p)))
			}
			nodes, err := ws.Tree(context.Background(), ".", TreeOptions{DefaultExcludes: true, Exclude: []string{"*.log"}})
			must(t, err)
			var names []string
			var walk func(prefix string, ns []TreeNode)
			walk = func(prefix string, ns []TreeNode) {
				for _, n := range ns {
					names = append(names, prefix+n.Name)
					walk(prefix+n.Name+"/", n.Children)
				}
			}
			walk("", nodes)
			// "*.egg-info" has a "*", so (as in the reference) it matches the
			// relative path only: the nested one stays. "*.log" likewise.
			want := []string{"README.md", "logs", "logs/a.log", "src", "src/.hidden.go", "src/main.go", "src/util", "src/util/u.go", "sub", "sub/pkg.egg-info", "sub/pkg.egg-info/PKG"}
			if !reflect.DeepEqual(names, want) {
				t.Errorf("tree names = %v\nwant %v", names, want)
			}
			_, err = ws.Tree(context.Background(), "README.md", TreeOptions{})
			wantCode(t, err, errcode.NotADirectory)
			_, err = ws.Tree(context.Background(), "../", TreeOptions{})
			wantCode(t, err, errcode.PathEscapeAttempt)

			hits, err := ws.Search(context.Background(), "src", "**/*.go", SearchOptions{Exclude: []string{"util"}})
			must(t, err)
			if want := []string{"src/.hidden.go", "src/main.go"}; !reflect.DeepEqual(hits, want) {
				t.Errorf("search = %v, want %v", hits, want)
			}
			hits, err = ws.Search(context.Background(), ".", "*.md", SearchOptions{})
			must(t, err)
			if want := []string{"README.md"}; !reflect.DeepEqual(hits, want) {
				t.Errorf("search top-level = %v", hits)
			}
			_, err = ws.Search(context.Background(), ".", "x", SearchOptions{SortBy: "size"})
			wantCode(t, err, errcode.InvalidArgument)
			_, err = ws.Search(context.Background(), ".", "", SearchOptions{})
			wantCode(t, err, errcode.InvalidArgument)
		})
	}
}

func TestSearchSortMtime(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
			for i, p := range []string{"a.txt", "b.txt", "c.txt"} {
				must(t, ws.WriteFile(p, nil))
				must(t, ws.Chtimes(p, base, base.Add(time.Duration([]int{2, 3, 1}[i])*time.Hour)))
			}
			hits, err := ws.Search(context.Background(), "", "*.txt", SearchOptions{SortBy: "mtime"})
			must(t, err)
			if want := []string{"b.txt", "a.txt", "c.txt"}; !reflect.DeepEqual(hits, want) {
				t.Errorf("mtime order = %v, want %v", hits, want)
			}
		})
	}
}

func TestOpenFileChmodTruncate(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			f, err := ws.OpenFile("dir/f.bin", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			must(t, err)
			if _, err := f.WriteAt([]byte("world"), 6); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte("hello "), 0); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 20)
			n, err := f.ReadAt(buf, 0)
			if err != io.EOF || string(buf[:n]) != "hello world" {
				t.Errorf("ReadAt = %q, %v", buf[:n], err)
			}
			info, err := f.Stat()
			must(t, err)
			if info.Size != 11 {
				t.Errorf("size %d", info.Size)
			}
			if _, err := f.Read(buf[:5]); err != nil || string(buf[:5]) != "hello" {
				t.Errorf("Read = %q, %v", buf[:5], err)
			}
			must(t, f.Truncate(5))
			must(t, f.Sync())
			must(t, f.Close())
			must(t, f.Close()) // idempotent
			_, err = ws.OpenFile("dir/f.bin", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			wantCode(t, err, errcode.AlreadyExists)
			_, err = ws.OpenFile("nope", os.O_RDONLY, 0)
			wantCode(t, err, errcode.NotFound)
			must(t, ws.Truncate("dir/f.bin", 2))
			if got, _ := ws.ReadFile("dir/f.bin"); string(got) != "he" {
				t.Errorf("after truncate: %q", got)
			}
			wantCode(t, ws.Truncate("dir/f.bin", -1), errcode.InvalidArgument)
			must(t, ws.Chmod("dir/f.bin", 0o640))
			if info, _ := ws.Stat("dir/f.bin"); info.Mode.Perm() != 0o640 {
				t.Errorf("mode %v", info.Mode)
			}
			f, err = ws.OpenFile("dir/f.bin", os.O_WRONLY|os.O_APPEND, 0)
			must(t, err)
			f.Write([]byte("!"))
			f.Close()
			if got, _ := ws.ReadFile("dir/f.bin"); string(got) != "he!" {
				t.Errorf("after append: %q", got)
			}
		})
	}
}

func TestMemoryOnly(t *testing.T) {
	ws := NewMemory("mem", Options{})
	if ws.Root() != "/mem" || CanExec(ws) {
		t.Errorf("Root=%q CanExec=%v", ws.Root(), CanExec(ws))
	}
	wantCode(t, ws.Symlink("a", "b"), errcode.NotImplemented)
	_, err := ws.Readlink("b")
	wantCode(t, err, errcode.NotImplemented)
	_, err = ws.StatFS()
	wantCode(t, err, errcode.NotImplemented)
	// Scopes share the store: a write through a scope is visible in the parent.
	s, err := ws.Scope("users/u1")
	must(t, err)
	must(t, s.WriteFile("/f.txt", []byte("x")))
	if got, err := ws.ReadFile("users/u1/f.txt"); err != nil || string(got) != "x" {
		t.Errorf("parent sees %q, %v", got, err)
	}
	ents, err := s.ReadDir(".")
	must(t, err)
	if len(ents) != 1 || ents[0].Path != "f.txt" {
		t.Errorf("scope readdir %+v", ents)
	}
	empty, _ := ws.Scope("users/nobody")
	if ents, err := empty.ReadDir("."); err != nil || len(ents) != 0 {
		t.Errorf("empty scope readdir = %v, %v", ents, err)
	}
}

func TestDirOnly(t *testing.T) {
	_, err := NewDir("relative/path", Options{})
	wantCode(t, err, errcode.InvalidConfiguration)
	_, err = NewDir("/nonexistent/fsops/root", Options{})
	wantCode(t, err, errcode.NotFound)
	f := t.TempDir() + "/file"
	must(t, os.WriteFile(f, nil, 0o644))
	_, err = NewDir(f, Options{})
	wantCode(t, err, errcode.NotADirectory)

	// A symlinked root: Root() is the real path, and absolute paths spelled
	// with the link are inside.
	real := t.TempDir()
	link := t.TempDir() + "/link"
	must(t, os.Symlink(real, link))
	ws := newDirWS(t, link)
	if ws.Root() != real {
		t.Errorf("Root() = %q, want %q", ws.Root(), real)
	}
	must(t, ws.WriteFile(link+"/x.txt", []byte("x")))
	if _, err := os.Stat(real + "/x.txt"); err != nil {
		t.Errorf("absolute path via the root's link: %v", err)
	}
	if !CanExec(ws) {
		t.Error("dir workspace must exec")
	}
	st, err := ws.StatFS()
	if err != nil || st.BlockSize == 0 || st.NameMax == 0 {
		t.Errorf("statfs = %+v, %v", st, err)
	}

	// Close is idempotent and later calls fail.
	must(t, ws.Close())
	must(t, ws.Close())
	_, err = ws.ReadFile("x.txt")
	if err == nil {
		t.Error("read after Close succeeded")
	}
}

// The scope directory is created by the first write, exactly once even with
// many concurrent first writers, and reads before that find nothing.
func TestScopeCreatedOnceUnderConcurrentWriters(t *testing.T) {
	root := t.TempDir()
	ws := newDirWS(t, root)
	s, err := ws.Scope("users/u1")
	must(t, err)
	defer s.Close()
	if _, err := os.Stat(root + "/users"); !os.IsNotExist(err) {
		t.Fatalf("Scope created the directory before any write")
	}
	_, err = s.ReadFile("x")
	wantCode(t, err, errcode.NotFound)
	if ok, err := s.Exists("x"); ok || err != nil {
		t.Errorf("exists in missing scope = %v, %v", ok, err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := s.WriteFile("f"+string(rune('a'+i%26))+".txt", []byte("x")); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	if n := s.(*dirWS).creates.Load(); n != 1 {
		t.Errorf("scope directory created %d times, want 1", n)
	}
	if _, err := os.Stat(root + "/users/u1/fa.txt"); err != nil {
		t.Error(err)
	}
}

// Many goroutines on one workspace (run with -race): every result is either
// a success or a typed error, and readers see whole contents only.
func TestConcurrentUse(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			contents := map[string]bool{strings.Repeat("a", 5000): true, strings.Repeat("b", 7000): true}
			must(t, ws.WriteFile("shared.txt", []byte(strings.Repeat("a", 5000))))
			var wg sync.WaitGroup
			for g := 0; g < 6; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					for i := 0; i < 60; i++ {
						switch (g + i) % 6 {
						case 0:
							if err := ws.WriteFile("shared.txt", []byte(strings.Repeat("b", 7000))); err != nil {
								t.Error(err)
							}
						case 1:
							b, err := ws.ReadFile("shared.txt")
							if err != nil || !contents[string(b)] {
								t.Errorf("torn read: %d bytes, %v", len(b), err)
							}
						case 2:
							ws.WriteFile("d/f"+string(rune('0'+g)), []byte("x"))
							ws.Remove("d/f"+string(rune('0'+g)), RemoveOptions{Force: true})
						case 3:
							if _, err := ws.ReadDir("."); err != nil {
								t.Error(err)
							}
						case 4:
							if _, err := ws.Grep(context.Background(), GrepOptions{Pattern: "a+"}); err != nil {
								t.Error(err)
							}
						case 5:
							if _, err := ws.ReadLines(context.Background(), "shared.txt", LineRange{}); err != nil {
								t.Error(err)
							}
						}
					}
				}(g)
			}
			wg.Wait()
		})
	}
}

package fsops

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// Every OS failure maps to one code, keeps its cause and names the caller's path.
func TestMapErr(t *testing.T) {
	cases := []struct {
		err  error
		op   op
		code errcode.Code
	}{
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.ENOENT}, opRead, errcode.NotFound},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.EEXIST}, opWrite, errcode.AlreadyExists},
		{&fs.PathError{Op: "rmdir", Path: "x", Err: syscall.ENOTEMPTY}, opRm, errcode.AlreadyExists},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.ENOTDIR}, opRead, errcode.NotADirectory},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.EISDIR}, opWrite, errcode.IsADirectory},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, opRead, errcode.PermissionDenied},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.EPERM}, opWrite, errcode.PermissionDenied},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.EROFS}, opWrite, errcode.PermissionDenied},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.ELOOP}, opRead, errcode.InvalidArgument},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.ENAMETOOLONG}, opRead, errcode.InvalidArgument},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.EINVAL}, opReadlink, errcode.InvalidArgument},
		{&fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, opWrite, errcode.WriteFailed},
		{&fs.PathError{Op: "read", Path: "x", Err: syscall.EIO}, opRead, errcode.ReadFailed},
		{&fs.PathError{Op: "write", Path: "x", Err: syscall.EIO}, opWrite, errcode.WriteFailed},
		{&fs.PathError{Op: "open", Path: "x", Err: errRootEscapeOr()}, opRead, errcode.PathEscapeAttempt},
	}
	for _, tc := range cases {
		err := mapErr(tc.op, "given/path", tc.err)
		e := wantCode(t, err, tc.code)
		if e.Path != "given/path" || e.Op != tc.op.name || !errors.Is(err, tc.err.(*fs.PathError).Err) {
			t.Errorf("%v → %#v: want op, caller's path and the cause", tc.err, e)
		}
		if e.Msg == "" || strings.Contains(e.Error(), "%!") {
			t.Errorf("%v → message %q", tc.err, e.Error())
		}
	}
	if mapErr(opRead, "p", nil) != nil {
		t.Error("mapErr(nil) != nil")
	}
	orig := errcode.New(errcode.TooLarge, "read", "p", "x")
	if mapErr(opEdit, "q", orig) != error(orig) {
		t.Error("an *errcode.Error must pass through")
	}
}

// An errno that says nothing more specific (EIO) gets the code of the
// operation that hit it: a failed read-only operation is READ_FAILED, never
// WRITE_FAILED, whatever its name.
func TestMapErrUnexpectedErrnoByOp(t *testing.T) {
	cases := []struct {
		op   op
		code errcode.Code
	}{
		{opOpen, errcode.ReadFailed},
		{opRead, errcode.ReadFailed},
		{opReadLines, errcode.ReadFailed},
		{opReadDir, errcode.ReadFailed},
		{opStat, errcode.ReadFailed},
		{opLstat, errcode.ReadFailed},
		{opReadlink, errcode.ReadFailed},
		{opResolve, errcode.ReadFailed},
		{opStatFS, errcode.ReadFailed},
		{opTree, errcode.ReadFailed},
		{opSearch, errcode.ReadFailed},
		{opGrep, errcode.ReadFailed},
		{opOpenWrite, errcode.WriteFailed},
		{opWrite, errcode.WriteFailed},
		{opEdit, errcode.WriteFailed},
		{opMkdir, errcode.WriteFailed},
		{opRm, errcode.WriteFailed},
		{opMove, errcode.WriteFailed},
		{opRename, errcode.WriteFailed},
		{opTouch, errcode.WriteFailed},
		{opChmod, errcode.WriteFailed},
		{opChtimes, errcode.WriteFailed},
		{opTruncate, errcode.WriteFailed},
		{opSymlink, errcode.WriteFailed},
		{opClose, errcode.WriteFailed},
		{opSync, errcode.WriteFailed},
	}
	for _, tc := range cases {
		cause := &fs.PathError{Op: "syscall", Path: "x", Err: syscall.EIO}
		e := wantCode(t, mapErr(tc.op, "given/path", cause), tc.code)
		if e.Op != tc.op.name || !errors.Is(e, syscall.EIO) {
			t.Errorf("%s: %#v", tc.op.name, e)
		}
		if want := tc.op.name + ` "given/path": ` + tc.op.name + " failed: syscall: input/output error"; e.Error() != want {
			t.Errorf("%s: Error() = %q, want %q", tc.op.name, e.Error(), want)
		}
	}
}

func TestBadInputs(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			must(t, ws.WriteFile("f.txt", []byte("x")))
			must(t, ws.WriteFile("d/g.txt", []byte("x")))

			_, err := ws.ReadFile("a\x00b")
			wantCode(t, err, errcode.InvalidArgument)
			wantCode(t, ws.WriteFile("/a\x00b", nil), errcode.InvalidArgument)
			wantCode(t, ws.Chtimes("missing", time.Now(), time.Now()), errcode.NotFound)
			wantCode(t, ws.Chmod("missing", 0o600), errcode.NotFound)
			wantCode(t, ws.Truncate("missing", 0), errcode.NotFound)
			_, err = ws.Exists("../../x")
			wantCode(t, err, errcode.PathEscapeAttempt)
			_, err = ws.Lstat("missing")
			wantCode(t, err, errcode.NotFound)
			_, err = ws.OpenFile("d", os.O_WRONLY, 0)
			wantCode(t, err, errcode.IsADirectory)
			_, err = ws.Scope("../x")
			wantCode(t, err, errcode.PathEscapeAttempt)
			must(t, ws.Touch("d")) // touching a directory is fine
			wantCode(t, ws.Move("d", "d/sub"), errcode.InvalidArgument)

			// No edits: nothing to do, the reference's header-only diff.
			res, err := ws.Edit("f.txt", nil, false)
			must(t, err)
			if res.Diff != "--- f.txt\n+++ f.txt\n" {
				t.Errorf("empty edit list diff %q", res.Diff)
			}
			_, err = ws.Edit("d", []Edit{{OldText: "a", NewText: "b"}}, false)
			wantCode(t, err, errcode.IsADirectory)
			_, err = ws.Tree(t.Context(), "missing", TreeOptions{})
			wantCode(t, err, errcode.NotFound)
			_, err = ws.Search(t.Context(), "f.txt", "*", SearchOptions{})
			wantCode(t, err, errcode.NotADirectory)
		})
	}
}

func TestDirErrorsAndLinks(t *testing.T) {
	root := t.TempDir()
	ws := newDirWS(t, root)
	// A FIFO is refused at once rather than waited on.
	must(t, syscall.Mkfifo(root+"/fifo", 0o644))
	_, err := ws.ReadFile("fifo")
	wantCode(t, err, errcode.InvalidArgument)
	_, err = ws.ReadLines(context.Background(), "fifo", LineRange{})
	wantCode(t, err, errcode.InvalidArgument)
	_, err = ws.Edit("fifo", []Edit{{OldText: "a", NewText: "b"}}, false)
	wantCode(t, err, errcode.InvalidArgument)
	if res, err := ws.Grep(t.Context(), GrepOptions{Pattern: "x", Path: "fifo"}); err != nil || res.Output != "" {
		t.Errorf("grep on a fifo = %+v, %v", res, err)
	}
	must(t, os.Remove(root+"/fifo"))
	must(t, ws.WriteFile("f.txt", []byte("x")))
	_, err = ws.Readlink("f.txt")
	wantCode(t, err, errcode.InvalidArgument)
	must(t, os.Symlink("f.txt", root+"/l"))
	ents, err := ws.ReadDir(".")
	must(t, err)
	if len(ents) != 2 || ents[1].Name != "l" || ents[1].Mode&fs.ModeSymlink == 0 {
		t.Errorf("readdir must report links as links: %+v", ents)
	}
	// A "." scope is a workspace of its own: closing it keeps the parent.
	s, err := ws.Scope(".")
	must(t, err)
	if s.Root() != ws.Root() {
		t.Errorf("scope . Root = %q", s.Root())
	}
	if _, err := s.ReadFile("f.txt"); err != nil {
		t.Error(err)
	}
	must(t, s.Close())
	if _, err := ws.ReadFile("f.txt"); err != nil {
		t.Errorf("closing a scope closed its parent: %v", err)
	}
	// Closing the parent closes its scopes.
	s2, err := ws.Scope("sub")
	must(t, err)
	must(t, s2.WriteFile("x", nil))
	must(t, ws.Close())
	if _, err := s2.ReadFile("x"); err == nil {
		t.Error("a scope outlived its closed parent")
	}
	_, err = ws.Scope("y")
	wantCode(t, err, errcode.ConnectionClosed)
}

// withOp builds a new error wrapping the one it is given, which stays as it
// was: an error returned to one caller is never changed under another.
func TestWithOpWrapsWithoutMutating(t *testing.T) {
	orig := mapErr(opRead, "a.txt", &fs.PathError{Op: "open", Path: "a.txt", Err: syscall.ENOENT}).(*errcode.Error)
	before := *orig
	got := withOp(orig, opEdit)
	if *orig != before {
		t.Errorf("withOp changed its argument: %#v, was %#v", *orig, before)
	}
	e := wantCode(t, got, errcode.NotFound)
	if e == orig || e.Op != "edit" || e.Path != "a.txt" || e.Msg != orig.Msg || !errors.Is(got, orig) || !errors.Is(got, fs.ErrNotExist) {
		t.Errorf("withOp = %#v: want a new error with op edit wrapping %#v", e, orig)
	}
	if want := `edit "a.txt": no such file or directory`; got.Error() != want {
		t.Errorf("Error() = %q, want %q", got.Error(), want)
	}
}

// Every failing call returns an error of its own: no shared *errcode.Error
// that one caller could relabel while another reads it. Run with -race: the
// goroutines read and wrap their errors concurrently.
func TestErrorsAreFreshPerCall(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			must(t, ws.WriteFile("f.txt", []byte("x")))
			calls := []func() error{
				func() error { _, err := ws.ReadFile("missing"); return err },
				func() error { _, err := ws.Stat("missing"); return err },
				func() error { return ws.Move("missing", "dst") },
				func() error { return ws.Move("f.txt", "f.txt") },
				func() error { _, err := ws.Edit("missing", nil, false); return err },
				func() error { _, err := ws.Tree(t.Context(), "missing", TreeOptions{}); return err },
				func() error { _, err := ws.ReadFile("../escape"); return err },
				func() error { return ws.Remove("missing", RemoveOptions{}) },
			}
			const workers = 8
			seen := make([][]*errcode.Error, workers)
			done := make(chan int)
			for g := 0; g < workers; g++ {
				go func() {
					defer func() { done <- g }()
					for _, call := range calls {
						err := call()
						var e *errcode.Error
						if !errors.As(err, &e) {
							t.Errorf("%v is not an *errcode.Error", err)
							return
						}
						_ = withOp(err, opGrep).Error() + e.Error()
						seen[g] = append(seen[g], e)
					}
				}()
			}
			for range workers {
				<-done
			}
			ptrs := map[*errcode.Error]bool{}
			for _, es := range seen {
				for _, e := range es {
					if ptrs[e] {
						t.Fatalf("the same *errcode.Error (%v) was returned twice", e)
					}
					ptrs[e] = true
				}
			}
		})
	}
}

// TestMapErrNamesNoHostPath: a file opened through os.Root carries its
// host path in the os layer's errors; the text a client sees names the
// path it gave, never that one.
func TestMapErrNamesNoHostPath(t *testing.T) {
	const host = "/srv/agentbe/root/users/alice/f"
	for _, cause := range []error{
		&fs.PathError{Op: "read", Path: host, Err: syscall.EINVAL},
		&fs.PathError{Op: "readat", Path: host, Err: errors.New("negative offset")},
		&fs.PathError{Op: "write", Path: host, Err: syscall.EFBIG},
		&os.LinkError{Op: "rename", Old: host, New: host + ".new", Err: syscall.EXDEV},
	} {
		err := mapErr(opRead, "/f", cause)
		if text := err.Error() + errcode.Sentence(err); strings.Contains(text, "/srv") || !strings.Contains(text, "/f") {
			t.Errorf("%v: %q", cause, text)
		}
	}
}

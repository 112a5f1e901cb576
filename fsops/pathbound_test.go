package fsops

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// TestPathBound: a path resolved to more than MaxPathBytes, the root's own
// path included, is refused with "file name too long" (INVALID_ARGUMENT),
// however it is spelt (clean and relative, with "./", absolute under the
// root) and through a scope, on the directory and the memory workspaces;
// one at the bound is served. The error names the path cut to 200 bytes.
// Without the bound, a 100 KiB X-Scope-Path and one write_file made a tree
// of 50,000 directories.
func TestPathBound(t *testing.T) {
	dirRoot := t.TempDir()
	dir, err := NewDir(dirRoot, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	for _, ws := range []Workspace{dir, NewMemory("/workspace", Options{})} {
		root := ws.Root()
		// name builds a relative path of n bytes out of 200-byte names
		// (the file system's own bound is 255 bytes a name).
		name := func(n int) string {
			var parts []string
			for ; n > 201; n -= 201 {
				parts = append(parts, strings.Repeat("d", 200))
			}
			return strings.Join(append(parts, strings.Repeat("f", n)), "/")
		}
		fits := name(MaxPathBytes - len(root) - 1)
		if len(root)+1+len(fits) != MaxPathBytes {
			t.Fatalf("fits is %d bytes with the root", len(root)+1+len(fits))
		}
		over := fits + "x"
		if err := ws.Mkdir(fits[:strings.LastIndexByte(fits, '/')], true); err != nil {
			t.Fatalf("%s: mkdir below the bound: %v", root, err)
		}
		if err := ws.WriteFile(fits, []byte("x")); err != nil {
			t.Fatalf("%s: a path of %d bytes with the root: %v", root, MaxPathBytes, err)
		}
		for _, p := range []string{over, "./" + over, root + "/" + over, "a/../" + over} {
			err := ws.WriteFile(p, []byte("x"))
			var e *errcode.Error
			if !errors.As(err, &e) || e.Code != errcode.InvalidArgument || e.Msg != "file name too long" {
				t.Errorf("%s: a path of %d bytes with the root (%.20q…): %v", root, MaxPathBytes+1, p, err)
				continue
			}
			if len(e.Path) > 200+len("…") || !strings.HasSuffix(e.Path, "…") {
				t.Errorf("%s: the error names %d bytes of the path", root, len(e.Path))
			}
			if _, err := ws.Stat(p); err == nil {
				t.Errorf("%s: %.20q… exists", root, p)
			}
		}
		// Through a scope: its path counts.
		sc, err := ws.Scope(fits[:2000])
		if err != nil {
			t.Fatal(err)
		}
		if err := sc.WriteFile(fits[2001:]+"x", []byte("x")); err == nil || !strings.Contains(err.Error(), "file name too long") {
			t.Errorf("%s: through a scope, past the bound: %v", root, err)
		}
		if _, err := ws.Scope(over); err == nil || !strings.Contains(err.Error(), "file name too long") {
			t.Errorf("%s: a scope past the bound: %v", root, err)
		}
		sc.Close()
	}
}

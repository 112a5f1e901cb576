package fsops

import (
	"go/ast"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/internal/srcscan"
)

// TestPOSIXMode covers every file type fs.FileMode can hold, with the
// permission and special bits.
func TestPOSIXMode(t *testing.T) {
	tests := []struct {
		name string
		in   fs.FileMode
		want uint32
	}{
		{"regular", 0o644, 0o100644},
		{"regular, setuid setgid sticky", 0o755 | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky, 0o107755},
		{"directory", fs.ModeDir | 0o755, 0o040755},
		{"directory, sticky", fs.ModeDir | fs.ModeSticky | 0o777, 0o041777},
		{"symlink", fs.ModeSymlink | 0o777, 0o120777},
		{"named pipe", fs.ModeNamedPipe | 0o600, 0o010600},
		{"socket", fs.ModeSocket | 0o755, 0o140755},
		{"block device", fs.ModeDevice | 0o660, 0o060660},
		{"character device", fs.ModeDevice | fs.ModeCharDevice | 0o666, 0o020666},
		{"irregular: no type bits", fs.ModeIrregular | 0o644, 0o000644},
		{"irregular with setgid", fs.ModeIrregular | fs.ModeSetgid | 0o755, 0o002755},
		{"character bit without device bit", fs.ModeCharDevice | 0o600, 0o000600},
		{"two types at once", fs.ModeDir | fs.ModeSymlink | 0o755, 0o000755},
		{"bits POSIX has no place for are dropped", fs.ModeAppend | fs.ModeExclusive | fs.ModeTemporary | 0o600, 0o100600},
	}
	for _, tt := range tests {
		if got := POSIXMode(tt.in); got != tt.want {
			t.Errorf("%s: POSIXMode(%v) = %#o, want %#o", tt.name, tt.in, got, tt.want)
		}
		// A mode with POSIX type bits goes back to the same fs.FileMode
		// (less the bits POSIX has no place for).
		if tt.want&0o170000 != 0 {
			if back, want := unixMode(tt.want), tt.in&^(fs.ModeAppend|fs.ModeExclusive|fs.ModeTemporary); back != want {
				t.Errorf("%s: unixMode(%#o) = %v, want %v", tt.name, tt.want, back, want)
			}
		}
	}
}

// TestPOSIXModeRealFiles checks that the mode a workspace reports converts
// back to the kernel's st_mode for every file type that can be made here,
// and that no file a listing cannot type is called regular.
func TestPOSIXModeRealFiles(t *testing.T) {
	root := t.TempDir()
	mk := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mk(os.WriteFile(filepath.Join(root, "file"), nil, 0o644))
	mk(unix.Chmod(filepath.Join(root, "file"), 0o4755))
	mk(os.Mkdir(filepath.Join(root, "dir"), 0o755))
	mk(unix.Chmod(filepath.Join(root, "dir"), 0o1777))
	mk(os.Symlink("file", filepath.Join(root, "link")))
	mk(unix.Mkfifo(filepath.Join(root, "fifo"), 0o600))
	mk(unix.Mknod(filepath.Join(root, "sock"), unix.S_IFSOCK|0o755, 0))
	names := []string{"file", "dir", "link", "fifo", "sock"}
	check := func(ws Workspace, dir string, names []string) {
		t.Helper()
		for _, n := range names {
			var st unix.Stat_t
			mk(unix.Lstat(filepath.Join(dir, n), &st))
			info, err := ws.Lstat(n)
			mk(err)
			if got, want := POSIXMode(info.Mode), st.Mode&0o177777; got != want {
				t.Errorf("%s: POSIXMode(%v) = %#o, kernel st_mode %#o", n, info.Mode, got, want)
			}
		}
	}
	ws := newDirWS(t, root)
	check(ws, root, names)
	ents, err := ws.ReadDirTypes(".")
	mk(err)
	if len(ents) != len(names) {
		t.Fatalf("ReadDirTypes listed %d entries, want %d", len(ents), len(names))
	}
	for _, e := range ents {
		typ := POSIXMode(e.Mode) & 0o170000
		if (e.Name == "fifo" || e.Name == "sock") && typ != 0 {
			t.Errorf("ReadDirTypes %s: POSIXMode(%v) has type bits %#o, want none (untyped)", e.Name, e.Mode, typ)
		}
	}
	// Devices cannot be made without CAP_MKNOD: take the host's.
	devs := []string{"null"}
	if ents, err := os.ReadDir("/dev"); err == nil {
		for _, e := range ents {
			if e.Type()&fs.ModeDevice != 0 && e.Type()&fs.ModeCharDevice == 0 {
				devs = append(devs, e.Name()) // a block device, where there is one
				break
			}
		}
	}
	check(newDirWS(t, "/dev"), "/dev", devs)
}

// TestPOSIXModeHasOneHome keeps the fs.FileMode type mapping in this
// package: no other non-test file names the modes of irregular files, so
// no second conversion to POSIX bits can disagree with POSIXMode.
func TestPOSIXModeHasOneHome(t *testing.T) {
	irregular := map[string]bool{"ModeNamedPipe": true, "ModeSocket": true, "ModeDevice": true, "ModeCharDevice": true, "ModeIrregular": true}
	srcscan.OtherFiles(t, "..", func(_ string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && irregular[sel.Sel.Name] {
				if x, ok := sel.X.(*ast.Ident); ok && (x.Name == "fs" || x.Name == "os") {
					t.Errorf("%s: %s.%s: convert modes with fsops.POSIXMode", fset.Position(sel.Pos()), x.Name, sel.Sel.Name)
				}
			}
			return true
		})
	})
}

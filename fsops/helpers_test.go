package fsops

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentbe/agentbe-daemon/errcode"
)

func TestMain(m *testing.M) {
	if os.Getenv(killedWriterEnv) != "" {
		os.Exit(killedWriter())
	}
	code := m.Run()
	if grepTreeDir != "" {
		os.RemoveAll(grepTreeDir) // the benchmarks' shared 10,000-file tree
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// impl is one Workspace implementation under test.
type impl struct {
	name string
	new  func(t testing.TB) Workspace
}

// impls returns both implementations; each test gets a fresh, empty workspace.
func impls() []impl {
	return []impl{
		{"dir", func(t testing.TB) Workspace { return newDirWS(t, t.TempDir()) }},
		{"memory", func(t testing.TB) Workspace {
			ws := NewMemory("/mem/ws", Options{})
			t.Cleanup(func() { ws.Close() })
			return ws
		}},
	}
}

func newDirWS(t testing.TB, root string) Workspace {
	t.Helper()
	ws, err := NewDir(root, Options{})
	if err != nil {
		t.Fatalf("NewDir(%q): %v", root, err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// wantCode fails unless err is an *errcode.Error with code.
func wantCode(t testing.TB, err error, code errcode.Code) *errcode.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", code)
	}
	var e *errcode.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *errcode.Error", err, err)
	}
	if e.Code != code {
		t.Fatalf("code = %s (%v), want %s", e.Code, err, code)
	}
	return e
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// writeTree creates files (path → content) below root; a content starting
// with "->" makes a symlink to the rest.
func writeTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, p)
		must(t, os.MkdirAll(filepath.Dir(full), 0o755))
		if len(c) > 2 && c[:2] == "->" {
			must(t, os.Symlink(c[2:], full))
			continue
		}
		if c == "/" {
			must(t, os.MkdirAll(full, 0o755))
			continue
		}
		must(t, os.WriteFile(full, []byte(c), 0o644))
	}
}

func isNotExistErr(err error) bool { return errors.Is(err, fs.ErrNotExist) }

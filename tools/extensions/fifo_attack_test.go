package extensions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestAttackExtensionFileNotRegular: a FIFO named x.star in the extensions
// directory is no extension, and a file that load()s one fails at once,
// naming it: neither holds Start (the daemon's start) or a reload until
// someone writes to the FIFO (testenv.FIFO's late writer).
func TestAttackExtensionFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "hang.star")
	lib := filepath.Join(dir, "lib.star")
	testenv.FIFO(t, fifo, "x = 1\n")
	testenv.FIFO(t, lib, "x = 1\n")
	if err := os.WriteFile(filepath.Join(dir, "uses.star"), []byte(`load("lib.star", "x")
def describe_extension():
    return {"name": "uses", "version": "1", "description": "d", "tools": []}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	f := startIn(t, dir, nil)
	got := map[string]Health{}
	for _, h := range f.p.Health() {
		got[h.File] = h
	}
	// The directory's listing takes regular files only: the FIFO is no
	// extension. A module is opened by the name load() gives.
	if h, ok := got["hang.star"]; ok {
		t.Errorf("hang.star, a FIFO, was loaded as an extension: %+v", h)
	}
	if h := got["uses.star"]; h.State != "failed" || !strings.Contains(h.LastError, `load("lib.star"): not a regular file (a FIFO)`) {
		t.Errorf("uses.star: %+v; want failed, naming the FIFO it loads", h)
	}
}

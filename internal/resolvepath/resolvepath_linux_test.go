package resolvepath

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWithinBindMount: the workspace mounted a second time elsewhere is
// the same directory (needs the privilege to mount; skipped without).
func TestWithinBindMount(t *testing.T) {
	base := t.TempDir()
	ws, other := filepath.Join(base, "ws"), filepath.Join(base, "other")
	for _, d := range []string{ws, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mount(ws, other, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount here: %v", err)
	}
	defer syscall.Unmount(other, syscall.MNT_DETACH)
	if got, err := Within(ws, filepath.Join(other, "policy.json")); err != nil || !got {
		t.Errorf("a file below a bind mount of the workspace: %v, %v; want inside", got, err)
	}
}

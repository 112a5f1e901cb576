package testenv

import (
	"os"
	"syscall"
	"testing"
)

// ReadOnlyDir makes dir read-only for the rest of the test, as a
// Kubernetes volume mounted with readOnly is: as root (CI), a read-only
// bind mount of dir onto itself, which refuses root's writes too (EROFS),
// unmounted in t.Cleanup; as another user, its mode without write (a-w),
// given back in t.Cleanup.
func ReadOnlyDir(t testing.TB, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		chmodReadOnly(t, dir)
		return
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mounting %s onto itself: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	if err := syscall.Mount("", dir, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("making the bind mount of %s read-only: %v", dir, err)
	}
}

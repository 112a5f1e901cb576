package testenv

import (
	"os"
	"testing"
)

// chmodReadOnly takes write away from dir's mode (a-w) and gives it back
// in t.Cleanup, for ReadOnlyDir where it cannot mount.
func chmodReadOnly(t testing.TB, dir string) {
	t.Helper()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, fi.Mode().Perm()&^0o222|fi.Mode()&os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Chmod(dir, fi.Mode().Perm()|fi.Mode()&os.ModeSticky); err != nil {
			t.Errorf("giving %s its mode back: %v", dir, err)
		}
	})
}

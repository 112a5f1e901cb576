//go:build !linux

package testenv

import "testing"

// ReadOnlyDir makes dir read-only for the rest of the test: its mode
// without write (a-w), given back in t.Cleanup.
func ReadOnlyDir(t testing.TB, dir string) {
	t.Helper()
	chmodReadOnly(t, dir)
}

//go:build !unix

package testenv

import (
	"runtime"
	"testing"
)

// HostileFiles skips the test: there are no FIFOs to make here.
func HostileFiles(t testing.TB) []HostileFile {
	t.Helper()
	t.Skipf("no FIFOs on %s", runtime.GOOS)
	return nil
}

// FIFO skips the test: there are no FIFOs to make here.
func FIFO(t testing.TB, path, late string) {
	t.Helper()
	t.Skipf("no FIFOs on %s", runtime.GOOS)
}

package client

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind; on
// Linux the test binary is first made the landlock mode's trampoline
// (trampoline_linux_test.go), as a program's main does.
func TestMain(m *testing.M) {
	trampoline()
	goleak.VerifyTestMain(m)
}

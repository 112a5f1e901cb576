package client

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestMain fails the package when a test leaves a goroutine behind; on
// Linux the test binary is first made the landlock mode's trampoline
// (trampoline_linux_test.go), as a program's main does.
func TestMain(m *testing.M) {
	trampoline()
	testenv.OperatorUmask() // the daemon's key and token files, made as an operator would
	goleak.VerifyTestMain(m)
}

//go:build linux

package sandbox

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentbe/agentbe-daemon/internal/testbin"
	"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"
)

// testRoleEnv makes the test binary play a helper process instead of
// running the tests (see testRoles).
const testRoleEnv = "AGENTBE_SANDBOX_TEST_ROLE"

// testRoles are the helper processes some tests start from the test binary
// itself: a daemon that owns a controlling terminal, a command that tries
// to reach it, a process that keeps escaping its parent.
var testRoles = map[string]func() int{}

// TestMain makes the test binary the landlock mode's trampoline (its
// commands run through /proc/self/exe), except in the roles that play a
// program without it, and fails the package when a test leaves a goroutine
// behind.
func TestMain(m *testing.M) {
	if r := os.Getenv(testRoleEnv); r != withoutTrampoline && r != helperWithoutTrampoline {
		sandboxexec.Main()
	}
	if role, ok := testRoles[os.Getenv(testRoleEnv)]; ok {
		os.Exit(role())
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		testbin.Cleanup() // the agentbe-sandbox the helper tests built
		os.Exit(code)
	}))
}

//go:build linux

package sandbox

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// testRoleEnv makes the test binary play a helper process instead of
// running the tests (see testRoles).
const testRoleEnv = "AGENTBE_SANDBOX_TEST_ROLE"

// testRoles are the helper processes some tests start from the test binary
// itself: a daemon that owns a controlling terminal, a command that tries
// to reach it, a process that keeps escaping its parent.
var testRoles = map[string]func() int{}

// TestMain fails the package when a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	if role, ok := testRoles[os.Getenv(testRoleEnv)]; ok {
		os.Exit(role())
	}
	goleak.VerifyTestMain(m)
}

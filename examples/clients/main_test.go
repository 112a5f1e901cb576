package clients_test

import (
	"os"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestMain makes the daemon's token files of these tests as an operator
// would, whatever the umask (testenv.OperatorUmask).
func TestMain(m *testing.M) {
	testenv.OperatorUmask()
	os.Exit(m.Run())
}

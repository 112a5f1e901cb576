package mcpbridge

import (
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestReadTokenFileNeitherWaitsNorSwallows: --token-file naming a FIFO
// fails at once instead of holding the bridge (at start, or on the re-read
// after a 401) until someone writes, and one over 64 KiB fails instead of
// being read whole; each error names the file.
func TestReadTokenFileNeitherWaitsNorSwallows(t *testing.T) {
	testenv.RefusesHostileFiles(t, "ReadTokenFile", ReadTokenFile)
}

package client

import (
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestTokenFileNeitherWaitsNorSwallows: RemoteOptions.TokenFile naming a
// FIFO fails at once instead of holding the connect (and its DialTimeout)
// until someone writes, and one over 64 KiB fails instead of being read
// whole and sent as a header; each error names the file.
func TestTokenFileNeitherWaitsNorSwallows(t *testing.T) {
	testenv.RefusesHostileFiles(t, "readTokenFile", readTokenFile)
}

package main

import (
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestTokenFileNeitherWaitsNorSwallows: --token-file naming a FIFO fails
// at once instead of holding agentbe-bridge until someone writes, and one
// over 64 KiB fails instead of being read whole; each error names the file.
func TestTokenFileNeitherWaitsNorSwallows(t *testing.T) {
	testenv.RefusesHostileFiles(t, "token", token)
}

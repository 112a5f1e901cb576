package upstream

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestLoadConfigFIFO: an --upstreams file that is a FIFO fails at once,
// naming the file, instead of holding the daemon's start until someone
// writes to it (testenv.FIFO's late writer).
func TestLoadConfigFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "mcp.json")
	testenv.FIFO(t, fifo, `{"servers":[]}`)
	if _, err := LoadConfig(fifo, env(nil)); err == nil || !strings.Contains(err.Error(), "not a regular file (a FIFO)") || !strings.Contains(err.Error(), fifo) {
		t.Errorf("LoadConfig of a FIFO: %v; want an error naming the file and the FIFO", err)
	}
}

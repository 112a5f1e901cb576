package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestLoadApprovalsNeitherWaitsNorSwallows: an --exec-approvals file that
// is a FIFO fails at once instead of holding the daemon's start until
// someone writes to it (testenv.FIFO's late writer), and one over
// MaxApprovalsFile fails instead of being read whole; each error names the
// file.
func TestLoadApprovalsNeitherWaitsNorSwallows(t *testing.T) {
	dir := t.TempDir()
	fifo, big := filepath.Join(dir, "approvals.json"), filepath.Join(dir, "big.json")
	testenv.FIFO(t, fifo, `{}`)
	if err := os.WriteFile(big, []byte(`{"allowlist":{"commands":["`+strings.Repeat("x", MaxApprovalsFile)+`"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, want string }{{fifo, "not a regular file (a FIFO)"}, {big, "larger than"}} {
		if _, err := LoadApprovals(c.name, ModeAllowlist, AskOff, dir, 0); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("LoadApprovals(%s): %v; want an error naming the file and %q", c.name, err, c.want)
		}
	}
}

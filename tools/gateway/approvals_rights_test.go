package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestLoadApprovalsRefusesFilesOthersCanChange: the file that says which
// commands run unasked is read as every file that grants rights
// (opfile.Read): world-writable, or (as root) owned by nobody, it is
// refused naming the file and the fix; the same policy in a ConfigMap
// volume (symlinks through ..data, a 1777 mount point) loads.
func TestLoadApprovalsRefusesFilesOthersCanChange(t *testing.T) {
	const policy = `{"allowlist":{"commands":["ls"]}}`
	root := t.TempDir()
	p := filepath.Join(t.TempDir(), "approvals.json")
	if err := os.WriteFile(p, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o666)
	_, err := LoadApprovals(p, ModeAllowlist, AskOff, root, 0)
	if err == nil || !strings.Contains(err.Error(), p+": is writable by its group or by others") || !strings.Contains(err.Error(), "chmod go-w "+p) {
		t.Fatalf("a world-writable approvals file: %v", err)
	}
	os.Chmod(p, 0o644)
	if _, err := LoadApprovals(p, ModeAllowlist, AskOff, root, 0); err != nil {
		t.Fatalf("a 0644 approvals file: %v", err)
	}
	cm := testenv.ConfigMapVolume(t, filepath.Join(t.TempDir(), "config"), map[string]string{"approvals.json": policy})
	if _, err := LoadApprovals(cm["approvals.json"], ModeAllowlist, AskOff, root, 0); err != nil {
		t.Fatalf("an approvals file in a ConfigMap volume: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can give a file to another user (CI runs as root)")
	}
	os.Chown(p, 65534, 65534)
	if _, err := LoadApprovals(p, ModeAllowlist, AskOff, root, 0); err == nil || !strings.Contains(err.Error(), "is owned by uid 65534") || !strings.Contains(err.Error(), "chown root "+p) {
		t.Fatalf("an approvals file nobody owns: %v", err)
	}
}

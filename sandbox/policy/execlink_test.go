package policy

import (
	"os"
	"path/filepath"
	"testing"
)

// TestExecThroughLinkOnDisk: a symlink in the workspace to a program
// outside it runs that program, and is judged as it (an earlier command
// made the link, so only the disk tells).
func TestExecThroughLinkOnDisk(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin/sudo", filepath.Join(ws, "x")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("build/app", filepath.Join(ws, "app")); err != nil {
		t.Fatal(err)
	}
	p := mustPolicy(t, false)
	if err := p.Check("./x id", ws); err == nil {
		t.Error("./x id, with x -> /usr/bin/sudo in the workspace, was accepted")
	}
	if err := p.Check("./app --version", ws); err != nil {
		t.Errorf("./app, a link inside the workspace: %v", err)
	}
}

package browser

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStaleSessionDirsRemoved: a daemon killed with SIGKILL leaves its
// sessions' directories (HOME and the Chromium profile, tens of MB each)
// in the temporary directory; no close ran to remove them. The next
// provider removes each agentbe-browser-* directory that no live session
// holds locked and that is over a minute old, and leaves a live session's
// (locked), a directory being made (fresh), and a link by that name (its
// target untouched).
func TestStaleSessionDirsRemoved(t *testing.T) {
	tmp := t.TempDir()
	old := time.Now().Add(-2 * staleSessionAge)
	mk := func(name string) string {
		d := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(d, "profile", "Default"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "profile", "Default", "Cookies"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		return d
	}
	dead, live, fresh := mk("agentbe-browser-dead"), mk("agentbe-browser-live"), mk("agentbe-browser-fresh")
	for _, d := range []string{dead, live} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	held, err := holdSessionDir(live)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	target := t.TempDir()
	if err := os.WriteFile(filepath.Join(target, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "agentbe-browser-link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}

	p, err := New(Options{BrowserPath: "/nonexistent/chromium", TempDir: tmp, RunAs: "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the killed daemon's session directory is still there: %v", err)
	}
	for _, d := range []string{live, fresh, link, filepath.Join(target, "keep")} {
		if _, err := os.Lstat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
}

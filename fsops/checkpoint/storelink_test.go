package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreDirThatIsALinkRefused: the store's directory
// (<state-dir>/checkpoints, which the daemon makes) replaced by a symbolic
// link, to /etc or to a directory whose tmp/ and blobs/ hold someone's
// files: the store would make its directories and lock file there, and its
// start, which removes what an interrupted checkpoint left in tmp/ and
// blobs/, would delete what they hold. Open refuses, naming the link, and
// nothing changes behind it. A link above it (a state directory that is a
// link the operator made) is followed.
func TestStoreDirThatIsALinkRefused(t *testing.T) {
	base, target := t.TempDir(), t.TempDir()
	for _, d := range []string{"tmp", "blobs"} {
		if err := os.Mkdir(filepath.Join(target, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(target, d, "precious"), []byte("keep me\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	state := filepath.Join(base, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(state, "checkpoints")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	st, err := Open(Options{Dir: link, WorkspaceRoot: ws})
	if err == nil {
		st.Close()
	}
	if err == nil || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Open of a store whose directory is a link: %v, want a refusal naming %s as a symbolic link", err, link)
	}
	for _, d := range []string{"tmp", "blobs"} {
		if _, err := os.Stat(filepath.Join(target, d, "precious")); err != nil {
			t.Errorf("the link's target lost %s/precious: %v", d, err)
		}
	}
	for _, name := range []string{"lock", "manifests"} {
		if _, err := os.Lstat(filepath.Join(target, name)); err == nil {
			t.Errorf("the store made %s behind the link", name)
		}
	}

	// A state directory that is a link: followed, as the operator meant.
	real := t.TempDir()
	viaLink := filepath.Join(base, "state-link")
	if err := os.Symlink(real, viaLink); err != nil {
		t.Fatal(err)
	}
	st, err = Open(Options{Dir: filepath.Join(viaLink, "checkpoints"), WorkspaceRoot: ws})
	if err != nil {
		t.Fatalf("a store below a state directory that is a link: %v", err)
	}
	st.Close()
}

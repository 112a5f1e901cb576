// Package scptest is a test of the legacy scp protocol with OpenSSH's own
// scp, shared by the tests of each transport that serves it.
package scptest

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Legacy drives OpenSSH's scp in its legacy mode (-O: `scp -t` and
// `scp -f` run on the server, served by package scpd) against a workspace
// at root: an upload, a recursive upload with times, a download through a
// glob, a recursive download, a missing file and an escape. The /ssh
// (through the proxy) and SSH-port tests both run it.
func Legacy(t *testing.T, scpBin string, args []string, dest, root string) {
	t.Helper()
	local := t.TempDir()
	run := func(extra ...string) (string, error) {
		cmd := exec.Command(scpBin, append(append([]string{"-O", "-q"}, args...), extra...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	big := make([]byte, 1<<20+17)
	rand.Read(big)
	os.WriteFile(filepath.Join(local, "big.bin"), big, 0o640)
	if out, err := run(filepath.Join(local, "big.bin"), dest+":legacy.bin"); err != nil {
		t.Fatalf("scp -O upload: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "legacy.bin")); !bytes.Equal(got, big) {
		t.Fatalf("scp -O upload: %d bytes arrived, want %d", len(got), len(big))
	}

	// -r -p: a tree, with its times and modes.
	tree := filepath.Join(local, "tree")
	os.MkdirAll(filepath.Join(tree, "sub"), 0o755)
	os.WriteFile(filepath.Join(tree, "one.txt"), []byte("one"), 0o600)
	os.WriteFile(filepath.Join(tree, "sub", "two.txt"), []byte("two"), 0o644)
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	os.Chtimes(filepath.Join(tree, "sub", "two.txt"), old, old)
	if out, err := run("-r", "-p", tree, dest+":up"); err != nil {
		t.Fatalf("scp -O -r -p upload: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "up", "sub", "two.txt")); string(got) != "two" {
		t.Fatalf("scp -O -r: up/sub/two.txt has %q", got)
	}
	if fi, err := os.Stat(filepath.Join(root, "up", "sub", "two.txt")); err != nil || !fi.ModTime().Equal(old) {
		t.Fatalf("scp -O -p: mtime not kept: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "up", "one.txt")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("scp -O -p: mode not kept: %v %v", fi, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "up")); len(ents) != 2 {
		t.Fatalf("scp -O -r left extra entries (temporary files?): %v", ents)
	}

	// A glob is expanded on the server, as a shell would.
	os.WriteFile(filepath.Join(root, "g1.log"), []byte("1"), 0o644)
	os.WriteFile(filepath.Join(root, "g2.log"), []byte("2"), 0o644)
	got := filepath.Join(local, "got")
	os.Mkdir(got, 0o755)
	if out, err := run(dest+":*.log", got); err != nil {
		t.Fatalf("scp -O glob download: %v\n%s", err, out)
	}
	for _, n := range []string{"g1.log", "g2.log"} {
		if _, err := os.Stat(filepath.Join(got, n)); err != nil {
			t.Fatalf("scp -O glob download: %s missing", n)
		}
	}
	if out, err := run("-r", dest+":up", got); err != nil {
		t.Fatalf("scp -O -r download: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(got, "up", "sub", "two.txt")); string(b) != "two" {
		t.Fatalf("scp -O -r download: up/sub/two.txt has %q", b)
	}

	// Failures: a missing file, and a path out of the workspace.
	if out, err := run(dest+":nope.txt", got); err == nil || !strings.Contains(out, "nope.txt: No such file or directory") {
		t.Fatalf("scp -O of a missing file: %v\n%s", err, out)
	}
	if out, err := run(dest+":../../etc/hostname", got); err == nil || !strings.Contains(out, "outside the workspace") {
		t.Fatalf("scp -O of ../../etc/hostname: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(got, "hostname")); err == nil {
		t.Fatal("scp -O copied a file from outside the workspace")
	}
	if out, err := run(filepath.Join(local, "big.bin"), dest+":../escape.bin"); err == nil || !strings.Contains(out, "outside the workspace") {
		t.Fatalf("scp -O upload to ../escape.bin: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(root), "escape.bin")); err == nil {
		t.Fatal("scp -O wrote outside the workspace")
	}
}

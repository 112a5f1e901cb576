package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestMakeInstall: `make install PREFIX=DIR` (the README's first step)
// puts an executable agent-backend in DIR/bin, and DESTDIR stages the
// default prefix (/usr/local) below it, as a package build does; what it
// installed runs and prints its version. The repository's Makefile, run
// from the module root.
func TestMakeInstall(t *testing.T) {
	mk := testenv.Command(t, "make", "make")
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH (make install runs go build)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	prefix, stage := t.TempDir(), t.TempDir()
	for _, tc := range []struct {
		args []string
		bin  string
	}{
		{[]string{"PREFIX=" + prefix}, filepath.Join(prefix, "bin")},
		{[]string{"DESTDIR=" + stage}, filepath.Join(stage, "usr", "local", "bin")},
	} {
		cmd := exec.Command(mk, append([]string{"-C", root, "install"}, tc.args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make install %s: %v\n%s", strings.Join(tc.args, " "), err, out)
		}
		for _, name := range installedCommands {
			p := filepath.Join(tc.bin, name)
			fi, err := os.Stat(p)
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
				t.Fatalf("make install %s: %s is not an executable file (%v)\n%s", strings.Join(tc.args, " "), p, err, out)
			}
		}
		v, err := exec.Command(filepath.Join(tc.bin, "agent-backend"), "version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(v), "agent-backend v") {
			t.Errorf("the installed agent-backend version: %v, %q", err, v)
		}
	}
}

// installedCommands are the commands the Makefile's install target puts
// in BINDIR.
var installedCommands = []string{"agent-backend", "agentbe-bridge"}

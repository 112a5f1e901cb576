package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"
)

// TestMakeInstall: `make install PREFIX=DIR` (the README's first step)
// puts executable agent-backend, agentbe-sandbox and agentbe-bridge in DIR/bin, and DESTDIR stages the
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
		// The trampoline installed beside it speaks its protocol.
		p, err := exec.Command(filepath.Join(tc.bin, "agentbe-sandbox"), sandboxexec.Arg, sandboxexec.ProtocolArg).Output()
		if err != nil || strings.TrimSpace(string(p)) != sandboxexec.ProtocolLine() {
			t.Errorf("the installed agentbe-sandbox's protocol: %v, %q", err, p)
		}
	}
}

// installedCommands are the commands the Makefile's install target puts
// in BINDIR: the daemon, its sandbox trampoline (which the daemon looks
// for beside its own executable) and the bridge.
var installedCommands = []string{"agent-backend", "agentbe-sandbox", "agentbe-bridge"}

package sshd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/sandbox"
)

// runSplit runs cmd on a new session of c and returns its stdout, stderr
// and exit status.
func runSplit(t *testing.T, c *gossh.Client, cmd string) (stdout, stderr string, code int) {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var o, e bytes.Buffer
	s.Stdout, s.Stderr = &o, &e
	err = s.Run(cmd)
	var ee *gossh.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitStatus()
	case err != nil:
		t.Fatalf("%s: %v", cmd, err)
	}
	return o.String(), e.String(), code
}

// TestExecDirectMatchesShell: an SSH exec answers byte for byte the same
// whether the executor may start a plain command without a shell (its
// direct path, which session.start reaches through sandbox.Executor.Start)
// or must run every command through bash (a ulimit prefix, here from
// Rlimits, turns the direct path off: sandbox.Config.MaxProcesses). The
// commands are plain ones the direct path takes (sandbox's TestDirectStart
// holds that Start takes it) and ones that need the shell.
func TestExecDirectMatchesShell(t *testing.T) {
	direct := newEnv(t)
	shell := newEnv(t, func(_ *testOptions, c *sandbox.Config) { c.Rlimits.CPUSeconds = 3600 })
	for _, e := range []*env{direct, shell} {
		if err := os.MkdirAll(filepath.Join(e.root, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.root, "sub", "f.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dc, sc := direct.dial(t, ""), shell.dial(t, "")
	for _, cmd := range []string{
		// plain commands: one program, literal arguments
		"true",
		"false",
		"echo hello world",
		"printf '%s|' a 'b c' \"d\"",
		"cat sub/f.txt",
		"cat sub/missing.txt",
		"ls sub",
		"cd sub && cat f.txt",
		"nonexistent-program-xyz",
		"wc -l sub/f.txt",
		// commands that need the shell
		"echo a | tr a b",
		"echo $((2 + 3))",
		"for i in 1 2; do echo $i; done",
		"cat sub/f.txt > sub/copy.txt && cat sub/copy.txt",
		"exit 7",
		"echo out; echo err >&2; exit 3",
	} {
		do, de, dx := runSplit(t, dc, cmd)
		so, se, sx := runSplit(t, sc, cmd)
		if do != so || de != se || dx != sx {
			t.Errorf("%q:\ndirect-capable: %d %q %q\nshell only:     %d %q %q", cmd, dx, do, de, sx, so, se)
		}
	}
	// And the answers are the commands' own, not two identical failures.
	if out, _, code := runSplit(t, dc, "echo a | tr a b"); out != "b\n" || code != 0 {
		t.Errorf("a pipeline: %d %q", code, out)
	}
	if out, _, code := runSplit(t, dc, "cd sub && cat f.txt"); out != "one\ntwo\n" || code != 0 {
		t.Errorf("the client's cd prefix: %d %q", code, out)
	}
}

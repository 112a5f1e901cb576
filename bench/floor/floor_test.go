package floor

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestBwrapIsTheExecutorsSandbox checks that the exec floor runs bwrap as
// the sandbox package does (its own argv test holds sandbox.BwrapArgv to
// the executor's): the workspace bound from fd 3 where bwrap can, the
// command's environment set inside, and that the command really runs in
// the workspace.
func TestBwrapIsTheExecutorsSandbox(t *testing.T) {
	testenv.Bwrap(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "marker"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bw, err := Bwrap(root, "/bin/sh", "-c", `test "$PWD" = "$HOME" && test -f marker && touch made`)
	if err != nil {
		t.Fatal(err)
	}
	defer bw.Close()
	args := bw.Args()
	help, _ := exec.Command("bwrap", "--help").CombinedOutput()
	bind := []string{"--bind", root, root}
	if strings.Contains(string(help), "--bind-fd ") {
		bind = []string{"--bind-fd", "3", root}
	}
	for _, want := range [][]string{bind, {"--setenv", "HOME", root}, {"--chdir", root, "--clearenv"}} {
		if !hasRun(args, want) {
			t.Errorf("argv %q lacks %q", args, want)
		}
	}
	for i := 0; i < 2; i++ { // Cmd is fresh each time
		if out, err := bw.Cmd().CombinedOutput(); err != nil {
			t.Fatalf("run %d: %v: %s\nargv %q", i, err, out, args)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "made")); err != nil {
		t.Fatalf("the command did not run in the workspace: %v", err)
	}
}

// hasRun reports whether run appears in args as consecutive elements.
func hasRun(args, run []string) bool {
	for i := 0; i+len(run) <= len(args); i++ {
		if slices.Equal(args[i:i+len(run)], run) {
			return true
		}
	}
	return false
}

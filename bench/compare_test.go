package bench_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// compare.sh refuses what it cannot use before it builds or starts
// anything, with one line naming the argument, and exit 2.
func TestCompareScriptArguments(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		args     []string
		code     int
		stderr   string // the whole first line of stderr
		stdoutIn string // something the output must contain
	}{
		{"unknown argument", []string{"--bogus"}, 2, "compare.sh: unknown argument --bogus", ""},
		{"missing workspaces dir", []string{"--workspaces", "/nonexistent/agentbe"}, 2,
			"compare.sh: --workspaces /nonexistent/agentbe: not a writable directory", ""},
		{"workspaces is a file", []string{"--workspaces", file}, 2,
			"compare.sh: --workspaces " + file + ": not a writable directory", ""},
		{"help names every option", []string{"--help"}, 0, "", "--workspaces DIR"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("bash", append([]string{"compare.sh"}, c.args...)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.code {
				t.Errorf("exit %d, want %d\nstderr: %s", code, c.code, stderr.String())
			}
			if first, _, _ := strings.Cut(stderr.String(), "\n"); first != c.stderr {
				t.Errorf("stderr %q, want %q", first, c.stderr)
			}
			if !strings.Contains(stdout.String(), c.stdoutIn) {
				t.Errorf("stdout lacks %q:\n%s", c.stdoutIn, stdout.String())
			}
		})
	}
}

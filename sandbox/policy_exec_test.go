//go:build linux

package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// The policy's own tests are in sandbox/policy; these run its judgement
// through real executors.

// TestRunExecEnvJudged: a real executor refuses a request whose env carries
// code, before anything runs.
func TestRunExecEnvJudged(t *testing.T) {
	e, _ := newExec(t, ModeSoftware)
	_, err := e.Run(context.Background(), Request{Command: "git --version", Env: map[string]string{"GIT_EXTERNAL_DIFF": "sudo id"}})
	if !errcode.Is(err, errcode.DangerousOperation) {
		t.Fatalf("GIT_EXTERNAL_DIFF=sudo id: %v, want DANGEROUS_OPERATION", err)
	}
	if _, err := e.Run(context.Background(), Request{Command: "true", Env: map[string]string{"PAGER": "cat"}}); err != nil {
		t.Fatalf("PAGER=cat: %v", err)
	}
}

// TestRunStdinProgram runs `bash` and `python3` with a program on stdin
// through real executors: software mode refuses them before anything runs,
// bwrap mode runs them.
func TestRunStdinProgram(t *testing.T) {
	for _, cmd := range []string{"bash", "exec sh -s", "source /dev/stdin"} {
		for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
			e, ws := newExec(t, mode)
			res, err := e.Run(context.Background(), Request{Command: cmd, Stdin: strings.NewReader("echo ran > marker; echo ran\n")})
			_, statErr := os.Stat(filepath.Join(ws, "marker"))
			if mode == ModeSoftware {
				if !errcode.Is(err, errcode.UnsafeCommand) || statErr == nil {
					t.Errorf("%s %q: err %v, marker written %v; want UNSAFE_COMMAND and nothing run", mode, cmd, err, statErr == nil)
				}
				continue
			}
			if err != nil || strings.TrimSpace(string(res.Stdout)) != "ran" {
				t.Errorf("%s %q: %v, stdout %q; want it to run", mode, cmd, err, res.Stdout)
			}
		}
	}
}

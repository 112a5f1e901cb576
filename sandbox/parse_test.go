//go:build linux

package sandbox

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/sandbox/policy"
)

// TestOneParsePerCommand: a command is parsed once, whatever looks at it:
// the policy judges prepare's parse and the direct path reads the same one
// (direct.go), in every mode, with the policy on or off, whether the
// command takes the direct path or the shell, through Run and Start. A
// shell started without a command is not parsed.
func TestOneParsePerCommand(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock, ModeNone} {
		t.Run(string(mode), func(t *testing.T) {
			e, root := newExec(t, mode)
			if mode != ModeNone && e.(*executor).policy == nil {
				t.Fatal("no policy")
			}
			ctx := context.Background()
			for _, tc := range []struct {
				cmd    string
				direct bool
			}{
				{"true", true},
				{`HOME='` + root + `' cd "` + root + `" && true`, true},
				{"echo a | cat >/dev/null", false},
			} {
				x := e.(*executor)
				parsed := policy.Parse(tc.cmd)
				if _, ok := x.direct(parsed, root, root, []string{"PATH=" + basePath, "LC_ALL=C.UTF-8"}); ok != tc.direct {
					t.Fatalf("%q takes the direct path: %v, want %v", tc.cmd, ok, tc.direct)
				}
				before := policy.ParseCount()
				if res, err := e.Run(ctx, Request{Command: tc.cmd}); err != nil || res.ExitCode != 0 {
					t.Fatalf("Run(%q): %v %+v", tc.cmd, err, res)
				}
				if n := policy.ParseCount() - before; n != 1 {
					t.Errorf("Run(%q) parsed the command %d times, want 1", tc.cmd, n)
				}
				before = policy.ParseCount()
				p, err := e.Start(ctx, Request{Command: tc.cmd}, Stdio{Stdout: io.Discard})
				if err != nil {
					t.Fatalf("Start(%q): %v", tc.cmd, err)
				}
				if st, err := p.Wait(); err != nil || st.Code != 0 {
					t.Fatalf("Start(%q): %v %+v", tc.cmd, err, st)
				}
				if n := policy.ParseCount() - before; n != 1 {
					t.Errorf("Start(%q) parsed the command %d times, want 1", tc.cmd, n)
				}
			}
			if mode == ModeSoftware {
				return // refuses a shell without a command
			}
			before := policy.ParseCount()
			p, err := e.Start(ctx, Request{}, Stdio{Stdin: strings.NewReader(""), Stdout: io.Discard})
			if err != nil {
				t.Fatalf("Start(shell): %v", err)
			}
			p.Wait()
			if n := policy.ParseCount() - before; n != 0 {
				t.Errorf("a shell without a command was parsed %d times", n)
			}
		})
	}
}

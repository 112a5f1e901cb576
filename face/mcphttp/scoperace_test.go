package mcphttp

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/swaptest"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// TestScopeSwapRace races a process in the workspace that keeps swapping the
// scope directory for a symlink to a host directory against exec calls in
// that scope (X-Scope-Path). The scope is validated through the confined
// root; if anything later resolved its name again (bwrap's --bind, the
// child's chdir), the command would land in the host directory: it would
// list the host's file and could write there. Every exec must run in the
// real scope directory or fail.
func TestScopeSwapRace(t *testing.T) {
	for _, mode := range []sandbox.Mode{sandbox.ModeSoftware, sandbox.ModeBwrap, sandbox.ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == sandbox.ModeBwrap {
				testenv.Bwrap(t)
			}
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			fx := swaptest.NewFixture(t, root)
			scope, link, host := fx.Scope, fx.Link, fx.Host

			ws, err := fsops.NewDir(root, fsops.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			ex, err := sandbox.New(sandbox.Config{Mode: mode, WorkspaceRoot: root})
			if err != nil {
				t.Fatal(err)
			}
			defer ex.Close()
			e := newEnvWith(t, ws, ex)
			cs := e.connect(t, http.Header{"X-Scope-Path": {"s"}})

			// s and l trade places atomically, so s is by turns the scope
			// directory and a symlink to the host directory.
			sw := swaptest.Start(t, scope, link, 0)

			// At least calls execs, and more until minRan of them have run
			// in the scope: how often a call lands while s is the directory
			// depends on scheduling, which a loaded machine skews.
			const calls, minRan = 150, 10
			ran, i := 0, 0
			deadline := time.Now().Add(60 * time.Second)
			for ; (i < calls || ran < minRan) && time.Now().Before(deadline); i++ {
				out := call(t, cs, "exec", map[string]any{"command": "ls -a; touch planted"})
				if strings.Contains(out, "host-secret") {
					t.Fatalf("exec %d ran in the host directory:\n%s", i, out)
				}
				if strings.Contains(out, "scope-file") {
					ran++
				}
			}
			swaps := sw.Stop()
			if _, err := os.Stat(filepath.Join(host, "planted")); err == nil {
				t.Fatal("a command in the scope wrote into the host directory")
			}
			// The race must really have been run: commands ran in the scope
			// while the swapper was flipping it.
			if ran < minRan || swaps < 1000 {
				t.Fatalf("too little racing to prove anything: %d execs ran in the scope, %d swaps", ran, swaps)
			}
			t.Logf("%d of %d execs ran in the scope during %d swaps; none reached the host directory", ran, i, swaps)
		})
	}
}

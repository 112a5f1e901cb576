//go:build linux

package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWorkspaceProcesses: a started command and what it started are the
// workspace's while it runs, for its own scope and the root's, not for a
// sibling scope; nothing is once it has ended; another kind of executor
// has none.
func TestWorkspaceProcesses(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap} {
		t.Run(string(mode), func(t *testing.T) {
			ex, root := newExec(t, mode)
			scope, sibling := filepath.Join(root, "a"), filepath.Join(root, "b")
			for _, d := range []string{scope, sibling} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			p, err := ex.Start(context.Background(), Request{Command: "sleep 60 & wait", Boundary: scope}, Stdio{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = p.Signal("KILL"); _, _ = p.Wait() }()
			// The child is found by name among the host pids (under bwrap,
			// $! would be a pid of the sandbox's own namespace), once it has
			// exec'd sleep.
			top := p.(*process).Pid()
			var sleeps []int
			deadline := time.Now().Add(30 * time.Second)
			for len(sleeps) == 0 {
				for _, pid := range WorkspaceProcesses(ex, "") {
					if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); strings.TrimSpace(string(comm)) == "sleep" {
						sleeps = append(sleeps, pid)
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("no sleep among the workspace's processes %v", WorkspaceProcesses(ex, ""))
				}
				time.Sleep(10 * time.Millisecond)
			}
			all := WorkspaceProcesses(ex, "")
			if !slices.Contains(all, top) || len(sleeps) != 1 {
				t.Fatalf("WorkspaceProcesses = %v: want the command %d and its one sleep (found %v)", all, top, sleeps)
			}
			for within, want := range map[string]bool{root: true, scope: true, sibling: false, filepath.Join(scope, "x"): false} {
				got := WorkspaceProcesses(ex, within)
				if slices.Contains(got, sleeps[0]) != want || slices.Contains(got, top) != want {
					t.Errorf("within %s: %v, want the command's processes %v", within, got, want)
				}
			}
			_ = p.Signal("KILL")
			_, _ = p.Wait()
			if got := WorkspaceProcesses(ex, ""); len(got) != 0 {
				t.Fatalf("after the command ended: %v", got)
			}
		})
	}
	if got := WorkspaceProcesses(nil, ""); got != nil {
		t.Fatalf("no executor: %v", got)
	}
}

package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fdCount is how many descriptors this process has open.
func fdCount(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestLandlockTmpDirsBounded: a client may name a new scope with every
// call (X-Scope-Path), and landlock mode gives each boundary a private
// TMPDIR with a descriptor held for it. Over a long life, commands in many
// more scopes than the bound (maxTmp) all run; the directories kept, on
// disk and in the table, and the descriptors stay within the bound; a
// scope whose command is running keeps its directory and what it wrote
// there through the churn; the goroutines come back.
func TestLandlockTmpDirsBounded(t *testing.T) {
	if LandlockABI() < 1 {
		t.Skip("this kernel has no Landlock")
	}
	ws := workspace(t)
	ex, err := New(Config{Mode: ModeLandlock, WorkspaceRoot: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	e := ex.(*executor)
	l := e.iso.(*landlockIsolation)
	const bound, scopes = 8, 40
	l.tmpMu.Lock()
	l.maxTmp = bound
	l.tmpMu.Unlock()
	ctx := context.Background()

	keep := filepath.Join(ws, "keep")
	if err := os.Mkdir(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	if res, err := ex.Run(ctx, Request{Command: `echo kept > "$TMPDIR/f"`, Boundary: keep}); err != nil || res.ExitCode != 0 {
		t.Fatalf("writing keep's TMPDIR: %v %+v", err, res)
	}
	var out strings.Builder
	sleeper, err := ex.Start(ctx, Request{Command: `exec sleep 600`, Boundary: keep}, Stdio{Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Signal("KILL"); _, _ = sleeper.Wait() }()
	fds0, g0 := fdCount(t), runtime.NumGoroutine()

	for i := range scopes {
		dir := filepath.Join(ws, fmt.Sprintf("s%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		res, err := ex.Run(ctx, Request{Command: `head -c 4096 /dev/zero > "$TMPDIR/junk" && echo ok`, Boundary: dir})
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != "ok\n" {
			t.Fatalf("scope %d of %d (bound %d): %v exit %d %q", i, scopes, bound, err, res.ExitCode, res.Stderr)
		}
	}
	l.tmpWG.Wait() // the removals of evicted directories
	l.tmpMu.Lock()
	held := len(l.tmpDirs)
	l.tmpMu.Unlock()
	ents, err := os.ReadDir(l.tmp)
	if err != nil {
		t.Fatal(err)
	}
	fds, g := fdCount(t), runtime.NumGoroutine()
	t.Logf("after %d scopes: %d directories in the table, %d on disk, descriptors %d → %d, goroutines %d → %d", scopes, held, len(ents), fds0, fds, g0, g)
	if held > bound || len(ents) > bound {
		t.Errorf("%d directories in the table and %d on disk after %d scopes; want at most %d", held, len(ents), scopes, bound)
	}
	if fds > fds0+bound {
		t.Errorf("descriptors %d → %d after %d scopes; want at most %d more", fds0, fds, scopes, bound)
	}
	if g > g0+4 {
		t.Errorf("goroutines %d → %d after %d scopes", g0, g, scopes)
	}

	// The running command's scope kept its directory and its file.
	res, err := ex.Run(ctx, Request{Command: `cat "$TMPDIR/f"`, Boundary: keep})
	if err != nil || string(res.Stdout) != "kept\n" {
		t.Errorf("keep's TMPDIR after the churn: %v %q %q; want the file written before it", err, res.Stdout, res.Stderr)
	}
	// A scope whose directory was removed gets an empty one back.
	res, err = ex.Run(ctx, Request{Command: `ls -A "$TMPDIR"`, Boundary: filepath.Join(ws, "s0")})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "" {
		t.Errorf("s0's TMPDIR after its eviction: %v exit %d %q %q; want it empty", err, res.ExitCode, res.Stdout, res.Stderr)
	}
}

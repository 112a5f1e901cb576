//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestSetuidFilesRefused: a command of a filtered mode (landlock,
// software, and bwrap, which mounts the workspace nosuid inside its
// sandbox but not where the host's users run it) cannot leave a setuid or
// setgid file in the workspace for the host's users, neither by chmod nor
// by making the file with the bit: mknod of a regular file, open or
// openat with O_CREAT or O_TMPFILE, creat, and openat2, whose mode the
// filter cannot read (ENOSYS, as for clone3). A file created 0755 and an open without
// O_CREAT, whatever its mode argument, still work. Mode none runs the same
// probes as the control: each would leave such a file there.
func TestSetuidFilesRefused(t *testing.T) {
	ops := func(dir string) []string {
		return []string{
			"mknod-setuid:" + filepath.Join(dir, "mknod"),
			"open-setuid:" + filepath.Join(dir, "open"),
			"open-setgid:" + filepath.Join(dir, "opengid"),
			"open-tmpfile-setuid:" + dir,
			"creat-setuid:" + filepath.Join(dir, "creat"),
			"openat2-setuid:" + filepath.Join(dir, "openat2"),
			"open-plain:" + filepath.Join(dir, "plain"),
			"setuid:" + filepath.Join(dir, "plain"),
		}
	}
	setuidFiles := func(dir string) []string {
		var found []string
		ents, _ := os.ReadDir(dir)
		for _, de := range ents {
			if fi, err := os.Lstat(filepath.Join(dir, de.Name())); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
				found = append(found, de.Name())
			}
		}
		return found
	}

	none, ws := newExec(t, ModeNone)
	ctlDir := filepath.Join(ws, "control")
	if err := os.Mkdir(ctlDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for op, r := range runProbes(t, none, ws, ops(ctlDir)) {
		if r != "ok" {
			t.Fatalf("control (mode none): %s = %s; the probe cannot tell the filter's refusals apart", op, r)
		}
	}
	if got := setuidFiles(ctlDir); len(got) != 6 {
		t.Fatalf("control (mode none) left setuid or setgid files %v, want the 6 named ones (the O_TMPFILE one has no name)", got)
	}

	var runAs string
	if os.Geteuid() == 0 {
		runAs = throwawayUser(t, "agsu")
	}
	for _, tc := range []struct {
		mode  Mode
		runAs bool
	}{{ModeLandlock, false}, {ModeSoftware, false}, {ModeBwrap, false}, {ModeLandlock, true}, {ModeSoftware, true}, {ModeBwrap, true}} {
		mode := tc.mode
		name := string(mode)
		if tc.runAs {
			name += "/run-as"
		}
		t.Run(name, func(t *testing.T) {
			if mode == ModeLandlock && LandlockABI() < 1 {
				t.Skip("no Landlock on this kernel")
			}
			if tc.runAs && runAs == "" {
				t.Skip("--run-as needs a root daemon; this test runs as another user")
			}
			var e Executor
			var ws string
			if tc.runAs {
				// A workspace the run-as user reaches and writes.
				ws = testenv.SharedTempDir(t)
				if err := os.Chmod(ws, 0o777); err != nil {
					t.Fatal(err)
				}
				e, _ = newExec(t, mode, func(c *Config) { c.WorkspaceRoot, c.RunAs = ws, runAs })
			} else {
				e, ws = newExec(t, mode)
			}
			dir := filepath.Join(ws, "d")
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777); err != nil { // whatever the umask
				t.Fatal(err)
			}
			got := runProbes(t, e, ws, ops(dir))
			want := map[string]string{"openat2-setuid:" + filepath.Join(dir, "openat2"): "ENOSYS", "open-plain:" + filepath.Join(dir, "plain"): "ok"}
			for _, op := range ops(dir) {
				w, ok := want[op]
				if !ok {
					w = "EPERM"
				}
				if got[op] != w {
					t.Errorf("%s: %s = %s, want %s", mode, op, got[op], w)
				}
			}
			if found := setuidFiles(dir); len(found) != 0 {
				t.Errorf("%s: a command left setuid or setgid files in the workspace: %v", mode, found)
			}
		})
	}
}

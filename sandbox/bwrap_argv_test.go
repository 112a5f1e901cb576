package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestBwrapArgvMatchesExecutor holds BwrapArgv (the benchmark floor's
// sandbox) to the argv the executor itself starts for `<shell> -c true`,
// under each configuration that changes the sandbox.
func TestBwrapArgvMatchesExecutor(t *testing.T) {
	needBwrap(t)
	ro := t.TempDir()
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"default", func(*Config) {}},
		{"no network", func(c *Config) { c.NoNetwork = true }},
		{"read-only and writable paths and env", func(c *Config) {
			c.ReadOnlyPaths = []string{ro}
			c.WritablePaths = []string{filepath.Join(ro, "rw")}
			c.Env = map[string]string{"FOO": "bar"}
		}},
		{"sh", func(c *Config) { c.Shell = "sh" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex, root := newExec(t, ModeBwrap, tc.mod)
			e := ex.(*executor)
			wd, err := e.openWorkdir(&Request{}, root, root)
			if err != nil {
				t.Fatal(err)
			}
			defer wd.close()
			env, err := e.env(root, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			cmd := e.shellCommand("true", wd, env, false)
			cfg := e.cfg
			path, args, err := BwrapArgv(cfg, root, e.shellPath, "-c", "true")
			if err != nil {
				t.Fatal(err)
			}
			// The executor's argv less its seccomp filter (BwrapArgv's
			// doc): `--seccomp 5`, with the filter as fd 5.
			want := slices.Clone(cmd.Args)
			if i := slices.Index(want, "--seccomp"); i < 0 || want[i+1] != "5" {
				t.Fatalf("the executor runs bwrap without its seccomp filter: %q", want)
			} else {
				want = slices.Delete(want, i, i+2)
			}
			if !e.bindFD {
				// The executor's script starts with the mount check.
				want[len(want)-1] = "true"
			}
			if path != cmd.Path || !slices.Equal(args, want) {
				t.Fatalf("BwrapArgv = %s %q\nexecutor runs %s %q", path, args, cmd.Path, want)
			}
			if len(cmd.ExtraFiles) != 3 || cmd.ExtraFiles[0] != wd.bfd || cmd.ExtraFiles[1] != nil || cmd.ExtraFiles[2] == nil || len(cmd.Env) != 0 {
				t.Fatalf("the executor passes %d extra files and env %q; BwrapArgv's doc says fd 3 = the directory and no env, and the executor adds the filter as fd 5", len(cmd.ExtraFiles), cmd.Env)
			}
		})
	}
}

// TestBwrapArgvRuns starts BwrapArgv's command the way its doc says (the
// directory as fd 3, no environment) and checks what the command sees: the
// workspace read-write at its own path as cwd, HOME, no host /etc/shadow,
// its own pid namespace.
func TestBwrapArgvRuns(t *testing.T) {
	needBwrap(t)
	root := workspace(t)
	if err := os.WriteFile(filepath.Join(root, "marker"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	script := `test "$(pwd)" = "$HOME" && test -f marker && touch made && test ! -e /etc/shadow && test "$$" -lt 10`
	path, args, err := BwrapArgv(Config{}, root, "/bin/sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cmd := &exec.Cmd{Path: path, Args: args, Env: []string{}, ExtraFiles: []*os.File{d},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s\nargv %q", err, out, args)
	}
	if _, err := os.Stat(filepath.Join(root, "made")); err != nil {
		t.Fatalf("the command's write did not reach the workspace: %v", err)
	}
	if _, _, err := BwrapArgv(Config{}, "rel", "/bin/true"); err == nil || !strings.Contains(err.Error(), `"rel" must be an absolute path`) {
		t.Errorf("relative directory: err = %v", err)
	}
	if _, _, err := BwrapArgv(Config{}, root); err == nil || !strings.Contains(err.Error(), "no command") {
		t.Errorf("no command: err = %v", err)
	}
}

// TestReadOnlyPathUnderTmp: a configured read-only path that lives under
// /tmp (a test binary, a user's cache) is visible inside bwrap, read-only;
// the sandbox's private /tmp must not hide it.
func TestReadOnlyPathUnderTmp(t *testing.T) {
	needBwrap(t)
	ro := testenv.SharedTempDir(t)
	if err := os.WriteFile(filepath.Join(ro, "tool.txt"), []byte("visible"), 0o644); err != nil {
		t.Fatal(err)
	}
	ex, _ := newExec(t, ModeBwrap, func(c *Config) { c.ReadOnlyPaths = []string{ro} })
	q := "'" + ro + "'"
	res, err := ex.Run(t.Context(), Request{Command: "cat " + q + "/tool.txt && ! touch " + q + "/new 2>/dev/null && echo ' read-only'"})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "visible read-only\n" {
		t.Fatalf("inside bwrap: stdout %q stderr %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
	}
}

// TestWritablePathUnderTmp: a configured writable path (an MCP server's
// package cache) is visible inside bwrap read-write, even under /tmp and
// inside a read-only path; the rest of that read-only path stays read-only.
func TestWritablePathUnderTmp(t *testing.T) {
	needBwrap(t)
	ro := testenv.SharedTempDir(t)
	rw := filepath.Join(ro, "cache")
	if err := os.Mkdir(rw, 0o755); err != nil {
		t.Fatal(err)
	}
	ex, _ := newExec(t, ModeBwrap, func(c *Config) {
		c.ReadOnlyPaths = []string{ro}
		c.WritablePaths = []string{rw}
	})
	res, err := ex.Run(t.Context(), Request{Command: "echo kept > '" + rw + "/f' && ! touch '" + ro + "/g' 2>/dev/null && echo ok"})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "ok\n" {
		t.Fatalf("inside bwrap: stdout %q stderr %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
	}
	if b, _ := os.ReadFile(filepath.Join(rw, "f")); string(b) != "kept\n" {
		t.Fatalf("the write through the writable path did not reach the host: %q", b)
	}
}

//go:build linux

package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/swaptest"
	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

// TestWorkdirSwap races a swapper that keeps trading the scope directory
// with a symlink to a host directory against commands started in that
// scope, the three ways a boundary reaches the executor: a scope held open
// for a whole connection (SSH, --scope-path) passed as Workspace, the same
// with Start on a pty, and a bare Boundary name (opened beneath the
// executor's root). No command may ever run in the host directory.
func TestWorkdirSwap(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, modeOldBwrap, ModeLandlock} {
		for _, how := range []string{"workspace", "workspace-pty", "boundary"} {
			t.Run(string(mode)+"/"+how, func(t *testing.T) {
				e, root := newWorkdirExec(t, mode)
				fx := swaptest.NewFixture(t, root)
				scope, link, host := fx.Scope, fx.Link, fx.Host
				sc := heldScope(t, root)

				// A bare name is opened by one walk that a tight swapper
				// nearly always catches as the link (a refusal): pause so
				// that some opens land.
				pause := time.Duration(0)
				if how == "boundary" {
					pause = 50 * time.Microsecond
				}
				sw := swaptest.Start(t, scope, link, pause)

				// Until n commands ran in the scope (a bare name is refused,
				// at once, whenever it is the link as it is opened).
				const n = 25
				ran := 0
				deadline := time.Now().Add(30 * time.Second)
				for i := 0; ran < n && time.Now().Before(deadline); i++ {
					req := Request{Command: "ls; touch planted"}
					switch how {
					case "boundary":
						req.Boundary = scope
					case "workspace-pty":
						req.Pty = &Pty{Cols: 80, Rows: 24}
						fallthrough
					default:
						req.Workspace = sc
					}
					out, err := startAndWait(e, req)
					if err != nil {
						var ce *errcode.Error
						if how == "boundary" && errorsAsCode(err, &ce) && (ce.Code == errcode.PathEscapeAttempt || ce.Code == errcode.NotFound) {
							continue // the name was a link out at the moment it was opened: refused
						}
						t.Fatalf("start %d: %v", i, err)
					}
					if strings.Contains(out, "host-secret") {
						t.Fatalf("command %d ran in the host directory: %q", i, out)
					}
					if strings.Contains(out, "scope-file") {
						ran++
					}
				}
				swaps := sw.Stop()
				if _, err := os.Stat(filepath.Join(host, "planted")); err == nil {
					t.Fatal("a command wrote into the host directory")
				}
				if ran < n || swaps < n {
					t.Fatalf("too little racing to prove anything: %d commands ran in the scope in 30s, %d swaps", ran, swaps)
				}
			})
		}
	}
}

func startAndWait(e Executor, req Request) (string, error) {
	var out syncbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := e.Start(ctx, req, Stdio{Stdout: &out, Stderr: &out})
	if err != nil {
		return "", err
	}
	_, err = p.Wait()
	return out.String(), err
}

func errorsAsCode(err error, ce **errcode.Error) bool {
	e, ok := errorsAs(err)
	*ce = e
	return ok
}

// TestWorkdirDescriptorNotLeaked: the descriptor of the boundary is the
// daemon's, not the command's. A directory descriptor from outside bwrap's
// mount namespace would let the command walk `..` out of the sandbox.
func TestWorkdirDescriptorNotLeaked(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, modeOldBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, root := newWorkdirExec(t, mode, func(c *Config) { c.Policy.Disabled = true })
			ws, err := fsops.NewDir(root, fsops.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			// The shell path, the direct path (one program), and an
			// interactive shell reading the same from stdin.
			list := `for f in /proc/self/fd/*; do readlink "$f"; done`
			for _, req := range []Request{
				{Command: list},
				{Command: "ls -l /proc/self/fd/"},
				{Command: "", Stdin: strings.NewReader(list + "\n")},
			} {
				req.Workspace = ws
				var out string
				if req.Command == "" {
					if mode == ModeSoftware {
						continue // software mode refuses interactive shells
					}
					var buf syncbuf.Buffer
					p, err := e.Start(context.Background(), req, Stdio{Stdin: req.Stdin, Stdout: &buf})
					if err != nil {
						t.Fatal(err)
					}
					if _, err := p.Wait(); err != nil {
						t.Fatal(err)
					}
					if out = buf.String(); !strings.Contains(out, "/dev/null") && !strings.Contains(out, "pipe:") {
						t.Fatalf("the interactive shell listed no descriptors: %q", out)
					}
				} else {
					out = string(run(t, e, req).Stdout)
				}
				for _, l := range strings.Split(out, "\n") {
					if strings.Contains(l, root) {
						t.Fatalf("%q holds a descriptor of the workspace:\n%s", req.Command, out)
					}
				}
			}
		})
	}
}

// modeOldBwrap is bwrap mode with a bwrap that lacks --bind-fd (before
// 0.10): the boundary is bound from /proc/self/fd/3 and the shell closes
// fd 3 first.
const modeOldBwrap Mode = "bwrap-without-bind-fd"

// newWorkdirExec is newExec, where modeOldBwrap puts a bwrap that refuses
// --bind-fd (and leaves it out of --help) first on PATH.
func newWorkdirExec(t *testing.T, mode Mode, mod ...func(*Config)) (Executor, string) {
	t.Helper()
	if mode != modeOldBwrap {
		return newExec(t, mode, mod...)
	}
	needBwrap(t)
	real, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := "#!/bin/sh\n" +
		"if [ \"$1\" = --help ]; then " + real + " --help 2>&1 | grep -v -e --bind-fd -e --ro-bind-fd; exit 0; fi\n" +
		"for a; do if [ \"$a\" = --bind-fd ]; then echo 'bwrap: Unknown option --bind-fd' >&2; exit 1; fi; done\n" +
		"exec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "bwrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	e, root := newExec(t, ModeBwrap, mod...)
	if e.(*executor).bindFD {
		t.Fatal("the executor did not notice that bwrap lacks --bind-fd")
	}
	return e, root
}

// TestWorkdirErrors: a Workspace and a Boundary that disagree, a missing
// scope, and a boundary that is a symlink leading out are refused before
// anything runs, each with its code.
func TestWorkdirErrors(t *testing.T) {
	e, root := newExec(t, ModeSoftware)
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	missing, err := ws.Scope("not-yet")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  Request
		code errcode.Code
	}{
		{"boundary differs from workspace", Request{Workspace: ws, Boundary: filepath.Join(root, "x")}, errcode.InvalidArgument},
		{"scope not created", Request{Workspace: missing}, errcode.NotFound},
		{"boundary is a link out", Request{Boundary: filepath.Join(root, "out")}, errcode.PathEscapeAttempt},
		{"boundary is a file", Request{Boundary: filepath.Join(root, "file")}, errcode.NotFound},
		{"dir is a link out", Request{Dir: filepath.Join(root, "out")}, errcode.PathEscapeAttempt},
		{"boundary is a FIFO", Request{Boundary: filepath.Join(root, "fifo")}, errcode.NotFound},
		{"dir is a FIFO", Request{Dir: filepath.Join(root, "fifo")}, errcode.NotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Command = "echo ran"
			res, err := e.Run(context.Background(), tc.req)
			ce, ok := errorsAs(err)
			if !ok || ce.Code != tc.code {
				t.Fatalf("got %v (stdout %q), want %s", err, res.Stdout, tc.code)
			}
		})
	}
}

// TestDirectProgramSwappedForFIFO: the direct path reads the header of a
// program named in the workspace. A command swapping it for a FIFO between
// the check and the read would leave the daemon blocked in open(2) for
// ever, outside any command's timeout; the program is opened with O_PATH
// and read only when it is a regular file.
func TestDirectProgramSwappedForFIFO(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, root := newExec(t, mode, func(c *Config) { c.Policy.Disabled = true })
			tool, fifo := filepath.Join(root, "tool"), filepath.Join(root, "fifo")
			b, err := os.ReadFile("/usr/bin/true")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(tool, b, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mkfifo(fifo, 0o755); err != nil {
				t.Fatal(err)
			}
			sw := swaptest.Start(t, tool, fifo, 0)
			defer func() {
				sw.Stop()
				// Release an open(2) that code opening the FIFO by name
				// would still be blocked in.
				for _, p := range []string{tool, fifo} {
					if f, err := os.OpenFile(p, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
						f.Close()
					}
				}
			}()
			// bash itself may open the FIFO (and be killed at the
			// timeout); the daemon must never be the one blocked.
			for i := 0; i < 60; i++ {
				done := make(chan struct{})
				go func() {
					defer close(done)
					ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
					defer cancel()
					_, _ = e.Run(ctx, Request{Command: "./tool"})
				}()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatalf("run %d: an exec with a 300ms timeout did not return in 10s (blocked opening a FIFO swapped in for ./tool)", i)
				}
			}
		})
	}
}

// TestRelativeProgramSwap: `./tool` runs the scope's tool even while the
// scope's name is being swapped for a link to a host directory with a tool
// of its own, on the direct path and the shell's alike: the program is
// found relative to the working directory the child entered by descriptor.
func TestRelativeProgramSwap(t *testing.T) {
	e, root := newExec(t, ModeSoftware)
	fx := swaptest.NewFixture(t, root)
	for dir, word := range map[string]string{fx.Scope: "SCOPE", fx.Host: "HOST"} {
		if err := os.WriteFile(filepath.Join(dir, "tool"), []byte("#!/bin/sh\necho "+word+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sc := heldScope(t, root)
	swaptest.Start(t, fx.Scope, fx.Link, 0)
	for i := 0; i < 200; i++ {
		res, err := e.Run(context.Background(), Request{Command: "./tool", Workspace: sc})
		if err != nil {
			t.Fatal(err)
		}
		if out := string(res.Stdout); out != "SCOPE\n" {
			t.Fatalf("run %d: ./tool printed %q (stderr %q); want the scope's tool", i, out, res.Stderr)
		}
	}
}

// heldScope is the scope "s" of a workspace at root with its handle opened
// now, as a connection (SSH, --scope-path) holds it: before any race.
func heldScope(t *testing.T, root string) fsops.Workspace {
	t.Helper()
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	sc, err := ws.Scope("s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Stat("."); err != nil {
		t.Fatal(err)
	}
	return sc
}

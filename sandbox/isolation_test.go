//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestBwrapIsolation checks what the sandbox must guarantee, with real
// commands. The workspace is under /tmp (tmpDir, whatever TMPDIR says),
// which is exactly the case a tmpfs mounted after the workspace bind would
// break.
func TestBwrapIsolation(t *testing.T) {
	e, ws := newExec(t, ModeBwrap, func(c *Config) { c.WorkspaceRoot = testenv.SharedTempDir(t); c.Policy.Disabled = true })
	hostTmp := filepath.Join("/tmp", fmt.Sprintf("agentbe-host-%d", os.Getpid()))
	if err := os.WriteFile(hostTmp, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(hostTmp)
	outside := []string{"/etc/agentbe-escape", "/usr/agentbe-escape", "/var/tmp/agentbe-escape",
		filepath.Join(filepath.Dir(ws), "agentbe-escape"), hostTmp + "-inside"}

	tests := []struct{ name, cmd, want string }{
		{"absolute cd into the workspace", fmt.Sprintf(`cd "%s" && pwd`, ws), ws + "\n"},
		{"home is the cwd", `echo $HOME`, ws + "\n"},
		{"workspace is writable", `echo data > f.txt && cat f.txt`, "data\n"},
		{"tmp is private", fmt.Sprintf(`test -e %s && echo visible || echo hidden; echo x > %[2]s && cat %[2]s`, hostTmp, hostTmp+"-private"), "hidden\nx\n"},
		// Only the sandbox's own few processes (init, sh, ls, grep) exist.
		{"host processes are invisible", `ls /proc | grep -c '^[0-9]'`, ""},
		{"cannot write outside", "for f in " + strings.Join(outside, " ") + `; do (echo x > "$f") 2>/dev/null; done; echo done`, "done\n"},
		{"no host secrets in etc", `test -e /etc/shadow && echo shadow || echo no-shadow`, "no-shadow\n"},
		{"merged usr works", `/bin/sh -c 'echo via-bin'; /usr/bin/env | grep -c '^PATH='`, "via-bin\n1\n"},
		{"capabilities dropped", `grep '^CapEff' /proc/self/status`, "CapEff:\t0000000000000000\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, e, Request{Command: tc.cmd})
			got := string(res.Stdout)
			if tc.name == "host processes are invisible" {
				n, _ := strconv.Atoi(strings.TrimSpace(got))
				if n < 1 || n > 5 {
					t.Fatalf("sandbox sees %d processes (%q, stderr %q); host processes leak in", n, got, res.Stderr)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("got %q (stderr %q, code %d), want %q", got, res.Stderr, res.ExitCode, tc.want)
			}
		})
	}
	for _, f := range outside {
		if _, err := os.Stat(f); err == nil {
			os.Remove(f)
			t.Errorf("the sandbox created %s on the host", f)
		}
	}
	if _, err := os.Stat(hostTmp + "-private"); err == nil {
		os.Remove(hostTmp + "-private")
		t.Errorf("the sandbox's /tmp reached the host")
	}
}

func TestBwrapNoNetwork(t *testing.T) {
	e, _ := newExec(t, ModeBwrap, func(c *Config) { c.NoNetwork = true })
	res := run(t, e, Request{Command: `ls /sys/class/net 2>/dev/null | tr '\n' ' '; cat /proc/net/dev | grep -c ':'`})
	if strings.TrimSpace(string(res.Stdout)) != "1" && !strings.HasPrefix(strings.TrimSpace(string(res.Stdout)), "lo") {
		t.Fatalf("network namespace not isolated: %q", res.Stdout)
	}
}

// TestBwrapScopeBoundary: only the boundary is bound, so a scoped command
// cannot see its sibling scopes.
func TestBwrapScopeBoundary(t *testing.T) {
	e, ws := newExec(t, ModeBwrap, func(c *Config) { c.Policy.Disabled = true })
	for _, d := range []string{"users/u1", "users/u2"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(ws, "users/u2/secret"), []byte("s"), 0o644)
	res := run(t, e, Request{Command: `cat ../u2/secret 2>/dev/null || echo unseen; pwd`, Boundary: filepath.Join(ws, "users/u1")})
	if string(res.Stdout) != "unseen\n"+filepath.Join(ws, "users/u1")+"\n" {
		t.Fatalf("got %q", res.Stdout)
	}
}

// throwawayUser creates a user for the test (removed at its end) and returns
// its name. CI runs as root with useradd; elsewhere the test skips, saying why.
func throwawayUser(t *testing.T, prefix string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("run-as needs the test to run as root")
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Skip("useradd is not installed")
	}
	// A user of the name may be left from a run that was killed before its
	// cleanup (a timed-out test binary runs none): useradd's exit 9, the
	// name is taken, moves on to another.
	var name string
	for try := 0; ; try++ {
		name = fmt.Sprintf("%s%d", prefix, (os.Getpid()+try*7919)%100000)
		out, err := exec.Command("useradd", "--no-create-home", "--shell", "/bin/sh", name).CombinedOutput()
		if err == nil {
			break
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 9 || try == 9 {
			t.Fatalf("useradd %s: %v %s", name, err, out)
		}
	}
	t.Cleanup(func() { exec.Command("userdel", name).Run() })
	// The user runs the test binary (/proc/self/exe is the trampoline),
	// which go test wrote with the umask's mode.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(exe, 0o755); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestRunAs drops to a throwaway user created for the test.
func TestRunAs(t *testing.T) {
	name := throwawayUser(t, "agbt")
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	modes := []Mode{ModeSoftware, ModeLandlock}
	if _, err := exec.LookPath("bwrap"); err == nil {
		modes = append(modes, ModeBwrap)
	}
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			ws := testenv.SharedTempDir(t) // the user reaches and writes it, whatever TMPDIR is
			os.Chmod(ws, 0o777)
			e, err := New(Config{Mode: mode, WorkspaceRoot: ws, RunAs: name, Policy: PolicyConfig{Disabled: true}})
			if err != nil {
				if mode == ModeBwrap && strings.Contains(err.Error(), "user namespaces are unavailable") {
					t.Skipf("bwrap as an unprivileged user needs user namespaces: %v", err)
				}
				t.Fatal(err)
			}
			defer e.Close()
			res, err := e.Run(context.Background(), Request{Command: `id -u; echo $USER; touch mine && echo wrote; cat /etc/shadow >/dev/null 2>&1 && echo read-shadow || echo no-shadow`})
			if err != nil {
				t.Fatal(err)
			}
			want := u.Uid + "\n" + name + "\nwrote\nno-shadow\n"
			if string(res.Stdout) != want {
				t.Fatalf("got %q (stderr %q), want %q", res.Stdout, res.Stderr, want)
			}
			fi, err := os.Stat(filepath.Join(ws, "mine"))
			if err != nil {
				t.Fatal(err)
			}
			if uid := fmt.Sprint(statUID(fi)); uid != u.Uid {
				t.Fatalf("file owned by uid %s, want %s", uid, u.Uid)
			}
		})
	}
}

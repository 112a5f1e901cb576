// Package sshtest holds the tables every transport of the SSH core is
// tested with (the /ssh WebSocket and the SSH port): commands through the
// sandbox and its policy, and SFTP escapes. Each transport's tests dial
// their own client and hand it here, so a rule cannot hold on one and not
// on the other.
package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkg/sftp"

	"github.com/agentbe/agentbe-daemon/sandbox"
	gossh "golang.org/x/crypto/ssh"
)

// Exec runs the command table through c against a workspace at root:
// output, exit codes, the working directory and HOME, the client libraries'
// command forms, a signal, the safety policy's refusals and empty commands.
// mode is the daemon's effective isolation mode: bubblewrap reports a death
// by signal as an exit status only (Namespaced), and where the kernel holds
// the boundary a program read from stdin runs (KernelBoundary).
func Exec(t *testing.T, c *gossh.Client, root string, mode sandbox.Mode) {
	t.Helper()
	killSig := "KILL"
	if mode.Namespaced() {
		killSig = ""
	}
	tests := []struct {
		name, cmd, stdin string
		wantOut, wantErr string
		wantCode         int
		wantSig          string
		errContains      string
	}{
		{name: "stdout", cmd: "echo hello", wantOut: "hello\n"},
		{name: "stderr", cmd: "echo oops >&2", wantErr: "oops\n"},
		{name: "exit code", cmd: "echo partial; exit 3", wantOut: "partial\n", wantCode: 3},
		{name: "stdin until EOF", cmd: "cat; echo done", stdin: "line1\nline2\n", wantOut: "line1\nline2\ndone\n"},
		{name: "cwd is the workspace", cmd: "pwd", wantOut: root + "\n"},
		{name: "HOME is the workspace", cmd: `echo "$HOME"`, wantOut: root + "\n"},
		// The TypeScript client's prefix: its assignments apply to `cd` only
		// (a regular builtin), so they are not visible to the command.
		{name: "TypeScript client form", cmd: fmt.Sprintf(`HOME='%s' K='v w' cd "%s" && pwd`, root, root), wantOut: root + "\n"},
		{name: "Python client form", cmd: fmt.Sprintf(`cd %s && HOME=%s K=v sh -c 'echo $K'`, root, root), wantOut: "v\n"},
		{name: "killed by signal", cmd: "kill -KILL $$", wantCode: 137, wantSig: killSig},
		{name: "blocked by the safety policy", cmd: "sudo id", wantCode: 126, errContains: "Dangerous operation blocked (DANGEROUS_OPERATION): privilege-escalation: "},
		{name: "unjudgeable for the safety policy", cmd: "eval ls", wantCode: 126, errContains: "Dangerous operation blocked (UNSAFE_COMMAND): unjudgeable: "},
		{name: "empty command", cmd: "", wantCode: 126, errContains: "agentbe: empty command"},
		{name: "blank command", cmd: "  ", wantCode: 126, errContains: "agentbe: empty command"},
	}
	// A shell reading its program from the client's stdin: software mode
	// cannot judge it and says bwrap and landlock allow it; they run it.
	if !mode.KernelBoundary() {
		tests = append(tests, struct {
			name, cmd, stdin string
			wantOut, wantErr string
			wantCode         int
			wantSig          string
			errContains      string
		}{name: "program on stdin", cmd: "exec bash", stdin: "echo ran\n", wantCode: 126,
			errContains: "Dangerous operation blocked (UNSAFE_COMMAND): unjudgeable: bash reads the program it runs from stdin, which cannot be judged in software mode; pass the program as a file or with -c (bwrap and landlock isolation allow it)"})
	} else {
		tests = append(tests, struct {
			name, cmd, stdin string
			wantOut, wantErr string
			wantCode         int
			wantSig          string
			errContains      string
		}{name: "program on stdin", cmd: "exec bash", stdin: "echo ran\n", wantOut: "ran\n"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code, sig := Run(t, c, tt.cmd, tt.stdin)
			if out != tt.wantOut || code != tt.wantCode || sig != tt.wantSig {
				t.Fatalf("got out=%q code=%d sig=%q (stderr %q); want out=%q code=%d sig=%q",
					out, code, sig, errOut, tt.wantOut, tt.wantCode, tt.wantSig)
			}
			if tt.errContains != "" {
				if !strings.Contains(errOut, tt.errContains) {
					t.Fatalf("stderr %q does not contain %q", errOut, tt.errContains)
				}
			} else if errOut != tt.wantErr {
				t.Fatalf("stderr = %q, want %q", errOut, tt.wantErr)
			}
		})
	}
}

// Run runs a command on a fresh session and returns stdout, stderr and the
// exit status and signal.
func Run(t testing.TB, c *gossh.Client, cmd, stdin string) (stdout, stderr string, code int, sig string) {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var o, e strings.Builder
	s.Stdout, s.Stderr = &o, &e
	if stdin != "" {
		s.Stdin = strings.NewReader(stdin)
	}
	err = s.Run(cmd)
	var ee *gossh.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code, sig = ee.ExitStatus(), ee.Signal()
	default:
		t.Fatalf("run %q: %v", cmd, err)
	}
	return o.String(), e.String(), code, sig
}

// SFTPEscapes tries to leave the workspace at root through c with every
// SFTP operation: lexical climbs (which stay inside, the view being rooted
// at the workspace), symlinks that lead out (refused with
// PERMISSION_DENIED), a symlink created pointing out, renames across an
// outside link. It writes a secret beside root, in its parent directory,
// and checks it is never read or changed.
func SFTPEscapes(t *testing.T, c *sftp.Client, root string) {
	outside := filepath.Dir(root) // the parent of the workspace
	WriteHost(t, outside, "secret.txt", "top secret")
	WriteHost(t, root, "inside.txt", "in")
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "abs-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../secret.txt", filepath.Join(root, "rel-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "dir-out")); err != nil {
		t.Fatal(err)
	}

	// Paths that would leave the workspace lexically stay in it (the SFTP
	// view is chrooted at the root): they name files inside, which here do
	// not exist, never the file outside.
	for _, p := range []string{"../secret.txt", "/../secret.txt", "a/../../secret.txt", root + "/../secret.txt", outside + "/secret.txt"} {
		t.Run("lexical "+p, func(t *testing.T) {
			f, err := c.Open(p)
			if err == nil {
				b, _ := io.ReadAll(f)
				f.Close()
				t.Fatalf("opened %q: %q", p, b)
			}
			if FxCode(err) != FxNoSuchFile {
				t.Fatalf("open %q: %v, want NO_SUCH_FILE", p, err)
			}
		})
	}

	// Writes that try to climb land inside the workspace.
	f, err := c.Create("../../climbed.txt")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("x"))
	f.Close()
	if ReadHost(t, root, "climbed.txt") != "x" {
		t.Fatal("write did not land in the root")
	}
	if _, err := os.Stat(filepath.Join(outside, "climbed.txt")); err == nil {
		t.Fatal("write escaped the workspace")
	}

	// Symlinks leading out are refused with PERMISSION_DENIED, whatever the
	// operation.
	ops := map[string]func(p string) error{
		"open": func(p string) error {
			f, err := c.Open(p)
			if err == nil {
				f.Close()
			}
			return err
		},
		"create through": func(p string) error {
			f, err := c.OpenFile(p, os.O_WRONLY|os.O_TRUNC)
			if err == nil {
				f.Close()
			}
			return err
		},
		"stat":    func(p string) error { _, err := c.Stat(p); return err },
		"readdir": func(p string) error { _, err := c.ReadDir(p); return err },
		"chmod":   func(p string) error { return c.Chmod(p, 0o777) },
	}
	for _, link := range []string{"abs-out", "rel-out"} {
		for name, op := range ops {
			if name == "readdir" {
				continue
			}
			t.Run(name+" "+link, func(t *testing.T) {
				if err := op(link); FxCode(err) != FxPermission {
					t.Fatalf("%s %s: %v, want PERMISSION_DENIED", name, link, err)
				}
			})
		}
	}
	for name, op := range map[string]func(string) error{"readdir": ops["readdir"], "open below": func(p string) error { return ops["open"](p + "/secret.txt") }, "create below": func(p string) error {
		f, err := c.Create(p + "/new.txt")
		if err == nil {
			f.Close()
		}
		return err
	}} {
		t.Run(name+" dir-out", func(t *testing.T) {
			if err := op("dir-out"); FxCode(err) != FxPermission {
				t.Fatalf("%v, want PERMISSION_DENIED", err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(outside, "new.txt")); err == nil {
		t.Fatal("create through a symlinked directory escaped")
	}
	if got := ReadHost(t, outside, "secret.txt"); got != "top secret" {
		t.Fatalf("secret changed: %q", got)
	}
	if fi, _ := os.Stat(filepath.Join(outside, "secret.txt")); fi.Mode().Perm() != 0o644 {
		t.Fatalf("secret's mode changed: %v", fi.Mode())
	}

	t.Run("symlink creation pointing out is refused", func(t *testing.T) {
		if err := c.Symlink("../../secret.txt", "mine"); FxCode(err) != FxPermission {
			t.Fatalf("symlink ../../secret.txt: %v", err)
		}
	})
	t.Run("rename out of or into an outside link", func(t *testing.T) {
		if err := c.Rename("inside.txt", "dir-out/stolen.txt"); FxCode(err) != FxPermission {
			t.Fatalf("rename into dir-out: %v", err)
		}
		if err := c.Rename("dir-out/secret.txt", "got.txt"); FxCode(err) != FxPermission {
			t.Fatalf("rename from dir-out: %v", err)
		}
	})
	t.Run("lstat of the link itself works", func(t *testing.T) {
		if fi, err := c.Lstat("abs-out"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Fatalf("lstat: %v %v", fi, err)
		}
	})
}

// SFTP status codes, as FxCode reports them.
const (
	FxOK          = 0
	FxNoSuchFile  = 2
	FxPermission  = 3
	FxFailure     = 4
	FxUnsupported = 8
)

// FxCode returns the SFTP status of err: pkg/sftp's client turns
// NO_SUCH_FILE into fs.ErrNotExist and PERMISSION_DENIED into
// fs.ErrPermission, and leaves the others as *sftp.StatusError.
func FxCode(err error) uint32 {
	var se *sftp.StatusError
	switch {
	case err == nil:
		return FxOK
	case errors.Is(err, fs.ErrNotExist):
		return FxNoSuchFile
	case errors.Is(err, fs.ErrPermission):
		return FxPermission
	case errors.As(err, &se):
		return uint32(se.FxCode())
	}
	return 999
}

// WriteHost writes a file below root directly on the host, mode 0644.
func WriteHost(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	// 0644 whatever the umask, which WriteFile's mode passes through.
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ReadHost reads a file below root directly on the host.
func ReadHost(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// HostKey is a fresh ed25519 key, as a server's host key (or a client's
// key) in a test.
func HostKey(t testing.TB) gossh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestTokensFileErrors runs a --tokens file with a mistake through the
// binary, as --check-config and as a start: one line naming the file, the
// entry and the key, and the key meant where one is near.
func TestTokensFileErrors(t *testing.T) {
	root, dir := t.TempDir(), t.TempDir()
	sum := sha256.Sum256([]byte("ci-token"))
	digest := hex.EncodeToString(sum[:])
	file := filepath.Join(dir, "tokens.json")
	for _, tc := range []struct{ body, want string }{
		{`{"tokens":[{"name":"alice","sha256":"` + strings.Repeat("ab", 32) + `"},{"name":"ci","sha256":"` + digest + `","scop":"ci"}]}`,
			`--tokens ` + file + `: tokens[1] ("ci"): unknown key "scop"; did you mean "scope"?`},
		{`{"tokens":[{"name":"ci","sha256":"` + digest + `","read_only":true}]}`,
			`--tokens ` + file + `: tokens[0] ("ci"): unknown key "read_only"; did you mean "readOnly"?`},
		{`{"token":[]}`, `--tokens ` + file + `: unknown key "token" at the top level; did you mean "tokens"?`},
	} {
		if err := os.WriteFile(file, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := run(t, nil, "daemon", "--root", root, "--tokens", file, "--check-config")
		if want := "agent-backend: invalid configuration: " + tc.want + "\n"; code != 1 || errOut != want {
			t.Errorf("--check-config: exit %d, stderr %q\nwant exit 1 and %q", code, errOut, want)
		}
		_, errOut, code = run(t, nil, "daemon", "--root", root, "--tokens", file, "--port", fmt.Sprint(freePort(t)))
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("start: exit %d, stderr %q\nwant exit 1 and a line containing %q", code, errOut, tc.want)
		}
	}
}

// TestPortInUse: a daemon that cannot bind --port or --ssh-listen prints
// one line naming the flag, the address and why, and exits 1 before any
// start-up log line (it binds before it logs or starts a provider).
func TestPortInUse(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	busy := strconv.Itoa(held.Addr().(*net.TCPAddr).Port)
	free := strconv.Itoa(freePort(t))
	hash := filepath.Join(t.TempDir(), "hash")
	if err := os.WriteFile(hash, []byte("$2a$10$abcdefghijklmnopqrstuu0123456789012345678901234567890\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--port", busy}, "--port " + busy + ": 127.0.0.1:" + busy + " is in use: another process listens there; stop it or choose another port"},
		{[]string{"--port", free, "--ssh-listen", "127.0.0.1:" + busy, "--ssh-password-hash-file", hash},
			"--ssh-listen: 127.0.0.1:" + busy + " is in use: another process listens there; stop it or choose another port"},
		{[]string{"--port", free, "--ssh-listen", "127.0.0.1:" + free, "--ssh-password-hash-file", hash},
			"--ssh-listen: 127.0.0.1:" + free + " is in use by this daemon's own --port " + free + " (HTTP); give the SSH port another"},
	} {
		args := append([]string{"daemon", "--root", root, "--isolation", "software"}, tc.args...)
		out, errOut, code := run(t, nil, args...)
		if want := "agent-backend: " + tc.want + "\n"; code != 1 || out != "" || errOut != want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q\nwant exit 1 and only %q", tc.args, code, out, errOut, want)
		}
	}
}

// TestPrivilegedPort: binding a port below 1024 without the privilege is
// one line saying what it needs. As root the daemon runs as nobody.
func TestPrivilegedPort(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start"); err == nil {
		if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n <= 80 {
			t.Skipf("net.ipv4.ip_unprivileged_port_start is %d: every user may bind port 80 here", n)
		}
	}
	// A root and HOME the user nobody can reach (the binary lies beside them).
	// It is under /tmp, not TMPDIR, which may be searchable by its owner only.
	dir := testenv.SharedTempDir(t)
	bin := binary
	if os.Geteuid() == 0 {
		// The test binary's folder is root's alone: nobody runs a copy.
		b, err := os.ReadFile(binary)
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(dir, "agent-backend")
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(bin, 0o755); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "daemon", "--root", ws, "--isolation", "software", "--port", "80")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatal(err)
	}
	want := "agent-backend: --port 80: 127.0.0.1:80 needs root or CAP_NET_BIND_SERVICE (a port below 1024); choose a port from 1024 up, or grant the capability (setcap cap_net_bind_service=+ep, or AmbientCapabilities= in a systemd unit)\n"
	if code != 1 || out.String() != "" || errb.String() != want {
		t.Errorf("exit %d, stdout %q, stderr %q\nwant exit 1 and only %q", code, out.String(), errb.String(), want)
	}
}

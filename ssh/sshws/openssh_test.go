package sshws

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/internal/scptest"
	"github.com/agentbe/agentbe-daemon/internal/testbin"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/ssh/wsclient"
)

// The tests in this file drive OpenSSH's own ssh and sftp binaries through
// the real `agent-backend proxy` command (built once by internal/testbin, as the release is) against
// our server: no sshd anywhere. CI installs openssh-client.

func requireTool(t *testing.T, name string) string {
	t.Helper()
	p := testenv.Command(t, "openssh-client", name)
	return p
}

// sshArgs are the options every OpenSSH invocation gets: no config files,
// no host key checks (the clients don't pin ours), our proxy.
func sshArgs(t *testing.T, e *env, token string) []string {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	proxy := fmt.Sprintf("%s proxy %s --token-file %s", testbin.Path(t), e.url, tokenFile)
	return []string{
		"-F", "/dev/null",
		"-o", "ProxyCommand=" + proxy,
		"-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes",
		"-o", "LogLevel=ERROR",
	}
}

func TestOpenSSHThroughProxy(t *testing.T) {
	sshBin := requireTool(t, "ssh")
	sftpBin := requireTool(t, "sftp")
	e := newEnv(t, withToken("tok"))
	args := sshArgs(t, e, "tok")

	t.Run("ssh runs a command", func(t *testing.T) {
		cmd := exec.Command(sshBin, append(args, "agent@workspace", "echo hello from $(pwd); echo err >&2; exit 7")...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 7 {
			t.Fatalf("ssh: %v (stderr %q)", err, errb.String())
		}
		if out.String() != "hello from "+e.root+"\n" || !strings.Contains(errb.String(), "err") {
			t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
		}
	})

	t.Run("ssh passes stdin", func(t *testing.T) {
		cmd := exec.Command(sshBin, append(args, "agent@workspace", "wc -c")...)
		cmd.Stdin = strings.NewReader(strings.Repeat("x", 100000))
		out, err := cmd.Output()
		if err != nil || strings.TrimSpace(string(out)) != "100000" {
			t.Fatalf("wc -c: %q %v", out, err)
		}
	})

	t.Run("sftp puts and gets a file", func(t *testing.T) {
		local := t.TempDir()
		data := make([]byte, 3<<20)
		rand.Read(data)
		if err := os.WriteFile(filepath.Join(local, "up.bin"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		batch := filepath.Join(local, "batch")
		os.WriteFile(batch, []byte(strings.Join([]string{
			"mkdir remote",
			"cd remote",
			"put " + filepath.Join(local, "up.bin"),
			"rename up.bin up2.bin",
			"ls -l",
			"get up2.bin " + filepath.Join(local, "down.bin"),
			"df",
			"pwd",
		}, "\n")+"\n"), 0o644)
		cmd := exec.Command(sftpBin, append(args, "-b", batch, "agent@workspace")...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("sftp: %v\n%s", err, out)
		}
		host, err := os.ReadFile(filepath.Join(e.root, "remote", "up2.bin"))
		if err != nil || !bytes.Equal(host, data) {
			t.Fatalf("uploaded file wrong: %v", err)
		}
		down, err := os.ReadFile(filepath.Join(local, "down.bin"))
		if err != nil || !bytes.Equal(down, data) {
			t.Fatalf("downloaded file wrong: %v", err)
		}
		if !strings.Contains(string(out), "Remote working directory: /remote") {
			t.Fatalf("sftp pwd: %s", out)
		}
	})

	t.Run("scp copies both ways", func(t *testing.T) {
		scpBin := requireTool(t, "scp") // OpenSSH 9 scp speaks SFTP
		local := t.TempDir()
		os.WriteFile(filepath.Join(local, "a.txt"), []byte("scp me"), 0o644)
		up := exec.Command(scpBin, append(args, filepath.Join(local, "a.txt"), "agent@workspace:/scp/a.txt")...)
		if out, err := up.CombinedOutput(); err != nil {
			t.Fatalf("scp up: %v\n%s", err, out)
		}
		if got, _ := os.ReadFile(filepath.Join(e.root, "scp", "a.txt")); string(got) != "scp me" {
			t.Fatalf("remote has %q", got)
		}
		down := exec.Command(scpBin, append(args, "agent@workspace:scp/a.txt", filepath.Join(local, "b.txt"))...)
		if out, err := down.CombinedOutput(); err != nil {
			t.Fatalf("scp down: %v\n%s", err, out)
		}
		if got, _ := os.ReadFile(filepath.Join(local, "b.txt")); string(got) != "scp me" {
			t.Fatalf("local has %q", got)
		}
	})

	t.Run("scp -O speaks the legacy protocol", func(t *testing.T) {
		scptest.Legacy(t, requireTool(t, "scp"), args, "agent@workspace", e.root)
	})

	t.Run("wrong token fails with a clear message", func(t *testing.T) {
		bad := sshArgs(t, e, "wrong")
		cmd := exec.Command(sshBin, append(bad, "agent@workspace", "true")...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "4001") {
			t.Fatalf("ssh with a wrong token: %v\n%s", err, out)
		}
	})
}

// TestProxy drives wsclient.Proxy in-process with x/crypto/ssh on the other
// side of a pipe, covering what the CLI does without OpenSSH.
func TestProxy(t *testing.T) {
	e := newEnv(t, withToken("tok"))
	t.Run("bridges a session", func(t *testing.T) {
		a, b := net.Pipe()
		errc := make(chan error, 1)
		go func() { errc <- wsclient.Proxy(context.Background(), e.url, "tok", a, a) }()
		cc, chans, reqs, err := gossh.NewClientConn(b, "proxy", &gossh.ClientConfig{
			User: "agent", HostKeyCallback: gossh.InsecureIgnoreHostKey(),
		})
		if err != nil {
			t.Fatal(err)
		}
		client := gossh.NewClient(cc, chans, reqs)
		out, _, code, _ := run(t, client, "echo via proxy", "")
		if out != "via proxy\n" || code != 0 {
			t.Fatalf("%q %d", out, code)
		}
		client.Close() // closes b: the proxy's stdin ends
		if err := <-errc; err != nil {
			t.Fatalf("Proxy: %v", err)
		}
		a.Close()
	})
	t.Run("wrong token is wsclient.ErrUnauthorized", func(t *testing.T) {
		r, w := io.Pipe()
		defer w.Close()
		err := wsclient.Proxy(context.Background(), e.url, "nope", r, io.Discard)
		if !errors.Is(err, wsclient.ErrUnauthorized) {
			t.Fatalf("Proxy = %v", err)
		}
	})
	t.Run("bad URL", func(t *testing.T) {
		if err := wsclient.Proxy(context.Background(), "gopher://x", "", strings.NewReader(""), io.Discard); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("cancelled context ends it", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		r, w := io.Pipe()
		defer w.Close()
		errc := make(chan error, 1)
		go func() { errc <- wsclient.Proxy(ctx, e.url, "tok", r, io.Discard) }()
		cancel()
		<-errc
	})
}

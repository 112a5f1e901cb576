package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testca"
)

// TestProxyTrustsCAFile: `agent-backend proxy` reaches a daemon serving
// TLS with a certificate of a private CA (--tls-cert, --tls-key) when --ca
// names that CA: the daemon's SSH banner comes out on stdout, and closing
// stdin ends the proxy with 0. Without --ca the proxy fails naming the
// certificate and the flag; with another CA it fails too; a --ca file that
// is missing, a directory or holds no certificate is refused naming the
// flag, the file and what is wrong.
func TestProxyTrustsCAFile(t *testing.T) {
	caFile, certFile, keyFile := testca.Files(t)
	p := startDaemon(t, "--rootDir", t.TempDir(), "--auth-token", "T", "--tls-cert", certFile, "--tls-key", keyFile)
	url := "wss://" + strings.TrimPrefix(p.url, "http://") + "/ssh"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("T\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("with --ca", func(t *testing.T) {
		cmd := exec.Command(binary, "proxy", url, "--token-file", tokenFile, "--ca", caFile)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		banner, err := bufio.NewReader(stdout).ReadString('\n')
		stdin.Close()
		werr := cmd.Wait()
		if err != nil || !strings.HasPrefix(banner, "SSH-2.0-") {
			t.Fatalf("through the proxy: %q, %v; want the daemon's SSH banner (proxy: %v, %q)", banner, err, werr, stderr.String())
		}
		if werr != nil {
			t.Errorf("the proxy after stdin closed: %v, %q; want exit 0", werr, stderr.String())
		}
	})

	t.Run("without --ca", func(t *testing.T) {
		out, errOut, code := run(t, nil, "proxy", url, "--token-file", tokenFile)
		if code != 1 || out != "" || !strings.Contains(errOut, "certificate") || !strings.Contains(errOut, "--ca FILE names the CA that signed it") {
			t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 naming the certificate and --ca FILE", code, out, errOut)
		}
	})

	t.Run("another CA", func(t *testing.T) {
		other, _, _ := testca.Files(t)
		out, errOut, code := run(t, nil, "proxy", url, "--token-file", tokenFile, "--ca", other)
		if code != 1 || out != "" || !strings.Contains(errOut, "certificate signed by unknown authority") {
			t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 naming the unknown authority", code, out, errOut)
		}
	})

	dir := t.TempDir()
	missing := filepath.Join(dir, "none.pem")
	for _, tc := range []struct{ name, file, want string }{
		{"missing", missing, "agent-backend: --ca " + missing + ": no such file\n"},
		{"a directory", dir, "agent-backend: --ca " + dir + ": cannot read: not a regular file (a directory)\n"},
		{"the key, not a certificate", keyFile, "agent-backend: --ca " + keyFile + ": no PEM certificate in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(t, nil, "proxy", url, "--token-file", tokenFile, "--ca", tc.file)
			if code != 1 || out != "" || !strings.HasPrefix(errOut, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errOut, tc.want)
			}
		})
	}
}

// TestProxyTokenFile: --token-file is read when the proxy starts (one
// proxy per SSH connection, so each connection reads the token in force),
// its whitespace trimmed; an empty file is refused naming it rather than
// sent as no token, which the daemon would answer with 4001.
func TestProxyTokenFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	for _, tc := range []struct {
		content, want, err string
	}{
		{"first\n", "first", ""},
		{"  second \n", "second", ""},
		{" \n", "", "--token-file " + file + ": the file is empty"},
	} {
		if err := os.WriteFile(file, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := proxyToken("", file)
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && err.Error() != tc.err) {
			t.Errorf("a file holding %q: %q, %v; want %q, %q", tc.content, got, err, tc.want, tc.err)
		}
	}
}

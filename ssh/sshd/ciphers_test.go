package sshd

import (
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestServerCiphers: the server does not offer chacha20-poly1305 (x/crypto
// runs it without assembly on amd64; see serverCiphers), so a client that
// allows only it is refused at the key exchange, one that lists it first
// gets its next choice, and OpenSSH's ssh with its default preferences
// negotiates an AES cipher in both directions.
func TestServerCiphers(t *testing.T) {
	if slices.Contains(serverCiphers(), gossh.CipherChaCha20Poly1305) || !slices.Contains(serverCiphers(), gossh.CipherAES128GCM) {
		t.Fatalf("serverCiphers() = %v: want AES-GCM and no chacha20-poly1305", serverCiphers())
	}
	e := newEnv(t)

	only := clientConfig()
	only.Ciphers = []string{gossh.CipherChaCha20Poly1305}
	if c, err := gossh.Dial("tcp", e.addr, only); err == nil {
		c.Close()
		t.Error("a client that allows only chacha20-poly1305 logged in")
	} else if !strings.Contains(err.Error(), "no common algorithm") {
		t.Errorf("chacha20-poly1305 only: %v, want no common algorithm", err)
	}

	first := clientConfig()
	first.Ciphers = []string{gossh.CipherChaCha20Poly1305, gossh.CipherAES128CTR}
	c, err := gossh.Dial("tcp", e.addr, first)
	if err != nil {
		t.Fatalf("chacha20-poly1305, then aes128-ctr: %v", err)
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if out, err := sess.Output("echo ok"); err != nil || string(out) != "ok\n" {
		t.Errorf("exec over aes128-ctr: %q, %v", out, err)
	}

	ssh := testenv.Command(t, "openssh-client", "ssh")
	host, port, _ := strings.Cut(e.addr, ":")
	out, err := exec.Command(ssh, "-F", "/dev/null", "-v", "-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-p", port, "agent@"+host, "true").CombinedOutput()
	if err != nil {
		t.Fatalf("ssh true: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`kex: (server->client|client->server) cipher: (\S+)`).FindAllSubmatch(out, -1)
	if len(m) != 2 {
		t.Fatalf("ssh -v names %d ciphers, want 2:\n%s", len(m), out)
	}
	for _, c := range m {
		if name := string(c[2]); !strings.HasPrefix(name, "aes") || !slices.Contains(serverCiphers(), name) {
			t.Errorf("OpenSSH's ssh negotiated %s %s, want one of %v", c[1], name, serverCiphers())
		}
	}
}

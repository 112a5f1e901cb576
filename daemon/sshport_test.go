package daemon

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/bcrypt"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/internal/scptest"
	"github.com/agentbe/agentbe-daemon/internal/sshtest"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// clientKey makes an ed25519 key pair: the private key file for OpenSSH and
// the authorized_keys line.
func clientKey(t *testing.T, dir, name string) (keyFile, authLine string, signer gossh.Signer) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := gossh.MarshalPrivateKey(priv, name)
	if err != nil {
		t.Fatal(err)
	}
	keyFile = filepath.Join(dir, name)
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err = gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return keyFile, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(signer.PublicKey()))) + " " + name, signer
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// sshCmd runs OpenSSH's ssh against the port.
func sshCmd(t *testing.T, addr, key string, args ...string) (string, error) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	base := []string{"-F", "/dev/null", "-i", key, "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-p", port}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", append(append(base, "agent@"+host), args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestSSHPortWithOpenSSH: OpenSSH's ssh and sftp against --ssh-listen with
// key authentication: exec, the sandbox policy, SFTP, a wrong key, from=,
// no-pty, and a key revoked by editing authorized_keys.
func TestSSHPortWithOpenSSH(t *testing.T) {
	for _, tool := range []string{"ssh", "sftp"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s (openssh-client) is needed: %v", tool, err)
		}
	}
	dir := t.TempDir()
	key, line, signer := clientKey(t, dir, "good")
	otherKey, _, _ := clientKey(t, dir, "other")
	farKey, farLine, _ := clientKey(t, dir, "far")
	ptyKey, ptyLine, _ := clientKey(t, dir, "nopty")
	authz := filepath.Join(dir, "authorized_keys")
	write := func(content string) {
		if err := os.WriteFile(authz, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(line + "\n" + `from="10.0.0.0/8" ` + farLine + "\n" + "restrict " + ptyLine + "\n")
	c := testConfig(t)
	c.SSHListen = freeAddr(t)
	c.SSHAuthorizedKeys = authz
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	waitFor(t, "the SSH port", func() bool { return r.d.SSHAddr() != "" })
	addr := r.d.SSHAddr()

	if out, err := sshCmd(t, addr, key, "echo hello; pwd"); err != nil || out != "hello\n"+c.Root+"\n" {
		t.Errorf("exec: %q %v", out, err)
	}
	if out, err := sshCmd(t, addr, key, "sudo id"); err == nil || !strings.Contains(out, "privilege-escalation") {
		t.Errorf("the policy over the SSH port: %q %v", out, err)
	}
	if out, err := sshCmd(t, addr, key, "cat ../../etc/hostname"); err == nil {
		t.Errorf("an escape over the SSH port ran: %q", out)
	}
	if out, err := sshCmd(t, addr, otherKey, "true"); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("an unknown key: %q %v", out, err)
	}
	if out, err := sshCmd(t, addr, farKey, "true"); err == nil {
		t.Errorf("a key limited by from= logged in from 127.0.0.1: %q", out)
	}
	if out, err := sshCmd(t, addr, ptyKey, "-tt", "tty"); !strings.Contains(out, "not a tty") && !strings.Contains(out, "PTY allocation request failed") {
		t.Errorf("restrict (no-pty): %q %v", out, err)
	}
	// SFTP: put then get.
	if err := os.WriteFile(filepath.Join(dir, "up.txt"), []byte("uploaded"), 0o644); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addr)
	batch := fmt.Sprintf("put %s/up.txt remote.txt\nget remote.txt %s/down.txt\n", dir, dir)
	cmd := exec.Command("sftp", "-F", "/dev/null", "-i", key, "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-P", port, "-b", "-", "agent@"+host)
	cmd.Stdin = strings.NewReader(batch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sftp: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(c.Root, "remote.txt")); string(b) != "uploaded" {
		t.Errorf("sftp put: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "down.txt")); string(b) != "uploaded" {
		t.Errorf("sftp get: %q", b)
	}
	// scp in its default (SFTP) mode.
	scp := exec.Command("scp", "-F", "/dev/null", "-i", key, "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-P", port, filepath.Join(dir, "up.txt"), "agent@"+host+":scp.txt")
	if out, err := scp.CombinedOutput(); err != nil {
		t.Errorf("scp: %v\n%s", err, out)
	} else if b, _ := os.ReadFile(filepath.Join(c.Root, "scp.txt")); string(b) != "uploaded" {
		t.Errorf("scp: %q", b)
	}
	// The command and SFTP escape tables every transport of the SSH core
	// is held to, through a Go client on the port.
	t.Run("the /ssh tables", func(t *testing.T) {
		client, err := gossh.Dial("tcp", addr, &gossh.ClientConfig{User: "agent", Auth: []gossh.AuthMethod{gossh.PublicKeys(signer)},
			HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		sshtest.Exec(t, client, c.Root, sandbox.ModeSoftware) // testConfig's isolation
		sc, err := sftp.NewClient(client)
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		sshtest.SFTPEscapes(t, sc, c.Root)
	})
	// scp's legacy protocol (-O), served by package scpd.
	t.Run("scp -O", func(t *testing.T) {
		scptest.Legacy(t, "scp", []string{"-F", "/dev/null", "-i", key, "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
			"-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-P", port}, "agent@"+host, c.Root)
	})
	// Revoke the key by editing the file: the next login is refused.
	write(ptyLine + "\n")
	future := time.Now().Add(2 * time.Second)
	os.Chtimes(authz, future, future)
	if out, err := sshCmd(t, addr, key, "true"); err == nil {
		t.Errorf("a revoked key logged in: %q", out)
	}
	_, m := get(t, r.url+"/metrics")
	if !bytes.Contains(m, []byte(`agentbe_ssh_auth_attempts_total{method="publickey",outcome="accepted"}`)) ||
		!bytes.Contains(m, []byte(`agentbe_ssh_auth_attempts_total{method="publickey",outcome="refused"}`)) {
		t.Errorf("/metrics lacks the SSH auth counters")
	}
}

// TestSSHPortAttemptsAndGrace: wrong passwords are refused, each failure
// makes the next attempt from the address wait longer, --ssh-max-auth-tries
// cuts the connection, and --ssh-login-grace-time cuts one that never logs
// in.
func TestSSHPortAttemptsAndGrace(t *testing.T) {
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("right"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	hf := filepath.Join(dir, "hash")
	os.WriteFile(hf, hash, 0o600)
	c := testConfig(t)
	c.SSHListen = freeAddr(t)
	c.SSHPasswordHashFile = hf
	c.SSHMaxAuthTries = 2
	c.SSHLoginGraceTime = 3 * time.Second // above the 1 s delay checked below
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	waitFor(t, "the SSH port", func() bool { return r.d.SSHAddr() != "" })
	addr := r.d.SSHAddr()
	dial := func(pw string, tries int) (time.Duration, error) {
		begin := time.Now()
		conn, err := gossh.Dial("tcp", addr, &gossh.ClientConfig{
			User:            "agent",
			Auth:            []gossh.AuthMethod{gossh.RetryableAuthMethod(gossh.Password(pw), tries)},
			HostKeyCallback: gossh.InsecureIgnoreHostKey(),
			Timeout:         30 * time.Second,
		})
		if err == nil {
			conn.Close()
		}
		return time.Since(begin), err
	}
	if _, err := dial("right", 1); err != nil {
		t.Fatalf("the right password: %v", err)
	}
	// Three wrong passwords on one connection: cut after the second.
	if _, err := dial("wrong", 3); err == nil {
		t.Fatalf("wrong passwords: %v", err)
	}
	_, m := get(t, r.url+"/metrics")
	if !bytes.Contains(m, []byte(`agentbe_ssh_auth_attempts_total{method="password",outcome="refused"} 2`)) {
		t.Fatalf("refused password attempts, want 2 (the cap):\n%s", grepLines(m, "agentbe_ssh_auth_attempts_total"))
	}
	// The next failure from this address waits for the third delay
	// (250 ms doubled twice); a deliberate floor, not a speed measurement.
	if took, err := dial("wrong", 1); err == nil || took < time.Second {
		t.Fatalf("the third failure took %v (%v), want at least 1s", took, err)
	}
	// A connection that sends nothing after the banner is cut at the grace time.
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, raw); err != nil {
		t.Fatalf("an idle unauthenticated connection was not closed: %v", err)
	}
}

func grepLines(b []byte, sub string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestSSHPortWithCertificate: OpenSSH's ssh logs in with a user certificate
// signed by a CA of --ssh-trusted-user-ca-keys, as a principal it names; a
// user it does not name is refused, and without permit-pty there is no pty.
func TestSSHPortWithCertificate(t *testing.T) {
	dir := t.TempDir()
	_, caPriv, _ := ed25519.GenerateKey(rand.Reader)
	ca, _ := gossh.NewSignerFromKey(caPriv)
	caFile := filepath.Join(dir, "ca.pub")
	os.WriteFile(caFile, gossh.MarshalAuthorizedKey(ca.PublicKey()), 0o644)
	certFor := func(name string, ext map[string]string) string {
		key, _, signer := clientKey(t, dir, name)
		cert := &gossh.Certificate{Key: signer.PublicKey(), Serial: 1, CertType: gossh.UserCert, KeyId: name,
			ValidPrincipals: []string{"agent"}, ValidAfter: uint64(time.Now().Add(-time.Hour).Unix()),
			ValidBefore: uint64(time.Now().Add(time.Hour).Unix()), Permissions: gossh.Permissions{Extensions: ext}}
		if err := cert.SignCert(rand.Reader, ca); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(key+"-cert.pub", gossh.MarshalAuthorizedKey(cert), 0o644)
		return key
	}
	withPty := certFor("withpty", map[string]string{"permit-pty": ""})
	noPty := certFor("nopty", nil)
	c := testConfig(t)
	c.SSHListen = freeAddr(t)
	c.SSHTrustedUserCAKeys = caFile
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	waitFor(t, "the SSH port", func() bool { return r.d.SSHAddr() != "" })
	addr := r.d.SSHAddr()
	certArgs := func(key string) []string { return []string{"-o", "CertificateFile=" + key + "-cert.pub"} }

	if out, err := sshCmd(t, addr, withPty, append(certArgs(withPty), "echo cert-ok")...); err != nil || out != "cert-ok\n" {
		t.Fatalf("a certificate login: %q %v", out, err)
	}
	if out, err := sshCmd(t, addr, withPty, append(certArgs(withPty), "-tt", "tty")...); err != nil || !strings.Contains(out, "/dev/pts/") {
		t.Errorf("permit-pty: %q %v", out, err)
	}
	if out, err := sshCmd(t, addr, noPty, append(certArgs(noPty), "-tt", "tty")...); !strings.Contains(out, "not a tty") && !strings.Contains(out, "PTY allocation request failed") {
		t.Errorf("a certificate without permit-pty got a pty: %q %v", out, err)
	}
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("ssh", append([]string{"-F", "/dev/null", "-i", withPty, "-o", "CertificateFile=" + withPty + "-cert.pub", "-o", "IdentitiesOnly=yes",
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-p", port}, "root@"+host, "true")...)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "Permission denied") {
		t.Errorf("a user the certificate does not name: %q %v", out, err)
	}
}

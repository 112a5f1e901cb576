package daemon

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
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
	"github.com/agentbe/agentbe-daemon/internal/testenv"
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
	testenv.Command(t, "openssh-client", "ssh")
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
	for _, tool := range []string{"ssh", "sftp", "scp"} {
		testenv.Command(t, "openssh-client", tool)
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

// TestSSHPortAuthFailsClosed: on the SSH port, with real x/crypto clients,
// a certificate logs in only under a login name it names and
// --ssh-cert-principals lists (one with no principals never), and a key or
// CA file that stops loading (deleted, emptied, an unsupported option)
// admits nothing from then on, says why in /health's sshAuth, and admits
// again once repaired.
func TestSSHPortAuthFailsClosed(t *testing.T) {
	dir := t.TempDir()
	_, line, keySigner := clientKey(t, dir, "key")
	_, _, certSigner := clientKey(t, dir, "certkey")
	_, caPriv, _ := ed25519.GenerateKey(rand.Reader)
	ca, _ := gossh.NewSignerFromKey(caPriv)
	authz, caFile := filepath.Join(dir, "authorized_keys"), filepath.Join(dir, "ca.pub")
	caLine := gossh.MarshalAuthorizedKey(ca.PublicKey())
	os.WriteFile(authz, []byte(line+"\n"), 0o600)
	os.WriteFile(caFile, caLine, 0o644)
	cert := func(principals ...string) gossh.Signer {
		c := &gossh.Certificate{Key: certSigner.PublicKey(), Serial: 1, CertType: gossh.UserCert, KeyId: "t",
			ValidPrincipals: principals, ValidAfter: uint64(time.Now().Add(-time.Hour).Unix()),
			ValidBefore: uint64(time.Now().Add(time.Hour).Unix())}
		if err := c.SignCert(rand.Reader, ca); err != nil {
			t.Fatal(err)
		}
		s, err := gossh.NewCertSigner(c, certSigner)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	c := testConfig(t)
	c.SSHListen = freeAddr(t)
	c.SSHAuthorizedKeys = authz
	c.SSHTrustedUserCAKeys = caFile
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	waitFor(t, "the SSH port", func() bool { return r.d.SSHAddr() != "" })
	login := func(user string, s gossh.Signer) error {
		conn, err := gossh.Dial("tcp", r.d.SSHAddr(), &gossh.ClientConfig{User: user, Auth: []gossh.AuthMethod{gossh.PublicKeys(s)},
			HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 30 * time.Second})
		if err == nil {
			conn.Close()
		}
		return err
	}
	sshAuthError := func() string {
		_, body := get(t, r.url+"/health")
		var h struct {
			SSHAuth *struct {
				Error string
				Files []struct{ Flag, File, Error string }
			} `json:"sshAuth"`
		}
		if err := json.Unmarshal(body, &h); err != nil || h.SSHAuth == nil || len(h.SSHAuth.Files) != 2 {
			t.Fatalf("/health has no sshAuth with the two files: %s (%v)", body, err)
		}
		return h.SSHAuth.Error
	}

	if err := login("agent", keySigner); err != nil {
		t.Fatalf("the key: %v", err)
	}
	if err := login("agent", cert("agent")); err != nil {
		t.Fatalf("a certificate for agent: %v", err)
	}
	if e := sshAuthError(); e != "" {
		t.Fatalf("sshAuth error with good files: %q", e)
	}
	for name, tc := range map[string]struct {
		user string
		s    gossh.Signer
	}{
		"no principals":               {"agent", cert()},
		"no principals, another name": {"anyone", cert()},
		"a principal, not the login":  {"agent", cert("alice")},
		"a name not listed":           {"alice", cert("alice")},
		"the CA's own key":            {"agent", ca},
	} {
		if err := login(tc.user, tc.s); err == nil {
			t.Errorf("%s: logged in as %q", name, tc.user)
		}
		login("agent", keySigner) // a success resets the address's failure delay
	}

	// authorized_keys deleted: the key is refused at its next login.
	os.Remove(authz)
	if err := login("agent", keySigner); err == nil {
		t.Error("the key of a deleted authorized_keys logged in")
	}
	if e := sshAuthError(); !strings.Contains(e, "--ssh-authorized-keys") || !strings.Contains(e, "no such file") {
		t.Errorf("sshAuth error after deleting authorized_keys: %q", e)
	}
	if err := login("agent", cert("agent")); err != nil {
		t.Errorf("the CA file did not change, yet: %v", err)
	}
	// An unsupported option on one line fails the whole file, by name.
	os.WriteFile(authz, []byte(line+"\ncommand=\"true\" "+line+"\n"), 0o600)
	if err := login("agent", keySigner); err == nil {
		t.Error("a key of an authorized_keys with command= logged in")
	}
	if e := sshAuthError(); !strings.Contains(e, authz+`:2: option "command=\"true\"" is not supported here`) {
		t.Errorf("sshAuth error for command=: %q", e)
	}
	// The CA file emptied, then on SIGHUP (Reload).
	os.WriteFile(caFile, nil, 0o644)
	if err := r.d.ReloadSSHKeys(); err == nil || !strings.Contains(err.Error(), "no CA key in the file") {
		t.Errorf("SIGHUP with an empty CA file: %v", err)
	}
	if err := login("agent", cert("agent")); err == nil {
		t.Error("a certificate of an emptied CA file logged in")
	}
	if e := sshAuthError(); !strings.Contains(e, "--ssh-trusted-user-ca-keys") || !strings.Contains(e, "no CA key in the file") {
		t.Errorf("sshAuth error after emptying the CA file: %q", e)
	}
	// Repaired: both admit again and /health is clear.
	os.WriteFile(authz, []byte(line+"\n"), 0o600)
	os.WriteFile(caFile, caLine, 0o644)
	if err := login("agent", keySigner); err != nil {
		t.Errorf("the key after the repair: %v", err)
	}
	if err := login("agent", cert("agent")); err != nil {
		t.Errorf("a certificate after the repair: %v", err)
	}
	if e := sshAuthError(); e != "" {
		t.Errorf("sshAuth error after the repair: %q", e)
	}
}

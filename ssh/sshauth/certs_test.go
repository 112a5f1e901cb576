package sshauth

import (
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

func newSigner(t *testing.T) gossh.Signer {
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

// userCert signs a user certificate for key with ca; edit changes it
// before signing.
func userCert(t *testing.T, ca gossh.Signer, key gossh.PublicKey, edit func(*gossh.Certificate)) *gossh.Certificate {
	t.Helper()
	c := &gossh.Certificate{
		Key: key, Serial: 7, CertType: gossh.UserCert, KeyId: "alice@laptop",
		ValidPrincipals: []string{"agent"},
		ValidAfter:      uint64(time.Now().Add(-time.Hour).Unix()),
		ValidBefore:     uint64(time.Now().Add(time.Hour).Unix()),
		Permissions:     gossh.Permissions{Extensions: map[string]string{"permit-pty": ""}},
	}
	if edit != nil {
		edit(c)
	}
	if err := c.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTrustedUserCAKeys(t *testing.T) {
	ca, other := newSigner(t), newSigner(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pub")
	os.WriteFile(caFile, gossh.MarshalAuthorizedKey(ca.PublicKey()), 0o644)
	a, err := New(Options{TrustedUserCAKeys: caFile, sleep: func(time.Duration) {}})
	if err != nil {
		t.Fatal(err)
	}
	key := newKey(t)

	p, err := a.PublicKey(from("127.0.0.1"), userCert(t, ca, key, nil))
	if _, noFwd := p.Extensions[ExtNoPortForwarding]; err != nil || p.Extensions[ExtNoPty] != "" || p.Extensions["cert-id"] != "alice@laptop" || !noFwd {
		t.Fatalf("a valid certificate (permit-pty only): %+v, %v", p, err)
	}
	if p, err := a.PublicKey(from("127.0.0.1"), userCert(t, ca, key, func(c *gossh.Certificate) { c.Extensions = nil })); err != nil || p.Extensions[ExtNoPty] == "" {
		t.Fatalf("a certificate without permit-pty must get no pty: %+v, %v", p, err)
	}
	withFwd := userCert(t, ca, key, func(c *gossh.Certificate) { c.Extensions["permit-port-forwarding"] = "" })
	if p, err := a.PublicKey(from("127.0.0.1"), withFwd); err != nil || p.Extensions[ExtNoPortForwarding] != "" {
		t.Fatalf("a certificate with permit-port-forwarding may forward: %+v, %v", p, err)
	}
	refused := map[string]*gossh.Certificate{
		"signed by another CA":  userCert(t, other, key, nil),
		"another principal":     userCert(t, ca, key, func(c *gossh.Certificate) { c.ValidPrincipals = []string{"root"} }),
		"expired":               userCert(t, ca, key, func(c *gossh.Certificate) { c.ValidBefore = uint64(time.Now().Add(-time.Minute).Unix()) }),
		"not yet valid":         userCert(t, ca, key, func(c *gossh.Certificate) { c.ValidAfter = uint64(time.Now().Add(time.Hour).Unix()) }),
		"a host certificate":    userCert(t, ca, key, func(c *gossh.Certificate) { c.CertType = gossh.HostCert }),
		"force-command":         userCert(t, ca, key, func(c *gossh.Certificate) { c.CriticalOptions = map[string]string{"force-command": "true"} }),
		"source-address misses": userCert(t, ca, key, func(c *gossh.Certificate) { c.CriticalOptions = map[string]string{"source-address": "10.0.0.0/8"} }),
		// As OpenSSH: a list with an entry it cannot read admits nothing.
		"source-address with host bits": userCert(t, ca, key, func(c *gossh.Certificate) { c.CriticalOptions = map[string]string{"source-address": "127.0.0.1/8"} }),
		"source-address with a bad entry": userCert(t, ca, key, func(c *gossh.Certificate) {
			c.CriticalOptions = map[string]string{"source-address": "127.0.0.1,nohost"}
		}),
		"source-address with an empty entry": userCert(t, ca, key, func(c *gossh.Certificate) {
			c.CriticalOptions = map[string]string{"source-address": "127.0.0.0/8,"}
		}),
	}
	for name, cert := range refused {
		if _, err := a.PublicKey(from("127.0.0.1"), cert); err == nil {
			t.Errorf("%s: admitted", name)
		}
	}
	if _, err := a.PublicKey(from("10.1.2.3"), userCert(t, ca, key, func(c *gossh.Certificate) {
		c.CriticalOptions = map[string]string{"source-address": "10.0.0.0/8"}
	})); err != nil {
		t.Errorf("source-address that admits the address: %v", err)
	}
	// The plain key of a certificate is not admitted by the CA.
	if _, err := a.PublicKey(from("127.0.0.1"), key); err == nil {
		t.Error("a plain key was admitted by a CA file")
	}

	// Replacing the CA in the file takes effect on the next login.
	os.WriteFile(caFile, gossh.MarshalAuthorizedKey(other.PublicKey()), 0o644)
	future := time.Now().Add(2 * time.Second)
	os.Chtimes(caFile, future, future)
	if _, err := a.PublicKey(from("127.0.0.1"), userCert(t, ca, key, nil)); err == nil {
		t.Error("a certificate of a removed CA was admitted")
	}
	if _, err := a.PublicKey(from("127.0.0.1"), userCert(t, other, key, nil)); err != nil {
		t.Errorf("a certificate of the new CA: %v", err)
	}

	// Without a CA file, certificates are refused.
	b, err := New(Options{AuthorizedKeys: writeKeys(t, line(key)), sleep: func(time.Duration) {}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.PublicKey(from("127.0.0.1"), userCert(t, ca, key, nil)); err == nil || !strings.Contains(err.Error(), "no --ssh-trusted-user-ca-keys") {
		t.Errorf("a certificate without a CA file: %v", err)
	}
}

func TestParseTrustedUserCAKeys(t *testing.T) {
	ca := newSigner(t)
	good := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(ca.PublicKey())))
	cert := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(userCert(t, ca, newKey(t), nil))))
	for content, want := range map[string]string{
		"# none\n\n":                    "ca.pub: no CA key in the file",
		"# c\n" + good + "\nnonsense\n": "ca.pub:3:",
		`from="10.0.0.1" ` + good:       "ca.pub:1: options (from=\"10.0.0.1\") are not allowed on a CA key",
		cert:                            "ca.pub:1: a certificate, not a CA's public key",
	} {
		if _, err := ParseTrustedUserCAKeys("ca.pub", []byte(content)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.30q: %v; want %q", content, err, want)
		}
	}
	if cas, err := ParseTrustedUserCAKeys("ca.pub", []byte("# c\n"+good+"\n\n"+good+"\n")); err != nil || len(cas) != 2 {
		t.Errorf("two keys: %d %v", len(cas), err)
	}
}

func writeKeys(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "authorized_keys")
	if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

package sshauth

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

func as(user, ip string) meta {
	return meta{user: user, addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 5000}}
}

// TestCertPrincipals: a certificate logs in only under a login name that
// is both one of its principals and one of Options.CertPrincipals (default
// "agent"); a certificate with no principals is refused, as OpenSSH
// refuses it; so are unknown critical options, a host certificate and the
// CA's own key presented as a plain key.
func TestCertPrincipals(t *testing.T) {
	ca := newSigner(t)
	caFile := filepath.Join(t.TempDir(), "ca.pub")
	os.WriteFile(caFile, gossh.MarshalAuthorizedKey(ca.PublicKey()), 0o644)
	a, err := New(Options{TrustedUserCAKeys: caFile, sleep: func(time.Duration) {}})
	if err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	principals := func(p ...string) func(*gossh.Certificate) {
		return func(c *gossh.Certificate) { c.ValidPrincipals = p }
	}
	for _, tc := range []struct {
		name, user string
		edit       func(*gossh.Certificate)
		want       string // "" admits
	}{
		{"agent, named", "agent", nil, ""},
		{"agent among others", "agent", principals("alice", "agent"), ""},
		{"no principals", "agent", principals(), "names no principals"},
		{"no principals, another login name", "anyone", principals(), "names no principals"},
		{"a principal other than the login name", "agent", principals("root"), "not in the set of valid principals"},
		{"a principal the operator does not accept", "alice", principals("alice", "agent"), `login name "alice" is not one of --ssh-cert-principals`},
		{"root, named", "root", principals("root"), `login name "root" is not one of --ssh-cert-principals`},
		{"an empty login name", "", principals(""), `login name "" is not one of --ssh-cert-principals`},
		{"a host certificate", "agent", func(c *gossh.Certificate) { c.CertType = gossh.HostCert }, "cert has type 2"},
		{"verify-required", "agent", func(c *gossh.Certificate) { c.CriticalOptions = map[string]string{"verify-required": ""} }, `unsupported critical option "verify-required"`},
		{"an unknown critical option", "agent", func(c *gossh.Certificate) { c.CriticalOptions = map[string]string{"x-new@example.com": "1"} }, "unsupported critical option"},
		{"force-command", "agent", func(c *gossh.Certificate) { c.CriticalOptions = map[string]string{"force-command": "true"} }, `unsupported critical option "force-command"`},
		{"valid from the future", "agent", func(c *gossh.Certificate) { c.ValidAfter = uint64(time.Now().Add(time.Minute).Unix()) }, "not yet valid"},
		{"expired", "agent", func(c *gossh.Certificate) { c.ValidBefore = uint64(time.Now().Add(-time.Second).Unix()) }, "expired"},
	} {
		_, err := a.PublicKey(as(tc.user, "127.0.0.1"), userCert(t, ca, key, tc.edit))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s (login %q): %v; want %q", tc.name, tc.user, err, tc.want)
		}
	}
	// The CA's key itself is no login key.
	if _, err := a.PublicKey(as("agent", "127.0.0.1"), ca.PublicKey()); err == nil {
		t.Error("the CA's public key was admitted as a plain key")
	}

	// The operator's list: each name a certificate may log in as.
	b, err := New(Options{TrustedUserCAKeys: caFile, CertPrincipals: []string{"alice", "ci"}, sleep: func(time.Duration) {}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.PublicKey(as("alice", "127.0.0.1"), userCert(t, ca, key, principals("alice"))); err != nil {
		t.Errorf("alice, accepted and named: %v", err)
	}
	if _, err := b.PublicKey(as("agent", "127.0.0.1"), userCert(t, ca, key, nil)); err == nil {
		t.Error("agent was admitted although --ssh-cert-principals does not list it")
	}
	if _, err := b.PublicKey(as("ci", "127.0.0.1"), userCert(t, ca, key, principals("alice"))); err == nil {
		t.Error("ci was admitted with a certificate for alice")
	}
	for _, bad := range [][]string{{""}, {"a b"}, {"a,b"}} {
		if _, err := New(Options{TrustedUserCAKeys: caFile, CertPrincipals: bad}); err == nil || !strings.Contains(err.Error(), "--ssh-cert-principals") {
			t.Errorf("CertPrincipals %q: %v", bad, err)
		}
	}
}

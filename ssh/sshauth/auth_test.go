package sshauth

import (
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	gossh "golang.org/x/crypto/ssh"
)

func newKey(t *testing.T) gossh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := gossh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

func line(pk gossh.PublicKey) string {
	return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(pk)))
}

type meta struct {
	user string
	addr net.Addr
}

func (m meta) User() string          { return m.user }
func (m meta) SessionID() []byte     { return nil }
func (m meta) ClientVersion() []byte { return nil }
func (m meta) ServerVersion() []byte { return nil }
func (m meta) RemoteAddr() net.Addr  { return m.addr }
func (m meta) LocalAddr() net.Addr   { return m.addr }

func from(ip string) meta {
	return meta{user: "agent", addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 5000}}
}

func TestParseAuthorizedKeys(t *testing.T) {
	k := newKey(t)
	for _, tc := range []struct{ content, want string }{
		{"# comment\n\n" + line(k) + " me\n", ""},
		{`from="10.0.0.0/8,!10.1.0.0/16,192.168.1.*" ` + line(k), ""},
		{"restrict,pty " + line(k), ""},
		{`command="/bin/true" ` + line(k), `keys:1: option "command=\"/bin/true\"" is not supported here`},
		{"\n\npermitopen=\"x:1\" " + line(k), "keys:3: option"},
		{`from="example.com" ` + line(k), `keys:1: from="example.com": "example.com": host names cannot be matched`},
		{"ssh-ed25519 AAAAnotbase64", "keys:1:"},
		// A pattern that would match no address, or match by path.Match's
		// rules where OpenSSH's differ, is refused, not kept
		// (FuzzFromMatchesOpenSSH).
		{`from="10.0.0.0/8,! 10.1.2.3" ` + line(k), `keys:1: from="10.0.0.0/8,! 10.1.2.3": " 10.1.2.3": ' ' cannot be in an address pattern`},
		{`from="10.0.0.0/8,!10.1.2.[0-9]" ` + line(k), `"10.1.2.[0-9]": '[' cannot be`},
		{`from="10.1.2.3/16" ` + line(k), `"10.1.2.3/16": the address has bits set past its /16, which OpenSSH refuses; write 10.1.0.0/16`},
		{`from="10.0.0.0/8,!10.1.2.3/16" ` + line(k), `bits set past its /16`},
		{`from="10.0.0.\1" ` + line(k), `'\\' cannot be`},
	} {
		_, err := ParseAuthorizedKeys("keys", []byte(tc.content))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%.60q: %v; want %q", tc.content, err, tc.want)
		}
	}
}

func setup(t *testing.T, keys, hashFile string) (*Auth, *[]time.Duration, *[]string) {
	t.Helper()
	dir := t.TempDir()
	var opts Options
	if keys != "" {
		opts.AuthorizedKeys = filepath.Join(dir, "authorized_keys")
		if err := os.WriteFile(opts.AuthorizedKeys, []byte(keys), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts.PasswordHashFile = hashFile
	var slept []time.Duration
	var attempts []string
	opts.sleep = func(d time.Duration) { slept = append(slept, d) }
	opts.Attempt = func(m, o string) { attempts = append(attempts, m+":"+o) }
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a, &slept, &attempts
}

func TestPublicKeyRules(t *testing.T) {
	good, limited, restricted, unknown := newKey(t), newKey(t), newKey(t), newKey(t)
	a, slept, attempts := setup(t, line(good)+"\n"+`from="10.0.0.0/8,!10.9.0.0/16" `+line(limited)+"\nrestrict "+line(restricted)+"\n", "")
	if p, err := a.PublicKey(from("127.0.0.1"), good); err != nil || p.Extensions[ExtNoPty] != "" {
		t.Errorf("good: %v %v", p, err)
	}
	if _, err := a.PublicKey(from("10.2.3.4"), limited); err != nil {
		t.Errorf("from= match: %v", err)
	}
	if _, err := a.PublicKey(from("10.9.1.1"), limited); err == nil {
		t.Error("a negated from= pattern admitted the key")
	}
	if _, err := a.PublicKey(from("127.0.0.1"), limited); err == nil {
		t.Error("from= admitted an address outside it")
	}
	if p, err := a.PublicKey(from("127.0.0.1"), restricted); err != nil || p.Extensions[ExtNoPty] == "" || p.Extensions[ExtNoPortForwarding] == "" {
		t.Errorf("restrict: %v %v", p, err)
	}
	if _, err := a.PublicKey(from("192.0.2.7"), unknown); err == nil {
		t.Error("an unknown key was admitted")
	}
	// Failures delay the next attempt from the same address, doubling.
	for range 3 {
		a.PublicKey(from("192.0.2.7"), unknown)
	}
	if got := *slept; len(got) < 5 || got[len(got)-1] != 4*got[len(got)-3] {
		t.Errorf("delays %v: want them to double per failure from one address", got)
	}
	if strings.Count(strings.Join(*attempts, ","), "publickey:refused") != 6 {
		t.Errorf("attempts counted: %v", *attempts)
	}
}

func TestPasswordAndReload(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	hf := filepath.Join(t.TempDir(), "hash")
	os.WriteFile(hf, append(hash, '\n'), 0o600)
	k := newKey(t)
	a, _, _ := setup(t, line(k)+"\n", hf)
	if _, err := a.Password(from("127.0.0.1"), []byte("s3cret")); err != nil {
		t.Errorf("right password: %v", err)
	}
	if _, err := a.Password(from("127.0.0.1"), []byte("wrong")); err == nil {
		t.Error("a wrong password was accepted")
	}
	// Revoking the key by editing the file takes effect on the next login.
	os.WriteFile(a.opts.AuthorizedKeys, []byte("# nobody\n"), 0o600)
	future := time.Now().Add(2 * time.Second)
	os.Chtimes(a.opts.AuthorizedKeys, future, future)
	if _, err := a.PublicKey(from("127.0.0.1"), k); err == nil {
		t.Error("a revoked key was admitted")
	}
	// A broken edit admits nothing (it fails closed: TestReloadFailsClosed).
	os.WriteFile(a.opts.AuthorizedKeys, []byte(line(k)+"\n"), 0o600)
	os.Chtimes(a.opts.AuthorizedKeys, future.Add(time.Second), future.Add(time.Second))
	if _, err := a.PublicKey(from("127.0.0.1"), k); err != nil {
		t.Errorf("re-added key: %v", err)
	}
	os.WriteFile(a.opts.AuthorizedKeys, []byte("command=\"x\" "+line(k)+"\n"), 0o600)
	os.Chtimes(a.opts.AuthorizedKeys, future.Add(2*time.Second), future.Add(2*time.Second))
	if _, err := a.PublicKey(from("127.0.0.1"), k); err == nil {
		t.Error("a broken edit kept the last keys in force")
	}
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "no unauthenticated mode") {
		t.Errorf("no auth: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "plain")
	os.WriteFile(bad, []byte("hunter2\n"), 0o600)
	if _, err := New(Options{PasswordHashFile: bad}); err == nil || !strings.Contains(err.Error(), "not a bcrypt hash") {
		t.Errorf("a plain password file: %v", err)
	}
}

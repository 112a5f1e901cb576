package sshauth

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	gossh "golang.org/x/crypto/ssh"
)

// TestRecheck: a login is judged again with the files in force: a key
// still listed with the same options passes; a key whose line gained
// no-pty, whose from= no longer admits the address, or whose line was
// removed does not; a password login fails once the hash file holds
// another hash; permissions that no login of this Auth made are refused.
func TestRecheck(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	hf := filepath.Join(t.TempDir(), "hash")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(hf, hash, 0o600))
	k := newKey(t)
	a, _, _ := setup(t, line(k)+"\n", hf)
	at := from("127.0.0.1")
	login := func() *gossh.Permissions {
		t.Helper()
		p, err := a.PublicKey(at, k)
		must(err)
		p, err = a.VerifiedPublicKey(at, k, p, "")
		must(err)
		return p
	}
	stamp := time.Now()
	rewrite := func(name, data string) {
		t.Helper()
		must(os.WriteFile(name, []byte(data), 0o600))
		stamp = stamp.Add(2 * time.Second) // a change the signature sees
		must(os.Chtimes(name, stamp, stamp))
	}
	key := login()
	pw, err := a.Password(at, []byte("s3cret"))
	must(err)
	if err := a.Recheck(at, key); err != nil {
		t.Errorf("a key still listed: %v", err)
	}
	if err := a.Recheck(at, pw); err != nil {
		t.Errorf("a password whose hash is unchanged: %v", err)
	}
	for name, l := range map[string]string{
		"no-pty added":          "no-pty " + line(k),
		"from= another address": `from="10.0.0.0/8" ` + line(k),
		"the line removed":      "# nobody",
	} {
		rewrite(a.opts.AuthorizedKeys, l+"\n")
		if err := a.Recheck(at, key); err == nil {
			t.Errorf("%s: the login is still admitted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	other, _ := bcrypt.GenerateFromPassword([]byte("other"), bcrypt.MinCost)
	rewrite(hf, string(other))
	if err := a.Recheck(at, pw); err == nil {
		t.Error("a password login is still admitted after the hash file changed")
	}
	if err := a.Recheck(at, &gossh.Permissions{}); err == nil {
		t.Error("permissions no login made were admitted")
	}
}

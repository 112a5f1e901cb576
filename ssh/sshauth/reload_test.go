package sshauth

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	gossh "golang.org/x/crypto/ssh"
)

// syncBuffer is a log sink the test can read while logins write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestReloadFailsClosed: a file that can no longer be read or parsed
// admits nothing from then on, whether the next login or SIGHUP (Reload)
// notices it: authorized_keys deleted, replaced by a directory, or edited
// to carry an unsupported option (command=); the CA file deleted, emptied
// or commented out; the password hash file deleted. The error is logged at
// error level naming the file (and line and option), and Health reports
// it until a good file is back, which admits again.
func TestReloadFailsClosed(t *testing.T) {
	key, ca := newKey(t), newSigner(t)
	certKey := newKey(t)
	caLine := string(gossh.MarshalAuthorizedKey(ca.PublicKey()))
	hash, _ := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)

	type files struct{ keys, cas, hash string }
	setup := func(t *testing.T) (*Auth, files, *syncBuffer) {
		dir := t.TempDir()
		f := files{filepath.Join(dir, "authorized_keys"), filepath.Join(dir, "ca.pub"), filepath.Join(dir, "hash")}
		os.WriteFile(f.keys, []byte(line(key)+"\n"), 0o600)
		os.WriteFile(f.cas, []byte(caLine), 0o644)
		os.WriteFile(f.hash, hash, 0o600)
		logs := &syncBuffer{}
		a, err := New(Options{AuthorizedKeys: f.keys, TrustedUserCAKeys: f.cas, PasswordHashFile: f.hash,
			Logger: slog.New(slog.NewTextHandler(logs, nil)), sleep: func(time.Duration) {}})
		if err != nil {
			t.Fatal(err)
		}
		if h := a.Health(); h.Error != "" {
			t.Fatalf("health after a good start: %+v", h)
		}
		return a, f, logs
	}
	keyOK := func(a *Auth) error { _, err := a.PublicKey(from("127.0.0.1"), key); return err }
	certOK := func(a *Auth) error {
		_, err := a.PublicKey(from("127.0.0.1"), userCert(t, ca, certKey, nil))
		return err
	}
	passOK := func(a *Auth) error { _, err := a.Password(from("127.0.0.1"), []byte("s3cret")); return err }
	// touch makes a same-size rewrite visible even on a coarse clock.
	touch := func(name string, n int) {
		future := time.Now().Add(time.Duration(n) * time.Second)
		os.Chtimes(name, future, future)
	}

	for _, tc := range []struct {
		name    string
		break_  func(f files)
		refused func(a *Auth) error // now refused
		kept    func(a *Auth) error // other files still admit
		want    string              // in the log and in Health
		restore func(f files)
	}{
		{"authorized_keys deleted", func(f files) { os.Remove(f.keys) }, keyOK, certOK, "authorized_keys: no such file",
			func(f files) { os.WriteFile(f.keys, []byte(line(key)+"\n"), 0o600) }},
		{"authorized_keys replaced by a directory", func(f files) { os.Remove(f.keys); os.Mkdir(f.keys, 0o700) }, keyOK, certOK, "not a regular file",
			func(f files) { os.Remove(f.keys); os.WriteFile(f.keys, []byte(line(key)+"\n"), 0o600) }},
		{"authorized_keys with command=", func(f files) {
			os.WriteFile(f.keys, []byte("# ok\n"+line(newKey(t))+"\ncommand=\"/bin/true\" "+line(key)+"\n"), 0o600)
			touch(f.keys, 2)
		}, keyOK, certOK, `authorized_keys:3: option "command=\"/bin/true\"" is not supported here`,
			func(f files) { os.WriteFile(f.keys, []byte(line(key)+"\n"), 0o600); touch(f.keys, 4) }},
		{"CA file deleted", func(f files) { os.Remove(f.cas) }, certOK, keyOK, "ca.pub: no such file",
			func(f files) { os.WriteFile(f.cas, []byte(caLine), 0o644) }},
		{"CA file emptied", func(f files) { os.WriteFile(f.cas, nil, 0o644) }, certOK, keyOK, "ca.pub: no CA key in the file",
			func(f files) { os.WriteFile(f.cas, []byte(caLine), 0o644) }},
		{"CA file commented out", func(f files) { os.WriteFile(f.cas, []byte("#"+caLine), 0o644); touch(f.cas, 2) }, certOK, keyOK, "ca.pub: no CA key in the file",
			func(f files) { os.WriteFile(f.cas, []byte(caLine), 0o644); touch(f.cas, 4) }},
		{"password hash deleted", func(f files) { os.Remove(f.hash) }, passOK, keyOK, "hash: no such file",
			func(f files) { os.WriteFile(f.hash, hash, 0o600) }},
	} {
		for _, trigger := range []string{"login", "SIGHUP"} {
			t.Run(tc.name+"/"+trigger, func(t *testing.T) {
				a, f, logs := setup(t)
				if err := tc.refused(a); err != nil {
					t.Fatalf("before: %v", err)
				}
				tc.break_(f)
				if trigger == "SIGHUP" {
					if err := a.Reload(); err == nil || !strings.Contains(err.Error(), tc.want) {
						t.Errorf("Reload: %v; want %q", err, tc.want)
					}
				}
				if err := tc.refused(a); err == nil {
					t.Fatal("still admitted after the file broke")
				}
				if err := tc.kept(a); err != nil {
					t.Errorf("a file that did not change stopped admitting: %v", err)
				}
				quoted := strings.Trim(strconv.Quote(tc.want), `"`) // as the text handler writes it
				if out := logs.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, quoted) {
					t.Errorf("log lacks the error %q:\n%s", tc.want, out)
				}
				if h := a.Health(); !strings.Contains(h.Error, tc.want) {
					t.Errorf("Health().Error = %q; want %q", h.Error, tc.want)
				}
				// Refused again without a second reload or log line.
				n := strings.Count(logs.String(), "level=ERROR")
				tc.refused(a)
				if m := strings.Count(logs.String(), "level=ERROR"); m != n {
					t.Errorf("an unchanged broken file was reported again (%d error lines, then %d)", n, m)
				}
				tc.restore(f)
				if err := tc.refused(a); err != nil {
					t.Errorf("a good file again: %v", err)
				}
				if h := a.Health(); h.Error != "" {
					t.Errorf("Health after the repair: %+v", h)
				}
			})
		}
	}
}

// TestReloadNoticesEveryChange: a change that keeps the size and the
// modification time (a chmod, a replacement by rename) is noticed.
func TestReloadNoticesEveryChange(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	if len(line(k1)) != len(line(k2)) {
		t.Fatal("ed25519 lines differ in length")
	}
	p := writeKeys(t, line(k1))
	a, err := New(Options{AuthorizedKeys: p, sleep: func(time.Duration) {}})
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)
	tmp := p + ".new"
	os.WriteFile(tmp, []byte(line(k2)+"\n"), 0o600)
	os.Chtimes(tmp, fi.ModTime(), fi.ModTime())
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PublicKey(from("127.0.0.1"), k1); err == nil {
		t.Error("a key replaced by rename (same size and mtime) was admitted")
	}
	if _, err := a.PublicKey(from("127.0.0.1"), k2); err != nil {
		t.Errorf("the key put in by rename: %v", err)
	}
}

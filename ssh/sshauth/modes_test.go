package sshauth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFilesOthersCanWriteAdmitNothing: as sshd's StrictModes, an
// authorized_keys file that its group or others may write, or that lies
// in a directory they may write, is refused at start; and when it becomes
// so later (chmod), the next login or SIGHUP notices and the file admits
// nothing until it is put right.
func TestFilesOthersCanWriteAdmitNothing(t *testing.T) {
	key := newKey(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "authorized_keys")
	os.WriteFile(p, []byte(line(key)+"\n"), 0o600)
	os.Chmod(p, 0o664)
	if os.Geteuid() == 0 {
		// A group other than root's (nogroup): internal/opfile allows
		// group write by root's group, whose members are root's.
		os.Chown(p, 0, 65534)
	} else {
		// The user's own group may be a private one, which the rule
		// allows: others write it instead.
		os.Chmod(p, 0o666)
	}
	if _, err := New(Options{AuthorizedKeys: p}); err == nil || !strings.Contains(err.Error(), "writable by its group or by others") {
		t.Fatalf("group-writable authorized_keys: %v", err)
	}
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	q := filepath.Join(open, "authorized_keys")
	os.WriteFile(q, []byte(line(key)+"\n"), 0o600)
	if _, err := New(Options{AuthorizedKeys: q}); err == nil || !strings.Contains(err.Error(), "which its group or others may write") {
		t.Fatalf("authorized_keys in a world-writable directory: %v", err)
	}

	os.Chmod(p, 0o600)
	a, err := New(Options{AuthorizedKeys: p, sleep: func(time.Duration) {}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.PublicKey(from("10.0.0.1"), key); err != nil {
		t.Fatalf("0600 file: %v", err)
	}
	os.Chmod(p, 0o606)
	if _, err := a.PublicKey(from("10.0.0.1"), key); err == nil {
		t.Fatal("a key from an authorized_keys others may write was admitted")
	}
	if h := a.Health(); !strings.Contains(h.Error, "writable by its group or by others") {
		t.Fatalf("health: %+v", h)
	}
	os.Chmod(p, 0o644)
	if _, err := a.PublicKey(from("10.0.0.1"), key); err != nil {
		t.Fatalf("put right again: %v", err)
	}
}

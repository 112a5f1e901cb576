package sshd

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

// TestLoadOrCreateHostKey: a missing key is generated once (ed25519, 0600
// in a 0700 directory) and read back the same; a key the reference daemon
// wrote (RSA, PKCS#1 PEM) loads; a file that is not a key, or a path that
// cannot hold one, is an error.
func TestLoadOrCreateHostKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "dir", "key")
	k1, err := LoadOrCreateHostKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if k1.PublicKey().Type() != gossh.KeyAlgoED25519 {
		t.Fatalf("generated %s, want ed25519", k1.PublicKey().Type())
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v %v", fi.Mode(), err)
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Fatalf("key dir mode %v", di.Mode())
	}
	k2, err := LoadOrCreateHostKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k1.PublicKey().Marshal(), k2.PublicKey().Marshal()) {
		t.Fatal("key regenerated on second load")
	}

	bad := []struct {
		name  string
		setup func(t *testing.T) string
	}{
		{"garbage key file", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "k")
			os.WriteFile(p, []byte("not a key"), 0o600)
			return p
		}},
		{"parent is a file", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "f")
			os.WriteFile(p, nil, 0o600)
			return filepath.Join(p, "key")
		}},
		{"key path is a directory", func(t *testing.T) string { return t.TempDir() }},
		// What a start killed while writing the key in place left, for
		// a build that wrote it so: refused, never taken for a key.
		{"empty key file", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "k")
			os.WriteFile(p, nil, 0o600)
			return p
		}},
		// Read as the operator's other files are: never waited on,
		// never one that others could have replaced.
		{"FIFO under the name", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "k")
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"key writable by others", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "k")
			os.WriteFile(p, pem.EncodeToMemory(mustKeyBlock(t)), 0o600)
			os.Chmod(p, 0o666)
			return p
		}},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			if _, err := LoadOrCreateHostKey(b.setup(t)); err == nil {
				t.Fatal("no error")
			}
		})
	}

	// The reference daemon wrote an RSA key in PKCS#1 PEM at the same
	// default path: a host migrating from it keeps its key.
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "ref_key")
	os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rk)}), 0o600)
	if k, err := LoadOrCreateHostKey(p); err != nil || k.PublicKey().Type() != gossh.KeyAlgoRSA {
		t.Fatalf("reference RSA key: %v", err)
	}
}

// mustKeyBlock is a fresh ed25519 key in OpenSSH's PEM form.
func mustKeyBlock(t *testing.T) *pem.Block {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b, err := gossh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

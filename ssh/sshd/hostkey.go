package sshd

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	gossh "golang.org/x/crypto/ssh"
)

// DefaultHostKeyPath is where LoadOrCreateHostKey looks when it is given no
// path (the daemon always gives --ssh-host-key).
const DefaultHostKeyPath = "/var/lib/agentbe/ssh_host_ed25519_key"

// LoadOrCreateHostKey reads the SSH host key at path (any key type OpenSSH
// writes: ed25519, ECDSA, RSA; PEM or OpenSSH format). If the file does not
// exist it generates an ed25519 key, saves it there in OpenSSH format with
// mode 0600 (creating the parent directory 0700), and returns it.
//
// The daemon loads its key once, into the Config every listener shares, never
// per listener or per connection: a stable host key lets OpenSSH users pin it
// in known_hosts, and generating keys per connection would cost every
// handshake. The file is created with O_EXCL, so two daemons starting at once
// cannot both write it; the loser reads the winner's key.
func LoadOrCreateHostKey(path string) (gossh.Signer, error) {
	if path == "" {
		path = DefaultHostKeyPath
	}
	data, err := os.ReadFile(path)
	if err == nil {
		signer, perr := gossh.ParsePrivateKey(data)
		if perr != nil {
			return nil, fmt.Errorf("ssh host key %s: %w", path, perr)
		}
		return signer, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("ssh host key: %w", err)
	}

	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ssh host key: generate: %w", err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "agentbe host key")
	if err != nil {
		return nil, fmt.Errorf("ssh host key: encode: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("ssh host key: %w (set --ssh-host-key to a writable path)", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadOrCreateHostKey(path) // someone else just wrote it
	}
	if err != nil {
		return nil, fmt.Errorf("ssh host key: %w (set --ssh-host-key to a writable path)", err)
	}
	if _, err := f.Write(pem.EncodeToMemory(block)); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("ssh host key: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("ssh host key: write %s: %w", path, err)
	}
	return gossh.NewSignerFromKey(priv)
}

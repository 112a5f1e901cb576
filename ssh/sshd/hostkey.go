package sshd

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	gossh "golang.org/x/crypto/ssh"
)

// DefaultHostKeyPath is where LoadOrCreateHostKey looks when it is given no
// path (the daemon always gives --ssh-host-key).
const DefaultHostKeyPath = "/var/lib/agentbe/ssh_host_ed25519_key"

// maxHostKeyBytes bounds the host key file read: an RSA key of 16384 bits
// in PEM is under 13 KiB.
const maxHostKeyBytes = 1 << 20

// staleTempAge is how old a named temp file of an interrupted key
// creation must be before a load removes it (a creation that is running
// takes milliseconds).
const staleTempAge = time.Minute

// LoadOrCreateHostKey reads the SSH host key at path (any key type OpenSSH
// writes: ed25519, ECDSA, RSA; PEM or OpenSSH format). If the file does not
// exist it generates an ed25519 key, saves it there in OpenSSH format with
// mode 0600 (creating the parent directory 0700), and returns it.
//
// The key is read without waiting (readKeyFile): a regular file only (a
// FIFO or a device under the name is refused, never waited on), at most
// 1 MiB, and not one its group or others may write, since whoever
// replaces the key can impersonate the server.
//
// The name appears only once the key is whole on disk: the key is written
// into an unnamed file in the key's directory (O_TMPFILE; a temp file
// named .<name>.tmp-* where the file system has no O_TMPFILE), fsynced,
// and linked to the name, which fails if the name exists. So a kill or a
// power cut at any moment leaves the key whole or absent, never an empty
// or cut-short file that would stop every later start; two daemons
// starting at once both end up with the one key that was linked first.
// A named temp file left by a kill is removed by a later load once it is
// a minute old.
//
// The daemon loads its key once, into the Config every listener shares, never
// per listener or per connection: a stable host key lets OpenSSH users pin it
// in known_hosts, and generating keys per connection would cost every
// handshake.
func LoadOrCreateHostKey(path string) (gossh.Signer, error) {
	if path == "" {
		path = DefaultHostKeyPath
	}
	signer, err := loadHostKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return signer, err
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
	err = linkNew(path, pem.EncodeToMemory(block))
	if errors.Is(err, fs.ErrExist) {
		return loadHostKey(path) // another daemon linked its key first
	}
	if err != nil {
		return nil, fmt.Errorf("ssh host key: %w (set --ssh-host-key to a writable path)", err)
	}
	return gossh.NewSignerFromKey(priv)
}

// CheckHostKey reads and parses the key at path as a start would, without
// creating it or removing anything: nil when the file is missing (the
// start generates a key there) or holds a key the daemon can use, else the
// error the start would stop with. It is --check-config's look at the key.
func CheckHostKey(path string) error {
	data, err := readKeyFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--ssh-host-key %s: %w", path, err)
	}
	if _, err := gossh.ParsePrivateKey(data); err != nil {
		return fmt.Errorf("--ssh-host-key %s: not a private key the daemon can use (%v; %d bytes); "+
			"put the right key back, or remove the file and a new key is generated (clients that pinned the old one will refuse the new)",
			path, err, len(data))
	}
	return nil
}

// loadHostKey reads and parses the key at path; a missing file's error
// matches fs.ErrNotExist.
func loadHostKey(path string) (gossh.Signer, error) {
	removeStaleTemps(path)
	data, err := readKeyFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("ssh host key %s: %w", path, err)
	}
	signer, err := gossh.ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("ssh host key %s: not a private key the daemon can use (%v; %d bytes); "+
			"put the right key back, or remove the file and a new key is generated (clients that pinned the old one will refuse the new)",
			path, err, len(data))
	}
	return signer, nil
}

// readKeyFile reads the key file: opened without blocking (a FIFO or a
// device under the name is refused at once, never waited on), a regular
// file only, at most maxHostKeyBytes, and not one its group or others may
// write. Unlike internal/opfile's reader, the directories above it are not
// judged: the key lives in the daemon's state directory, which in a pod is
// a volume that fsGroup makes group-writable (2775, 2777), and refusing
// that would stop every restart of a daemon whose key was made there.
func readKeyFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if pe, ok := err.(*fs.PathError); ok {
			return nil, pe.Err
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("is writable by its group or by others (mode %04o): whoever can write it can make the server's identity theirs; chmod go-w it", fi.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxHostKeyBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxHostKeyBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxHostKeyBytes)
	}
	return data, nil
}

// linkNew writes data to a file that gets the name path only once it is
// whole and synced, and fails with an error matching fs.ErrExist when path
// exists.
func linkNew(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.OpenFile(dir, unix.O_TMPFILE|os.O_WRONLY|unix.O_CLOEXEC, 0o600)
	named := ""
	if err != nil {
		// No O_TMPFILE on this file system (EOPNOTSUPP, EISDIR on old
		// kernels): a temp file with a name, which a kill leaves behind
		// until removeStaleTemps.
		if f, err = os.CreateTemp(dir, tempPrefix(path)+"*"); err != nil {
			return err
		}
		named = f.Name()
		defer os.Remove(named)
	}
	defer f.Close()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if named != "" {
		err = os.Link(named, path)
	} else {
		err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			err = &os.LinkError{Op: "link", Old: "(new key)", New: path, Err: err}
		}
	}
	if errors.Is(err, unix.EEXIST) {
		return fs.ErrExist
	}
	if err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // the name, durable like the content
		d.Close()
	}
	return nil
}

// tempPrefix is the name of linkNew's named temp files for path.
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// removeStaleTemps removes the named temp files that creations of the key
// at path, killed before they ended, left in its directory.
func removeStaleTemps(path string) {
	dir := filepath.Dir(path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := tempPrefix(path)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleTempAge {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

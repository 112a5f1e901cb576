// Package opfile reads the operator's files that grant rights or hold a
// secret: the token files (--auth-token-file, --operator-token-file,
// --tokens), the SSH port's authentication files (--ssh-authorized-keys,
// --ssh-trusted-user-ca-keys, --ssh-password-hash-file) and the TLS pair
// (--tls-cert, --tls-key). There is one reader, Read, for every start and
// every reload (SIGHUP, and the SSH port's re-read before a login).
//
// Read never blocks and never reads without bound: the file is opened with
// O_NONBLOCK (a FIFO or a device planted under the name cannot hold the
// start or a reload), only a regular file is read, and at most a bound.
// Like sshd's StrictModes, it refuses a file that a user other than its
// owner could change: one writable by its group or by others, or lying in
// a directory (as named, or once symlinks are followed) that its group or
// others may write without the sticky bit, since whoever can write there
// can put another file under the name. Who owns the file is not checked:
// a daemon running as root in a container reads files its operator owns
// on the host (docs/configuration.md).
package opfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Read reads the regular file name, at most max bytes, after checking that
// only its owner can change it. An error is the reason alone (the caller
// names the flag and the file); a missing file's matches os.ErrNotExist.
func Read(name string, max int64) ([]byte, error) {
	if err := CheckModes(name); err != nil {
		return nil, err
	}
	return read(name, max, true)
}

// ReadRegular is Read without the owner checks: for a file a user names
// on their own machine (the token file of a client, agentbe-bridge or
// agent-backend proxy), where who else may write it is theirs to judge. It
// still never blocks (a FIFO, a device), reads only a regular file, and at
// most max bytes, so a wrong name fails with the reason, not a hang or the
// memory of /dev/zero. It stands in for os.ReadFile: an error is an
// *fs.PathError that names the file ("open NAME: not a regular file (a
// FIFO)"), and a missing file's matches os.ErrNotExist.
func ReadRegular(name string, max int64) ([]byte, error) {
	b, err := read(name, max, false)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return b, nil
}

// MaxTokenFile bounds a token file read with ReadRegular: one token, and
// room to spare.
const MaxTokenFile = 64 << 10

func read(name string, max int64, modes bool) ([]byte, error) {
	// What is not a regular file is refused before it is opened: opening
	// is what a device acts on (a watchdog arms, a tape rewinds on close)
	// and what releases a writer waiting at a FIFO. The descriptor is
	// judged again below, in case the name was replaced in between.
	if fi, err := os.Stat(name); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", typeName(fi.Mode()))
	}
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, unwrap(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, unwrap(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", typeName(fi.Mode()))
	}
	// The checks above judged the name; judge the file this descriptor
	// reads too, in case the name was replaced in between.
	if modes {
		if err := fileModeOK(fi.Mode()); err != nil {
			return nil, err
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, unwrap(err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return data, nil
}

// CheckModes reports why the file name, or a directory it lies in, could
// be changed by a user other than its owner; nil when it cannot. A name
// that does not exist yet is judged by its directories alone.
func CheckModes(name string) error {
	abs, err := filepath.Abs(name)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(abs); err == nil && fi.Mode().IsRegular() {
		if err := fileModeOK(fi.Mode()); err != nil {
			return err
		}
	}
	if err := dirsOK(filepath.Dir(abs)); err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		return dirsOK(filepath.Dir(real))
	}
	return nil
}

func fileModeOK(m fs.FileMode) error {
	if m.Perm()&0o022 != 0 {
		return fmt.Errorf("is writable by its group or by others (mode %04o): whoever can write it can grant themselves rights; chmod go-w it", m.Perm())
	}
	return nil
}

// dirsOK walks from dir up to the root: no directory may be writable by
// its group or by others unless it has the sticky bit (/tmp).
func dirsOK(dir string) error {
	for {
		fi, err := os.Stat(dir)
		if err == nil {
			m := fi.Mode()
			if m.Perm()&0o022 != 0 && m&fs.ModeSticky == 0 {
				return fmt.Errorf("lies in %s, which its group or others may write (mode %04o) without the sticky bit: whoever can write there can replace the file; chmod go-w it or move the file", dir, m.Perm())
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil
		}
		dir = parent
	}
}

// typeName says what a file that is not a regular one is, from the type
// letters fs.FileMode.String gives (the POSIX bits of a mode are fsops'
// to convert, which this package, read by the doors' callers, is below).
func typeName(m fs.FileMode) string {
	if m.IsDir() {
		return "a directory"
	}
	s := m.Type().String()
	letters := s[:len(s)-9] // the nine permission characters follow
	for _, k := range []struct{ letter, name string }{
		{"c", "a character device"}, {"D", "a device"}, {"p", "a FIFO"}, {"S", "a socket"},
	} {
		if strings.Contains(letters, k.letter) {
			return k.name
		}
	}
	return "not a regular file (" + letters + ")"
}

func unwrap(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

package sshauth

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/opfile"
)

// maxFileSize bounds what one of the files may make the daemon read
// (authorized_keys of about 100,000 keys).
const maxFileSize = 16 << 20

// fileSig tells versions of a file apart: the stat's error, or its device,
// inode, size, modification and change times. The change time moves on
// every write, chmod and rename into place, so an edit that keeps the size
// and the modification time is seen too.
type fileSig struct {
	err          string
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

func sigOf(fi os.FileInfo) fileSig {
	sig := fileSig{size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		sig.dev, sig.ino, sig.mtime, sig.ctime = uint64(st.Dev), st.Ino, st.Mtim, st.Ctim
	} else {
		sig.mtime = syscall.NsecToTimespec(fi.ModTime().UnixNano())
	}
	return sig
}

// statSig is the signature of the file name names now.
func statSig(name string) fileSig {
	fi, err := os.Stat(name)
	if err != nil {
		return errSig(err)
	}
	return sigOf(fi)
}

// errSig is the signature of a file that cannot be opened or stat'ed: the
// error without the operation, so that stat and open agree.
func errSig(err error) fileSig {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fileSig{err: err.Error()}
}

// readFile reads a regular file and says which version it read, through
// internal/opfile's reader: it never waits on a FIFO or a device, reads at
// most maxFileSize, and refuses a file that a user other than its owner
// could change (sshd's StrictModes). The signature is the stat's taken
// before the read: a change during the read is seen at the next login.
func readFile(name string) ([]byte, fileSig, error) {
	sig := statSig(name)
	data, err := opfile.Read(name, maxFileSize)
	if err != nil {
		return nil, sig, fmt.Errorf("%s: %w", name, err)
	}
	return data, sig, nil
}

// source is one configured file and what it gave when last read. When it
// cannot be read or parsed, nothing is admitted through it (err says why)
// until a version that loads replaces it.
type source struct {
	flag, name string
	sig        fileSig
	n          int   // keys, CA keys or hashes in force
	err        error // why nothing is admitted through the file
	read       time.Time
}

// Health is the state of the SSH port's authentication files, for the
// daemon's /health.
type Health struct {
	// Error names every file that admits nothing because it could not be
	// read or parsed, and why; "" when all loaded.
	Error string       `json:"error,omitempty"`
	Files []FileHealth `json:"files"`
}

// FileHealth is one file's state.
type FileHealth struct {
	Flag string `json:"flag"`
	File string `json:"file"`
	// Loaded is how many keys, CA keys or password hashes are in force
	// from the file (0 while Error is set).
	Loaded int    `json:"loaded"`
	Error  string `json:"error,omitempty"`
	// ReadAt is when the file was last read.
	ReadAt time.Time `json:"readAt"`
}

package scpd

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

// sink serves `scp -t TARGET`: the client sends records, we write.
func (s *Session) sink() error {
	target := s.cmd.Paths[0]
	info, err := s.ws.Stat(target)
	targetIsDir := err == nil && info.IsDir()
	if s.cmd.TargetDir && !targetIsDir {
		if err == nil {
			return s.fatal("%s: Not a directory", target)
		}
		return s.fatal("%s: %s", target, reason(err))
	}
	if err := s.ack(); err != nil {
		return err
	}
	return s.records(target, targetIsDir, 0)
}

// times are a T record's, for the next C or D record.
type times struct{ mtime, atime time.Time }

// records reads and answers records until an E record (which it answers)
// or, at the top (depth 0), the end of the client's stream. dir is where
// named entries go when isDir; at the top, a target that is not a
// directory is the file (or new directory) itself.
func (s *Session) records(dir string, isDir bool, depth int) error {
	var pending *times
	for first := depth == 0; ; first = false {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && depth == 0 {
				return nil
			}
			if errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			if errors.Is(err, errProtocol) {
				return s.fatal("%v", err)
			}
			return err
		}
		if line == "" {
			return s.fatal("protocol error: unexpected <newline>")
		}
		switch line[0] {
		case 1, 2:
			// The client's own error (a file it could not read): counted;
			// a fatal one ends the transfer.
			s.errs++
			s.log.Debug("scp: the client reported an error", "msg", line[1:])
			if line[0] == 2 {
				return fmt.Errorf("%w: the client ended the transfer: %s", errFatal, line[1:])
			}
			continue
		case 'E':
			if line != "E" {
				return s.fatal("protocol error: bad E record")
			}
			return s.ack()
		case 'T':
			t, err := parseTimes(line[1:])
			if err != nil {
				return s.fatal("protocol error: %v", err)
			}
			pending = &t
			if err := s.ack(); err != nil {
				return err
			}
			continue
		case 'C', 'D':
		default:
			if first {
				// Whatever the client sent, it is not scp; show it.
				return s.fatal("%s", line)
			}
			return s.fatal("protocol error: expected control record")
		}
		mode, size, name, err := parseEntry(line[1:])
		if err != nil {
			return s.fatal("protocol error: %v", err)
		}
		if line[0] == 'D' && size != 0 {
			return s.fatal("protocol error: a directory record with a size")
		}
		if err := checkName(name); err != nil {
			return s.fatal("error: unexpected filename: %q", name)
		}
		dest := dir
		if isDir {
			dest = path.Join(dir, name)
		}
		t := pending
		pending = nil
		if line[0] == 'D' {
			if !s.cmd.Recursive {
				return s.fatal("protocol error: received directory without -r")
			}
			if depth+1 > MaxDepth {
				return s.fatal("%s: directories nested more than %d deep", dest, MaxDepth)
			}
			if err := s.receiveDir(dest, mode, t, depth); err != nil {
				return err
			}
			continue
		}
		if err := s.receiveFile(dest, mode, size, t); err != nil {
			return err
		}
	}
}

// receiveDir creates (or enters) dest and serves its records.
func (s *Session) receiveDir(dest string, mode fs.FileMode, t *times, depth int) error {
	info, err := s.ws.Stat(dest)
	exists := err == nil
	switch {
	case exists && !info.IsDir():
		return s.fail("%s: Not a directory", dest)
	case !exists && !isNotExist(err):
		return s.fail("%s: %s", dest, reason(err))
	case !exists:
		if err := s.ws.Mkdir(dest, false); err != nil {
			return s.fail("%s: %s", dest, reason(err))
		}
	}
	if err := s.ack(); err != nil {
		return err
	}
	if err := s.records(dest, true, depth+1); err != nil {
		return err
	}
	// After its contents, as scp does, so that a read-only mode or an old
	// mtime does not get in their way.
	if !exists || s.cmd.Preserve {
		m := mode & 0o777
		if !s.cmd.Preserve {
			m &^= 0o022
		}
		if err := s.ws.Chmod(dest, m|0o700); err != nil {
			s.log.Debug("scp: chmod", "path", dest, "err", err)
		}
	}
	if t != nil {
		if err := s.ws.Chtimes(dest, t.atime, t.mtime); err != nil {
			return s.fail("%s: set times: %s", dest, reason(err))
		}
	}
	return nil
}

// receiveFile receives one file's bytes into a temporary file beside dest
// and renames it over dest once they all arrived and the client's final
// status is ok. On any failure dest is untouched and the temporary file is
// gone.
func (s *Session) receiveFile(dest string, mode fs.FileMode, size int64, t *times) error {
	info, err := s.ws.Stat(dest)
	exists := err == nil
	switch {
	case exists && info.IsDir():
		return s.fail("%s: Is a directory", dest)
	case !exists && !isNotExist(err):
		return s.fail("%s: %s", dest, reason(err))
	}
	perm := mode & 0o777
	switch {
	case s.cmd.Preserve:
	case exists:
		perm = info.Mode.Perm()
	default:
		perm &^= 0o022
	}
	tmp := tempName(dest)
	f, err := s.ws.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return s.fail("%s: %s", dest, reason(err))
	}
	discard := func() {
		_ = f.Close()
		_ = s.ws.Remove(tmp, fsRemoveForce)
	}
	if err := s.ack(); err != nil {
		discard()
		return err
	}
	// Keep reading after a write error so that we stay in step with the
	// client; the error is reported after the data.
	if s.buf == nil {
		s.buf = make([]byte, 32<<10)
	}
	var werr error
	for left := size; left > 0; {
		n := int64(len(s.buf))
		if n > left {
			n = left
		}
		if _, err := io.ReadFull(s.r, s.buf[:n]); err != nil {
			discard()
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if werr == nil {
			_, werr = f.Write(s.buf[:n])
		}
		left -= n
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	// The client's status after its data: not 0 means what it sent is not
	// the file (it could not read it all).
	if err := s.response(); err != nil {
		_ = s.ws.Remove(tmp, fsRemoveForce)
		if errors.Is(err, errWarned) {
			return s.fail("%s: not written: the client could not send all of it", dest)
		}
		return err
	}
	if werr == nil {
		werr = s.ws.Chmod(tmp, perm)
	}
	if werr == nil {
		werr = s.ws.Rename(tmp, dest)
	}
	if werr != nil {
		_ = s.ws.Remove(tmp, fsRemoveForce)
		return s.fail("%s: %s", dest, reason(werr))
	}
	if t != nil {
		if err := s.ws.Chtimes(dest, t.atime, t.mtime); err != nil {
			return s.fail("%s: set times: %s", dest, reason(err))
		}
	}
	return s.ack()
}

// tempName is a fresh name beside p for an upload in progress: hidden, and
// within a file name's 255 bytes.
func tempName(p string) string {
	var r [6]byte
	_, _ = rand.Read(r[:])
	base := path.Base(p)
	if len(base) > 200 {
		base = base[:200]
	}
	return path.Join(path.Dir(p), ".scp-"+hex.EncodeToString(r[:])+"-"+base)
}

// parseEntry parses the rest of a C or D record: "0644 123 name".
func parseEntry(rec string) (fs.FileMode, int64, string, error) {
	if len(rec) < 5 || rec[4] != ' ' {
		return 0, 0, "", errors.New("bad mode")
	}
	m, err := strconv.ParseUint(rec[:4], 8, 32)
	if err != nil {
		return 0, 0, "", errors.New("bad mode")
	}
	rest := rec[5:]
	sp := strings.IndexByte(rest, ' ')
	if sp <= 0 {
		return 0, 0, "", errors.New("size not delimited")
	}
	for _, c := range rest[:sp] {
		if c < '0' || c > '9' {
			return 0, 0, "", errors.New("bad size")
		}
	}
	size, err := strconv.ParseInt(rest[:sp], 10, 64)
	if err != nil {
		return 0, 0, "", errors.New("size out of range")
	}
	return fs.FileMode(m), size, rest[sp+1:], nil
}

// parseTimes parses the rest of a T record: "mtime 0 atime 0" (seconds and
// microseconds).
func parseTimes(rec string) (times, error) {
	f := strings.Split(rec, " ")
	if len(f) != 4 {
		return times{}, errors.New("bad T record")
	}
	var v [4]int64
	for i, x := range f {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil || n < 0 {
			return times{}, errors.New("bad T record")
		}
		v[i] = n
	}
	if v[1] >= 1e6 || v[3] >= 1e6 || v[0] > 1<<40 || v[2] > 1<<40 {
		return times{}, errors.New("the T record is out of range")
	}
	return times{mtime: time.Unix(v[0], v[1]*1000), atime: time.Unix(v[2], v[3]*1000)}, nil
}

// checkName refuses a record name that is not one path element. "." is
// the target itself (what "scp -r host:. dir" sends), as in OpenSSH.
func checkName(name string) error {
	if name == "" || name == ".." || strings.ContainsAny(name, "/\x00") {
		return errors.New("not a file name")
	}
	return nil
}

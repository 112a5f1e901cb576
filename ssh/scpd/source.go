package scpd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// source serves `scp -f PATH...`: we send records, the client writes.
func (s *Session) source() error {
	// The client (the sink) speaks first: one status byte, ready.
	if err := s.response(); err != nil {
		return err
	}
	for i, p := range s.cmd.Paths {
		paths := []string{p}
		if pat := s.cmd.Patterns[i]; pat != "" {
			m, err := expandGlob(s.ctx, s.ws, pat)
			if err != nil {
				if err := s.fail("%v", err); err != nil {
					return err
				}
				continue
			}
			if m != nil {
				paths = m
			}
		}
		for _, p := range paths {
			if err := s.sendPath(p, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// sendPath sends a file, or with -r a directory, and reports a failure to
// the client as a warning. Only an error that ends the session is returned.
func (s *Session) sendPath(p string, depth int) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	if strings.Contains(recordName(p), "\n") {
		// Its record would end at the newline, and the client would read
		// the rest of the name and the data as records we never meant.
		return s.fail("%q: skipping, filename contains a newline", p)
	}
	info, err := s.ws.Stat(p)
	if err != nil {
		return s.fail("%s: %s", p, reason(err))
	}
	switch {
	case info.IsDir() && s.cmd.Recursive:
		if depth >= MaxDepth {
			return s.fail("%s: directories nested more than %d deep", p, MaxDepth)
		}
		return s.sendDir(p, info, depth)
	case !info.Mode.IsRegular():
		return s.fail("%s: not a regular file", p)
	}
	return s.sendFile(p)
}

// sendFile sends one regular file.
func (s *Session) sendFile(p string) error {
	f, err := s.ws.OpenFile(p, os.O_RDONLY, 0)
	if err != nil {
		return s.fail("%s: %s", p, reason(err))
	}
	defer f.Close()
	// The size announced is the size of what was opened, not of the name
	// stat-ed before (it may have been replaced since).
	info, err := f.Stat()
	if err != nil {
		return s.fail("%s: %s", p, reason(err))
	}
	if !info.Mode.IsRegular() {
		return s.fail("%s: not a regular file", p)
	}
	if err := s.sendTimes(info); err != nil {
		return ignoreWarned(err)
	}
	if _, err := fmt.Fprintf(s.w, "C%04o %d %s\n", info.Mode.Perm(), info.Size, recordName(p)); err != nil {
		return err
	}
	if err := s.response(); err != nil {
		return ignoreWarned(err)
	}
	// Exactly Size bytes go out whatever happens to the file meanwhile: a
	// file that shrank is padded with zeros and the transfer reported as
	// failed, so that the client stays in step.
	if s.buf == nil {
		s.buf = make([]byte, 32<<10)
	}
	var rerr error
	for left := info.Size; left > 0; {
		n := int64(len(s.buf))
		if n > left {
			n = left
		}
		chunk := s.buf[:n]
		if rerr == nil {
			if _, err := io.ReadFull(f, chunk); err != nil {
				rerr = err
				clear(chunk)
			}
		}
		if _, err := s.w.Write(chunk); err != nil {
			return err
		}
		left -= n
	}
	if rerr != nil {
		if errors.Is(rerr, io.ErrUnexpectedEOF) || errors.Is(rerr, io.EOF) {
			rerr = errors.New("file shrank while it was sent")
		}
		if err := s.fail("%s: %s", p, reason(rerr)); err != nil {
			return err
		}
	} else if err := s.ack(); err != nil {
		return err
	}
	return ignoreWarned(s.response())
}

// sendDir sends a directory and, depth first, what is in it.
func (s *Session) sendDir(p string, info fsops.Info, depth int) error {
	ents, err := s.ws.ReadDir(p)
	if err != nil {
		return s.fail("%s: %s", p, reason(err))
	}
	if err := s.sendTimes(info); err != nil {
		return ignoreWarned(err)
	}
	if _, err := fmt.Fprintf(s.w, "D%04o 0 %s\n", info.Mode.Perm(), recordName(p)); err != nil {
		return err
	}
	if err := s.response(); err != nil {
		return ignoreWarned(err)
	}
	for _, e := range ents {
		if err := s.sendPath(path.Join(p, e.Name), depth+1); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(s.w, "E\n"); err != nil {
		return err
	}
	return ignoreWarned(s.response())
}

// sendTimes sends the T record before a file or directory, with -p.
func (s *Session) sendTimes(info fsops.Info) error {
	if !s.cmd.Preserve {
		return nil
	}
	if _, err := fmt.Fprintf(s.w, "T%d 0 %d 0\n", info.ModTime.Unix(), info.AccessTime.Unix()); err != nil {
		return err
	}
	return s.response()
}

// recordName is the name a record carries: the path's last element, as
// typed. The workspace root ("/", "~", ".") is ".", which a client takes
// as "into the target itself", as it does from OpenSSH for "scp -r host:. dir".
func recordName(p string) string {
	name := path.Base(path.Clean("/" + p))
	if name == "/" {
		return "."
	}
	return name
}

// ignoreWarned drops errWarned: the client refused that one entry and the
// transfer goes on.
func ignoreWarned(err error) error {
	if errors.Is(err, errWarned) {
		return nil
	}
	return err
}

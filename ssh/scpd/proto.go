package scpd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"strings"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// Session serves one scp server command on one channel: rw is the channel
// (the client's records in, ours out).
type Session struct {
	ctx  context.Context
	ws   fsops.Workspace
	cmd  Command
	r    *bufio.Reader
	w    io.Writer
	log  *slog.Logger
	errs int // files that failed; the exit status is 1 when any did
	buf  []byte
}

// NewSession prepares cmd to be served on rw over ws. ctx ends it: its
// end should also close rw, which is what interrupts a blocked read.
func NewSession(ctx context.Context, ws fsops.Workspace, cmd Command, rw io.ReadWriter, log *slog.Logger) *Session {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Session{ctx: ctx, ws: ws, cmd: cmd, r: bufio.NewReaderSize(rw, 32<<10), w: rw, log: log}
}

// Serve runs the command to its end. It returns nil when the protocol ran
// to completion (even if some files failed: ExitCode says so) and the
// error that stopped it otherwise (the connection went away, the client
// broke the protocol, or it sent a fatal error).
func (s *Session) Serve() error {
	var err error
	if s.cmd.Sink {
		err = s.sink()
	} else {
		err = s.source()
	}
	if err != nil {
		s.errs++
	}
	return err
}

// ExitCode is the command's exit status once Serve returned: 0 when every
// file went through, 1 otherwise.
func (s *Session) ExitCode() int {
	if s.errs > 0 {
		return 1
	}
	return 0
}

// errFatal ends the session after a message the client has been sent.
var errFatal = errors.New("scp: fatal error")

// ack answers a record with success.
func (s *Session) ack() error {
	_, err := s.w.Write([]byte{0})
	return err
}

// fail answers with a warning the client prints ("scp: " + msg), and counts
// it. The session goes on; the client decides whether to.
func (s *Session) fail(format string, args ...any) error {
	s.errs++
	msg := fmt.Sprintf(format, args...)
	s.log.Debug("scp: refused", "msg", msg)
	_, err := io.WriteString(s.w, "\x01scp: "+strings.ReplaceAll(msg, "\n", " ")+"\n")
	return err
}

// fatal sends msg as fail does and ends the session.
func (s *Session) fatal(format string, args ...any) error {
	if err := s.fail(format, args...); err != nil {
		return err
	}
	s.errs-- // counted again by Serve
	return fmt.Errorf("%w: %s", errFatal, fmt.Sprintf(format, args...))
}

// readLine reads one record up to its newline (not included), at most
// MaxLineBytes. io.EOF only when nothing was read.
func (s *Session) readLine() (string, error) {
	var b strings.Builder
	for {
		frag, err := s.r.ReadSlice('\n')
		if b.Len()+len(frag) > MaxLineBytes {
			return "", fmt.Errorf("%w: a record longer than %d bytes", errProtocol, MaxLineBytes)
		}
		b.Write(frag)
		switch {
		case err == nil:
			line := b.String()
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && b.Len() > 0:
			return "", io.ErrUnexpectedEOF
		default:
			return "", err
		}
	}
}

// errProtocol is a client that does not speak the protocol.
var errProtocol = errors.New("protocol error")

// response reads the client's answer to one of our records: nil for 0,
// errWarned for 1 (the client's message is logged and counted), a fatal
// error for 2 or anything else.
func (s *Session) response() error {
	c, err := s.r.ReadByte()
	if err != nil {
		return err
	}
	switch c {
	case 0:
		return nil
	case 1, 2:
		msg, err := s.readLine()
		if err != nil {
			return err
		}
		s.errs++
		s.log.Debug("scp: the client reported an error", "msg", msg)
		if c == 1 {
			return errWarned
		}
		return fmt.Errorf("%w: the client ended the transfer: %s", errFatal, msg)
	default:
		return fmt.Errorf("%w: answer byte %#x", errProtocol, c)
	}
}

// errWarned is a record the client refused with a warning: skip that
// file and go on.
var errWarned = errors.New("scp: refused by the client")

// reason words a workspace error as scp clients word system errors.
func reason(err error) string {
	switch {
	case errcode.Is(err, errcode.NotFound), errors.Is(err, fs.ErrNotExist):
		return "No such file or directory"
	case errcode.Is(err, errcode.IsADirectory):
		return "Is a directory"
	case errcode.Is(err, errcode.NotADirectory):
		return "Not a directory"
	case errcode.Is(err, errcode.PermissionDenied), errors.Is(err, fs.ErrPermission):
		return "Permission denied"
	case errcode.Is(err, errcode.PathEscapeAttempt):
		return "path leads outside the workspace"
	}
	var e *errcode.Error
	if errors.As(err, &e) && e.Msg != "" {
		return e.Msg
	}
	return err.Error()
}

var fsRemoveForce = fsops.RemoveOptions{Force: true}

func isNotExist(err error) bool {
	return errcode.Is(err, errcode.NotFound) || errors.Is(err, fs.ErrNotExist)
}

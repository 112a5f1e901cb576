package upstream

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Bounds of what an upstream's stderr may make the daemon hold or log.
const (
	stderrKeepLines  = 20      // the last lines kept for last_error
	stderrLineMax    = 1024    // longer lines are cut (and a partial line is flushed at this size)
	stderrLogPerSec  = 20      // lines logged per second per server; the rest are counted
	lastErrorMaxSize = 4 << 10 // last_error's size bound
)

// stderrSink is an upstream's stderr: each line goes to the daemon's log
// with the server's name (rate-limited, so a chatty server cannot flood the
// log) and the last lines are kept for /health's last_error.
type stderrSink struct {
	log *slog.Logger

	mu         sync.Mutex
	partial    []byte
	lines      []string
	window     time.Time
	inWindow   int
	suppressed int
}

func newStderrSink(log *slog.Logger) *stderrSink { return &stderrSink{log: log} }

func (s *stderrSink) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			room := stderrLineMax - len(s.partial)
			if len(b) < room {
				s.partial = append(s.partial, b...)
				return n, nil
			}
			s.partial = append(s.partial, b[:room]...)
			b = b[room:]
			s.line()
			continue
		}
		take := b[:i]
		if room := stderrLineMax - len(s.partial); len(take) > room {
			take = take[:room]
		}
		s.partial = append(s.partial, take...)
		b = b[i+1:]
		s.line()
	}
	return n, nil
}

// line ends the partial line: keep it, and log it unless over the rate.
func (s *stderrSink) line() {
	ln := strings.TrimRight(string(s.partial), "\r")
	s.partial = s.partial[:0]
	if ln == "" {
		return
	}
	s.lines = append(s.lines, ln)
	if len(s.lines) > stderrKeepLines {
		s.lines = s.lines[len(s.lines)-stderrKeepLines:]
	}
	now := time.Now()
	if now.Sub(s.window) >= time.Second {
		if s.suppressed > 0 {
			s.log.Warn("upstream stderr: lines not logged (over the rate limit)", "count", s.suppressed)
		}
		s.window, s.inWindow, s.suppressed = now, 0, 0
	}
	if s.inWindow >= stderrLogPerSec {
		s.suppressed++
		return
	}
	s.inWindow++
	s.log.Info("upstream stderr", "line", ln)
}

// last returns the last lines, joined and bounded (the newest kept).
func (s *stderrSink) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := strings.Join(s.lines, "\n")
	if len(out) > lastErrorMaxSize {
		out = out[len(out)-lastErrorMaxSize:]
	}
	return out
}

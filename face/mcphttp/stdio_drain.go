package mcphttp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
)

// stdioLedger counts the requests a stdio client has sent and the responses
// the server has written, so that EOF on stdin can wait for the answers.
//
// The go-sdk ends a stdio session as soon as its reader returns EOF, and the
// replies of requests still being handled are dropped. A client that writes
// its requests and closes stdin (a script, `printf ... | agent-backend
// --local-only`) would lose them, so the reader holds EOF back until every
// request read so far has been answered (or cancelled by the client).
type stdioLedger struct {
	mu        sync.Mutex
	requests  int           // requests read (with an id and a method)
	responses int           // responses written (with an id, no method)
	changed   chan struct{} // closed and replaced whenever responses grows
}

func newStdioLedger() *stdioLedger { return &stdioLedger{changed: make(chan struct{})} }

// message is the part of a JSON-RPC message the ledger needs.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// classify calls f for each message in one line (a batch is several).
func classify(line []byte, f func(message)) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	if line[0] == '[' {
		var batch []message
		if json.Unmarshal(line, &batch) == nil {
			for _, m := range batch {
				f(m)
			}
		}
		return
	}
	var m message
	if json.Unmarshal(line, &m) == nil {
		f(m)
	}
}

func (m message) hasID() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

func (l *stdioLedger) read(line []byte) {
	classify(line, func(m message) {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch {
		case m.hasID() && m.Method != "":
			l.requests++
		case m.Method == "notifications/cancelled":
			// A cancelled request may never be answered; stop waiting for it.
			l.requests--
			l.notifyLocked()
		}
	})
}

func (l *stdioLedger) wrote(line []byte) {
	classify(line, func(m message) {
		if m.hasID() && m.Method == "" {
			l.mu.Lock()
			l.responses++
			l.notifyLocked()
			l.mu.Unlock()
		}
	})
}

func (l *stdioLedger) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// waitAnswered blocks until every request read has been answered, or stop or
// ctx ends the wait.
func (l *stdioLedger) waitAnswered(ctx context.Context, stop <-chan struct{}) {
	for {
		l.mu.Lock()
		done, ch := l.responses >= l.requests, l.changed
		l.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-stop:
			return
		}
	}
}

// lineSplitter feeds complete lines of a byte stream to a callback.
type lineSplitter struct {
	partial []byte
	line    func([]byte)
}

func (s *lineSplitter) feed(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.partial = append(s.partial, p...)
			return
		}
		if len(s.partial) > 0 {
			s.line(append(s.partial, p[:i]...))
			s.partial = s.partial[:0]
		} else {
			s.line(p[:i])
		}
		p = p[i+1:]
	}
}

// drainingReader is stdin as the SDK sees it: it records requests and turns
// EOF into "EOF once everything read has been answered".
type drainingReader struct {
	io.ReadCloser
	ledger *stdioLedger
	split  lineSplitter
	ctx    context.Context
	stop   <-chan struct{}
}

func (r *drainingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.split.feed(p[:n])
	if err == io.EOF {
		if len(r.split.partial) > 0 { // a last request without a newline
			r.split.line(r.split.partial)
			r.split.partial = nil
		}
		r.ledger.waitAnswered(r.ctx, r.stop)
	}
	return n, err
}

// countingWriter is stdout: it records the responses written, and gives the
// SDK's refusal of a request before initialize a JSON-RPC code
// (fixUninitialized).
type countingWriter struct {
	io.Writer
	split lineSplitter
}

func (w *countingWriter) Write(p []byte) (int, error) {
	out := fixUninitialized(p)
	n, err := w.Writer.Write(out)
	w.split.feed(out[:n])
	if n == len(out) {
		n = len(p)
	} else if n >= len(p) { // a rewritten line cut short
		n = len(p) - 1
	}
	return n, err
}

func (w *countingWriter) Close() error { return nil }

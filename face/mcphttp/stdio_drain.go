package mcphttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/agentbe/agentbe-daemon/internal/jsonscan"
)

// stdioLedger records the requests a stdio client has sent that are not
// answered yet, by id, so that EOF on stdin can wait for their answers.
//
// The go-sdk ends a stdio session as soon as its reader returns EOF, and the
// replies of requests still being handled are dropped. A client that writes
// its requests and closes stdin (a script, `printf ... | agent-backend
// --local-only`) would lose them, so the reader holds EOF back until every
// request read so far has been answered (or cancelled by the client).
//
// Requests are matched to answers by id, as the SDK writes it back (idKey),
// not counted: a notifications/cancelled lets go of the request it names
// only (the call is answered all the same), and a request whose id is
// already waited for is not waited for twice (the SDK drops it unanswered).
type stdioLedger struct {
	mu      sync.Mutex
	pending map[string]struct{} // by idKey
	changed chan struct{}       // closed and replaced whenever pending shrinks
}

func newStdioLedger() *stdioLedger {
	return &stdioLedger{pending: map[string]struct{}{}, changed: make(chan struct{})}
}

// message is the part of a JSON-RPC message the ledger needs.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// idKey is the request id raw as the SDK reads it (a number becomes the
// integer it writes back, a string the string), and false for an id the
// SDK refuses (which ends the session).
func idKey(raw json.RawMessage) (string, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case float64:
		return "n" + strconv.FormatInt(int64(v), 10), true
	case string:
		return "s" + v, true
	}
	return "", false
}

// classify calls f for each message in one line (a batch is several). It
// reads each message's "id", "method" and "params" the way the SDK's decoder
// does (keys matched exactly, the last of a repeated key wins, a line that
// is not JSON or whose method is not a string is skipped whole) but skips
// every other value by scanning for its end instead of
// decoding it: a reply line holds the whole result (a 1 MiB file read is a
// 1 MiB line), and decoding it cost about as much as the SDK's own encoding
// of it. TestClassifyMatchesUnmarshal and FuzzClassify hold the equivalence.
//
// valid is whether the line is known to be JSON (the SDK's encoder wrote
// it); a line read from the client is checked with json.Valid first.
func classify(line []byte, valid bool, f func(message)) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || !valid && !json.Valid(line) {
		return
	}
	switch line[0] {
	case '[':
		var batch []message
		rest := skipSpace(line[1:])
		if len(rest) > 0 && rest[0] == ']' {
			return
		}
		for len(rest) > 0 {
			m, r, ok := scanMessage(rest)
			if !ok {
				return
			}
			batch = append(batch, m)
			if r = skipSpace(r); len(r) == 0 {
				return
			}
			if r[0] == ']' {
				break
			}
			if r[0] != ',' {
				return
			}
			rest = skipSpace(r[1:])
		}
		for _, m := range batch {
			f(m)
		}
	case '{':
		if m, _, ok := scanMessage(line); ok {
			f(m)
		}
	}
}

// scanMessage reads one message (an object, or null) at the start of b
// and returns it with what follows it; ok is false where json.Unmarshal
// into a message would fail.
func scanMessage(b []byte) (m message, rest []byte, ok bool) {
	if bytes.HasPrefix(b, []byte("null")) {
		return m, b[4:], true
	}
	if len(b) == 0 || b[0] != '{' {
		return m, nil, false
	}
	b = skipSpace(b[1:])
	if len(b) > 0 && b[0] == '}' {
		return m, b[1:], true
	}
	for {
		if len(b) == 0 || b[0] != '"' {
			return m, nil, false
		}
		key, r, ok := jsonscan.String(b)
		if !ok {
			return m, nil, false
		}
		r = skipSpace(r)
		if len(r) == 0 || r[0] != ':' {
			return m, nil, false
		}
		r = skipSpace(r[1:])
		val, after, ok := jsonscan.Value(r)
		if !ok {
			return m, nil, false
		}
		switch unquote(key) {
		case "id":
			m.ID = json.RawMessage(val)
		case "params":
			m.Params = json.RawMessage(val)
		case "method":
			switch {
			case val[0] == '"':
				m.Method = unquote(val)
			case string(val) != "null": // null leaves the field as it was
				return m, nil, false
			}
		}
		b = skipSpace(after)
		if len(b) == 0 {
			return m, nil, false
		}
		if b[0] == '}' {
			return m, b[1:], true
		}
		if b[0] != ',' {
			return m, nil, false
		}
		b = skipSpace(b[1:])
	}
}

// unquote is the value of the JSON string s (quotes included), as
// json.Unmarshal gives it (escapes decoded, invalid UTF-8 replaced).
func unquote(s []byte) string {
	if bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		return string(s[1 : len(s)-1])
	}
	var v string
	json.Unmarshal(s, &v)
	return v
}

func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	return b
}

func (m message) hasID() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

func (l *stdioLedger) read(line []byte) {
	classify(line, false, func(m message) {
		switch {
		case m.hasID() && m.Method != "":
			if key, ok := idKey(m.ID); ok {
				l.mu.Lock()
				l.pending[key] = struct{}{}
				l.mu.Unlock()
			}
		case m.Method == "notifications/cancelled":
			// A cancelled request may be answered late or not at all;
			// stop waiting for it.
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			if json.Unmarshal(m.Params, &p) == nil {
				l.answered(p.RequestID)
			}
		}
	})
}

func (l *stdioLedger) wrote(line []byte) {
	classify(line, true, func(m message) {
		if m.hasID() && m.Method == "" {
			l.answered(m.ID)
		}
	})
}

// answered lets go of the request with id, if it is waited for.
func (l *stdioLedger) answered(id json.RawMessage) {
	key, ok := idKey(id)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.pending[key]; ok {
		delete(l.pending, key)
		close(l.changed)
		l.changed = make(chan struct{})
	}
}

// waitAnswered blocks until every request read has been answered, or ctx,
// stop or failed (stdout failed: no answer can be written) ends the wait.
func (l *stdioLedger) waitAnswered(ctx context.Context, stop, failed <-chan struct{}) {
	for {
		l.mu.Lock()
		done, ch := len(l.pending) == 0, l.changed
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
		case <-failed:
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

// drainingReader is stdin as the SDK sees it: it records requests, hands
// each complete line to fast (the stdio fast path, stdio_fast.go), which
// may answer it so that the SDK never sees it, and turns EOF into "EOF once
// everything read has been answered".
type drainingReader struct {
	io.ReadCloser
	ledger *stdioLedger
	split  lineSplitter
	ctx    context.Context
	stop   <-chan struct{}
	failed <-chan struct{}        // closed once a write to stdout failed
	fast   func(line []byte) bool // nil: every line goes to the SDK

	buf     []byte // what the last read of stdin got
	out     []byte // bytes for the SDK, not yet read by it
	hold    []byte // the start of a line not complete yet (≤ stdioFastMaxLine)
	passing bool   // the current line was too long to hold: it goes through
	err     error  // the end of stdin, returned once out is drained
	waited  bool   // atEOF has run
}

func (r *drainingReader) Read(p []byte) (int, error) {
	if r.fast == nil {
		n, err := r.ReadCloser.Read(p)
		r.split.feed(p[:n])
		if err == io.EOF {
			r.atEOF()
		}
		return n, err
	}
	for len(r.out) == 0 {
		if r.err != nil {
			// Only once the SDK has read everything before it: the wait
			// is for the answers to what it read.
			if r.err == io.EOF && !r.waited {
				r.waited = true
				r.atEOF()
			}
			return 0, r.err
		}
		if r.buf == nil {
			r.buf = make([]byte, 32<<10)
		}
		n, err := r.ReadCloser.Read(r.buf)
		r.split.feed(r.buf[:n])
		r.take(r.buf[:n])
		if err != nil {
			if len(r.hold) > 0 { // a last line without a newline: the SDK's
				r.out = append(r.out, r.hold...)
				r.hold = r.hold[:0]
			}
			r.err = err
		}
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	if len(r.out) == 0 {
		r.out = r.out[:0:0] // let a large line's copy go
	}
	return n, nil
}

// take sorts what was read into lines the fast path answers and bytes for
// the SDK.
func (r *drainingReader) take(data []byte) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		seg := data
		if i >= 0 {
			seg = data[:i+1]
		}
		data = data[len(seg):]
		if r.passing {
			r.out = append(r.out, seg...)
			r.passing = i < 0
			continue
		}
		if i < 0 {
			if len(r.hold)+len(seg) > stdioFastMaxLine {
				r.out = append(append(r.out, r.hold...), seg...)
				r.hold = r.hold[:0]
				r.passing = true
			} else {
				r.hold = append(r.hold, seg...)
			}
			continue
		}
		line := seg
		if len(r.hold) > 0 {
			line = append(r.hold, seg...)
		}
		if !r.fast(line[:len(line)-1]) {
			r.out = append(r.out, line...)
		}
		r.hold = r.hold[:0]
	}
}

// atEOF records a last request without a newline and waits until every
// request read has been answered.
func (r *drainingReader) atEOF() {
	if len(r.split.partial) > 0 {
		r.split.line(r.split.partial)
		r.split.partial = nil
	}
	r.ledger.waitAnswered(r.ctx, r.stop, r.failed)
}

// countingWriter is stdout: it records the responses written, and gives the
// SDK's refusal of a request before initialize a JSON-RPC code
// (fixUninitialized).
//
// The SDK writes each message as one line in one Write; the fast path writes
// its replies from other goroutines, so one Write at a time holds lock to
// keep lines whole. A client that stops reading stdout blocks the write in
// progress, and with it every call's reply and the session's end (the SDK's
// close waits for its calls' writes): once the session is ended by the
// daemon (end: Close, or ServeStdio's context), a write still blocked is
// given up and every later one fails, so ServeStdio returns.
type countingWriter struct {
	io.Writer
	lock    chan struct{} // holds one token while a write is in progress
	ended   chan struct{} // closed by end
	endOnce sync.Once
	// failed is closed once a write fails (the client closed its end):
	// the answers waited for at EOF can no longer be written.
	failed   chan struct{}
	failOnce sync.Once
	split    lineSplitter
}

func newCountingWriter(w io.Writer) *countingWriter {
	return &countingWriter{Writer: w, lock: make(chan struct{}, 1), ended: make(chan struct{}), failed: make(chan struct{})}
}

// errStdoutGivenUp is a write's error once the session has ended with
// stdout blocked.
var errStdoutGivenUp = errors.New("mcphttp: stdio session ended; stdout not written")

// end gives up the write blocked on stdout, if any, and any later one.
func (w *countingWriter) end() { w.endOnce.Do(func() { close(w.ended) }) }

type writeResult struct {
	n   int
	err error
}

func (w *countingWriter) Write(p []byte) (int, error) {
	select {
	case w.lock <- struct{}{}:
	case <-w.ended:
		return 0, errStdoutGivenUp
	}
	out := fixUninitialized(p)
	done := make(chan writeResult, 1)
	go func() {
		n, err := w.Writer.Write(out)
		done <- writeResult{n, err}
	}()
	var r writeResult
	select {
	case r = <-done:
	case <-w.ended:
		// The token stays taken: the given-up write may still end, and no
		// line may be written after a part of it.
		return 0, errStdoutGivenUp
	}
	w.split.feed(out[:r.n])
	if r.err != nil {
		w.failOnce.Do(func() { close(w.failed) })
	}
	<-w.lock
	n := r.n
	if n == len(out) {
		n = len(p)
	} else if n >= len(p) { // a rewritten line cut short
		n = len(p) - 1
	}
	return n, r.err
}

func (w *countingWriter) Close() error { return nil }

package mcphttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"sync"

	"github.com/agentbe/agentbe-daemon/internal/jsonscan"
	"github.com/agentbe/agentbe-daemon/internal/jsonstr"
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
//
// The ledger is also the session's in-flight cap: a line whose requests
// would take it past limit requests waiting for answers is refused whole
// (read), where a client over HTTP gets 429 past --max-inflight-per-ip.
//
// An answer is counted in two steps. Its id leaves pending as its write to
// stdout begins, before the client can have read it, so a client that sends
// its next request the moment it reads an answer finds the room that answer
// made. The EOF wait, though, lasts until that write has ended too
// (writing), or the session would end with the answer still unwritten.
type stdioLedger struct {
	mu      sync.Mutex
	pending map[string]struct{} // by idKey
	writing int                 // writes to stdout begun and not ended
	changed chan struct{}       // closed and replaced whenever pending or writing shrinks
	limit   int                 // requests waiting for answers at most; 0: no cap
}

func newStdioLedger(limit int) *stdioLedger {
	return &stdioLedger{pending: map[string]struct{}{}, changed: make(chan struct{}), limit: max(limit, 0)}
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
		switch jsonscan.Text(key) {
		case "id":
			m.ID = json.RawMessage(val)
		case "params":
			m.Params = json.RawMessage(val)
		case "method":
			switch {
			case val[0] == '"':
				m.Method = jsonscan.Text(val)
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

func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	return b
}

func (m message) hasID() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

// read records the requests of one line read from the client, and applies
// its notifications/cancelled. refused is nil where the line is let
// through; otherwise the line would take the session past limit requests
// waiting for answers, nothing of it is recorded, and refused holds the
// ids of its new requests (ids already waited for are left out: the SDK
// drops such a request unanswered). batch reports a batch line. inUse
// reports a line that is one request whose id was already waited for: the
// caller drops it unanswered, as the SDK drops a request whose id is in
// use, since the request holding the id may run on the other path (the
// fast path and the SDK each know only their own ids).
func (l *stdioLedger) read(line []byte) (refused []string, batch, inUse bool) {
	// The line's requests and cancellations, in order, read before the
	// lock is taken (a line may be megabytes long).
	type op struct {
		key    string
		cancel bool
	}
	var buf [4]op
	ops := buf[:0]
	classify(line, false, func(m message) {
		switch {
		case m.hasID() && m.Method != "":
			if key, ok := idKey(m.ID); ok {
				ops = append(ops, op{key: key})
			}
		case m.Method == "notifications/cancelled":
			// A cancelled request may be answered late or not at all;
			// stop waiting for it.
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			if json.Unmarshal(m.Params, &p) == nil {
				if key, ok := idKey(p.RequestID); ok {
					ops = append(ops, op{key: key, cancel: true})
				}
			}
		}
	})
	if len(ops) == 0 {
		return nil, false, false
	}
	batch = isBatch(line)
	type change struct {
		key string
		was bool // whether key was waited for before the change
	}
	var changes []change
	shrank, added := false, 0
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(ops) == 1 && !batch && !ops[0].cancel {
		_, inUse = l.pending[ops[0].key]
	}
	for _, o := range ops {
		_, waited := l.pending[o.key]
		switch {
		case !o.cancel && !waited:
			l.pending[o.key] = struct{}{}
			changes = append(changes, change{o.key, false})
			added++
		case o.cancel && waited:
			delete(l.pending, o.key)
			changes = append(changes, change{o.key, true})
			shrank = true
		}
	}
	if l.limit == 0 || len(l.pending) <= l.limit || added == 0 {
		if shrank {
			l.signal()
		}
		return nil, batch, inUse
	}
	for i := len(changes) - 1; i >= 0; i-- { // undo, newest first
		if c := changes[i]; c.was {
			l.pending[c.key] = struct{}{}
		} else {
			delete(l.pending, c.key)
		}
	}
	// A key is added twice only when the line cancels it in between; the
	// set keeps this linear in the line (a batch may hold a million).
	listed := make(map[string]struct{}, added)
	for _, c := range changes {
		if _, dup := listed[c.key]; !c.was && !dup {
			listed[c.key] = struct{}{}
			refused = append(refused, c.key)
		}
	}
	return refused, batch, false
}

// isBatch reports whether line is a JSON-RPC batch (an array).
func isBatch(line []byte) bool {
	t := bytes.TrimLeft(line, " \t\r\n")
	return len(t) > 0 && t[0] == '['
}

// waiting reports whether the request with ledger key key waits for its
// answer.
func (l *stdioLedger) waiting(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.pending[key]
	return ok
}

// full reports whether the session has limit requests waiting for answers.
func (l *stdioLedger) full() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit > 0 && len(l.pending) >= l.limit
}

// writeBegins counts a write to stdout begun; writeEnds its end, whatever
// became of it.
func (l *stdioLedger) writeBegins() {
	l.mu.Lock()
	l.writing++
	l.mu.Unlock()
}

func (l *stdioLedger) writeEnds() {
	l.mu.Lock()
	l.writing--
	l.signal()
	l.mu.Unlock()
}

// wrote lets go of the requests a line written to stdout answers; it is
// called as the line's write begins.
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
		l.signal()
	}
}

// signal wakes waitAnswered after pending shrank; l.mu is held.
func (l *stdioLedger) signal() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// waitAnswered blocks until every request read has been answered and its
// answer written, or ctx, stop or failed (stdout failed: no answer can be
// written) ends the wait.
func (l *stdioLedger) waitAnswered(ctx context.Context, stop, failed <-chan struct{}) {
	for {
		l.mu.Lock()
		done, ch := len(l.pending) == 0 && l.writing == 0, l.changed
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

// drainingReader is stdin as the SDK sees it: it records requests in the
// ledger, refuses a line past the session's in-flight cap (refuse writes
// the answers), hands each other complete line to fast (the stdio fast
// path, stdio_fast.go), which may answer it so that the SDK never sees it,
// and turns EOF into "EOF once everything read has been answered".
type drainingReader struct {
	io.ReadCloser
	ledger *stdioLedger
	ctx    context.Context
	stop   <-chan struct{}
	failed <-chan struct{}        // closed once a write to stdout failed
	fast   func(line []byte) bool // answers a line, or reports false
	refuse func(ids []string, batch bool)
	// maxLine is the longest line held, its newline not counted (0: no
	// bound). A longer one is discarded, and answered by tooLong with the
	// ledger key of its id ("" for null, longLineKey) once its end is read.
	maxLine int
	tooLong func(key string)

	buf     []byte // what the last read of stdin got
	out     []byte // bytes for the SDK, not yet read by it
	hold    []byte // the start of a line not complete yet
	discard bool   // the rest of an over-long line is being skipped
	longKey string // the key of that line's id, "" for null
	err     error  // the end of stdin, returned once out is drained
	waited  bool   // the EOF wait has run
}

func (r *drainingReader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			// Only once the SDK has read everything before it: the wait
			// is for the answers to what it read.
			if r.err == io.EOF && !r.waited {
				r.waited = true
				r.ledger.waitAnswered(r.ctx, r.stop, r.failed)
			}
			return 0, r.err
		}
		if r.buf == nil {
			r.buf = make([]byte, 32<<10)
		}
		n, err := r.ReadCloser.Read(r.buf)
		r.take(r.buf[:n])
		if err != nil {
			// A last line without a newline: the SDK's, or answered
			// as too long.
			if r.discard {
				r.endLong()
			} else if len(r.hold) > 0 && !blank(r.hold) {
				if ids, batch, inUse := r.ledger.read(r.hold); ids != nil {
					r.refuse(ids, batch)
				} else if !inUse {
					r.out = append(r.out, r.hold...)
				}
			}
			r.hold = nil
			r.err = err
		}
	}
	// At most one line per Read: the SDK's own bound (sdkLineLimit) counts
	// the bytes it reads for a message, so it counts that message's line.
	out := r.out[:min(len(p), len(r.out))]
	if i := bytes.IndexByte(out, '\n'); i >= 0 {
		out = out[:i+1]
	}
	n := copy(p, out)
	r.out = r.out[n:]
	if len(r.out) == 0 {
		r.out = r.out[:0:0] // let a large line's copy go
	}
	return n, nil
}

// take sorts what was read into lines refused, lines dropped (one request
// whose id is in use, stdioLedger.read), lines the fast path answers and
// bytes for the SDK. Every line is held whole and judged
// against the session's in-flight cap before any of it goes on: a line
// passed on as it arrived could put any number of requests (a batch) in
// flight past the cap. Holding it costs no more than the SDK's own copy of
// it, which it decodes whole. A line longer than stdioFastMaxLine goes to
// the SDK.
//
// A line longer than maxLine is never held whole: once maxLine of its
// bytes are held, its id is read from them (longLineKey) and they are let
// go; the rest of it, up to its newline, is skipped as it arrives, and
// then it is answered (tooLong). Nothing of it runs. The answer waits for
// the line's end (or EOF) so that it comes after what the client sent
// before it and is written while the client is no longer writing: a
// client that writes its line whole before it reads anything is not left
// blocked against an answer it does not read yet. A line of blanks only (spaces, tabs,
// carriage returns) is dropped: JSON reads it as the space between two
// messages, and the SDK would hold a flood of them.
func (r *drainingReader) take(data []byte) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if r.discard {
			if i < 0 {
				return
			}
			data = data[i+1:]
			r.endLong()
			continue
		}
		if r.maxLine > 0 {
			n := i // the line's bytes in data
			if i < 0 {
				n = len(data)
			}
			if len(r.hold)+n > r.maxLine {
				r.startLong(data[:r.maxLine-len(r.hold)])
				if i < 0 {
					return
				}
				data = data[i+1:]
				r.endLong()
				continue
			}
		}
		if i < 0 {
			r.hold = append(r.hold, data...)
			return
		}
		seg := data[:i+1]
		data = data[i+1:]
		held := len(r.hold) > 0
		line := seg
		if held {
			line = append(r.hold, seg...)
		}
		body := line[:len(line)-1]
		if blank(body) {
			r.releaseHold()
			continue
		}
		if ids, batch, inUse := r.ledger.read(body); ids != nil {
			r.refuse(ids, batch)
		} else if !inUse && (len(body) > stdioFastMaxLine || !r.fast(body)) {
			if held && len(r.out) == 0 {
				// The held line itself goes to the SDK: no second copy.
				r.out, r.hold = line, nil
				continue
			}
			r.out = append(r.out, line...)
		}
		r.releaseHold()
	}
}

// startLong begins to discard the line held in hold, of which more are the
// bytes that take it to maxLine: it reads the line's id from those maxLine
// bytes and lets go of them.
func (r *drainingReader) startLong(more []byte) {
	r.hold = append(r.hold, more...)
	r.longKey = longLineKey(r.hold)
	r.releaseHold()
	r.discard = true
}

// endLong answers the over-long line whose end was read. Its id is the
// one startLong read, unless the ledger waits for an answer under it (an
// answer under that id would end the other request's wait): then null.
func (r *drainingReader) endLong() {
	key := r.longKey
	if key != "" && r.ledger.waiting(key) {
		key = ""
	}
	r.discard, r.longKey = false, ""
	r.tooLong(key)
}

// releaseHold empties hold, and lets a long line's buffer go.
func (r *drainingReader) releaseHold() {
	r.hold = r.hold[:0]
	if cap(r.hold) > stdioFastMaxLine {
		r.hold = nil
	}
}

// blank reports whether line holds nothing but spaces, tabs and carriage
// returns.
func blank(line []byte) bool {
	for _, c := range line {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// longLineKey is the ledger key (idKey) of the id of the request whose
// line starts with prefix, read as the ledger reads a whole line (keys
// matched exactly), from the members prefix holds whole; "" where there is
// none to read: prefix does not start an object (a batch is answered
// once, with id null), it holds no "id" member whole, or no non-empty
// string "method" (without one the line may be the client's answer to the
// daemon's own request, whose id is not the client's to be answered under).
// A member past prefix that repeats "id" is not seen: the line is not run.
func longLineKey(prefix []byte) string {
	t := bytes.TrimLeft(prefix, " \t\r")
	if len(t) == 0 || t[0] != '{' {
		return ""
	}
	var id []byte
	method := false
	jsonscan.Keys(t, func(k string, v []byte) bool {
		// A number, true, false or null that ends prefix may be cut short.
		if c := v[0]; c != '"' && c != '{' && c != '[' && len(t)-(cap(t)-cap(v)) == len(v) {
			return false
		}
		switch k {
		case "id":
			id = v
		case "method":
			method = v[0] == '"' && jsonscan.Text(v) != ""
		}
		return true
	})
	if id == nil || !method {
		return ""
	}
	key, _ := idKey(id)
	return key
}

// countingWriter is stdout: it records the responses written in the
// session's ledger (as each write begins, see stdioLedger), and gives the
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
	ledger   *stdioLedger
	split    lineSplitter // feeds ledger.wrote
}

func newCountingWriter(w io.Writer, ledger *stdioLedger) *countingWriter {
	cw := &countingWriter{Writer: w, lock: make(chan struct{}, 1), ended: make(chan struct{}), failed: make(chan struct{}), ledger: ledger}
	cw.split.line = ledger.wrote
	return cw
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
	w.ledger.writeBegins()
	defer w.ledger.writeEnds()
	w.split.feed(out)
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

// sdkLineSlack is what the SDK's own bound on a message (IOTransport's
// MaxLineLength, sdkLineLimit) allows past maxLine: the newline, and room.
const sdkLineSlack = 4 << 10

// sdkLineLimit is the SDK's bound for a session whose lines are at most
// maxLine long (-1, none, where they are not bounded). drainingReader hands
// the SDK one line per Read and no blank lines, so for a message on one
// line the SDK counts that line, which drainingReader has bounded already;
// its bound ends only a session whose message spans lines (JSON with
// newlines between its tokens) past maxLine, as the SDK ends it.
func sdkLineLimit(maxLine int) int {
	if maxLine <= 0 {
		return -1
	}
	return maxLine + sdkLineSlack
}

// refuseStdioLong answers a line longer than s.maxLine: JSON-RPC error
// -32600 under its id (a ledger key, longLineKey), or null.
func (s *Server) refuseStdioLong(w io.Writer, key string) {
	s.warns.Warn(s.log, "stdio-line", "stdio line longer than --max-stdio-line-bytes; answered -32600 and skipped", "limit", s.maxLine)
	msg := "request too large: a stdio line may be at most " + strconv.Itoa(s.maxLine) + " bytes (--max-stdio-line-bytes); this one was longer, and none of it was read. Write large files in parts, or raise --max-stdio-line-bytes"
	b := append(appendKeyID([]byte(`{"jsonrpc":"2.0","id":`), key), `,"error":{"code":-32600,"message":`...)
	b = jsonstr.Append(b, msg)
	w.Write(append(b, "}}\n"...))
}

// appendKeyID appends the id whose ledger key is key as the SDK writes it
// back, and null for "".
func appendKeyID(b []byte, key string) []byte {
	switch {
	case key == "":
		return append(b, "null"...)
	case key[0] == 'n':
		return append(b, key[1:]...)
	}
	return jsonstr.AppendNoHTML(b, key[1:])
}

// refuseStdioBusy answers the requests of a line refused at the session's
// in-flight cap: JSON-RPC error -32000 for each id (ledger keys), one
// array for a batch, as the SDK answers a batch.
func (s *Server) refuseStdioBusy(w io.Writer, ids []string, batch bool) {
	s.warns.Warn(s.log, "stdio-inflight", "stdio session has too many requests waiting for answers; answered -32000", "limit", s.stdioMaxInflight)
	msg := "busy: this session has " + strconv.Itoa(s.stdioMaxInflight) + " requests waiting for answers (--max-inflight-per-ip); wait for an answer, then send it again"
	var b []byte
	if batch {
		b = append(b, '[')
	}
	for i, key := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendKeyID(append(b, `{"jsonrpc":"2.0","id":`...), key)
		b = append(b, `,"error":{"code":-32000,"message":`...)
		b = jsonstr.Append(b, msg)
		b = append(b, "}}"...)
	}
	if batch {
		b = append(b, ']')
	}
	w.Write(append(b, '\n'))
}

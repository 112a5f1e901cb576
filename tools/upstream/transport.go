package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxMessage bounds one message from an upstream (one line of its
// stdout): the daemon's own largest reply (--max-reply-bytes' default).
const DefaultMaxMessage = 32 << 20

// codeMessageTooLarge is the JSON-RPC error code of the answer the
// connection makes up for a call whose real answer was over the limit (in
// the range JSON-RPC leaves to implementations).
const codeMessageTooLarge = -32090

// transport is the MCP client's connection to one upstream: newline-
// delimited JSON-RPC over its stdin and stdout, as the go-sdk's IOTransport
// speaks it, but framed here so that the daemon's limit is the only one (the
// SDK's line cap, 16 MiB, would end the session below it) and a message over
// it costs only itself:
//
//   - a line over max bytes is read to its end without being kept; an
//     answer (it has an id and no method) becomes an error answer to that
//     call, naming the limit; a request from the server is answered with
//     that error; a notification is dropped; the session goes on.
//   - the stream ending for any reason (the process's stdout closed, a line
//     that is not JSON-RPC, an oversized line that is not a message with an
//     id, a write that cannot complete) closes dead at once, so the
//     supervisor sees it without waiting for a ping.
//
// The transport reads the upstream's stdout itself, on the session's
// reader goroutine (conn.Read): the pipe is the process's own
// (sandbox.StdoutPipe), so no goroutine of the sandbox copies the output
// and hands each message on: such a copier costs every answer one more
// goroutine hand-off (docs/performance.md, "The routed upstream call").
type transport struct {
	r   io.ReadCloser  // the upstream's stdout
	w   io.WriteCloser // its stdin
	max int
	log *slog.Logger
	// writeTimeout bounds every write to the upstream's stdin, whatever
	// its context (0: none). The SDK writes its answers to the server's
	// requests and its notifications with a context that never ends; one
	// such write blocked on a server that stopped reading its stdin held
	// the write lock for good, and every call and ping after it waited
	// behind it. The supervisor sets the ping timeout: a server that cannot
	// take a line in that time cannot answer a ping either.
	writeTimeout time.Duration

	// dead is closed, and err set, when the stream can carry no more.
	dead    chan struct{}
	deadErr error
	die     sync.Once
}

// newTransport is the transport that reads the upstream's stdout from r
// and writes its stdin to w.
func newTransport(r io.ReadCloser, w io.WriteCloser, max int, log *slog.Logger) *transport {
	return &transport{r: r, w: w, max: max, log: log, dead: make(chan struct{})}
}

// kill ends the stream for err (the first reason counts). A Read blocked
// on the upstream's stdout is woken (a read deadline in the past), so the
// session's calls fail at once when the stream breaks (a write to its
// stdin failed) instead of waiting for the process to go.
func (t *transport) kill(err error) {
	t.die.Do(func() {
		t.deadErr = err
		close(t.dead)
		if d, ok := t.r.(interface{ SetReadDeadline(time.Time) error }); ok {
			_ = d.SetReadDeadline(time.Unix(1, 0))
		}
	})
}

// err is why the stream ended (after dead is closed).
func (t *transport) err() error {
	<-t.dead
	return t.deadErr
}

// exited is called once the process has exited and was waited for: the
// sandbox does not wait for the stdout it hands out, so its last lines may
// still be unread. The session reads them to the end of the stream (its
// last answers arrive before its exit is seen) for at most grace, after
// which the stream is cut (a process that escaped the kill may hold it
// open); then the pipe is closed.
func (t *transport) exited(grace time.Duration) {
	timer := time.NewTimer(grace)
	select {
	case <-t.dead:
	case <-timer.C:
	}
	timer.Stop()
	t.kill(io.EOF)
	t.r.Close()
}

// Connect implements mcp.Transport; it is called once.
func (t *transport) Connect(context.Context) (mcp.Connection, error) {
	return &conn{t: t, fr: framer{max: t.max}, writing: make(chan struct{}, 1)}, nil
}

type conn struct {
	t *transport

	// Read's state: only the session's reader goroutine calls Read.
	fr    framer
	buf   []byte            // what is read from the pipe at a time
	queue []jsonrpc.Message // decoded, not yet returned: what one read (readSize bytes) or one batch line held
	eof   bool              // the pipe is at its end

	writing   chan struct{} // the write lock: one write at a time, waited for under the writer's context
	closeOnce sync.Once

	// asked counts the server's requests handed to the session and not
	// yet answered (Read adds, Write of an answer takes away); past
	// maxServerRequests more are dropped (dropped counts them). The SDK
	// queues what it reads for its one handler goroutine without a bound,
	// so a server sending requests while the answer to one is blocked (it
	// stopped reading its stdin) grew that queue for as long as the write
	// took: 600 MB for 200,000 requests within the 10 s bound on a write.
	asked   atomic.Int64
	dropped int
}

func (c *conn) SessionID() string { return "" }

// maxServerRequests is how many of a server's requests may wait for the
// daemon's answers at once; more are dropped unanswered (conn.asked).
const maxServerRequests = 64

// readSize is how much Read takes from the pipe at a time.
const readSize = 32 << 10

// take decodes one line (or takes an oversize) into the queue; an error
// kills the stream.
func (c *conn) take(line []byte, big *oversize) error {
	var msgs []jsonrpc.Message
	var err error
	if big != nil {
		msgs, err = c.oversized(big)
	} else {
		msgs, err = decodeLine(line)
	}
	if err != nil {
		c.t.kill(err)
		return err
	}
	c.queue = append(c.queue, msgs...)
	return nil
}

// oversized decides what a line over the limit becomes (see transport).
func (c *conn) oversized(big *oversize) ([]jsonrpc.Message, error) {
	limit := fmt.Sprintf("over the %s limit on one upstream message (it was %d bytes); the message was dropped", byteSize(c.t.max), big.size)
	var id jsonrpc.ID
	if big.id != nil {
		var raw any
		if err := json.Unmarshal(big.id, &raw); err == nil {
			id, _ = jsonrpc.MakeID(raw)
		}
	}
	switch {
	case big.method && id.IsValid():
		c.t.log.Warn("upstream sent a request over the message limit; answering it with an error", "limit", c.t.max, "bytes", big.size)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.asked.Add(1) // never handed to the session; Write takes it away
		if err := c.Write(ctx, &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: codeMessageTooLarge, Message: "request " + limit}}); err != nil {
			return nil, err
		}
		return nil, nil
	case big.method:
		c.t.log.Warn("upstream sent a notification over the message limit; dropped it", "limit", c.t.max, "bytes", big.size)
		return nil, nil
	case id.IsValid():
		c.t.log.Warn("upstream answered a call with a message over the limit; the call fails", "limit", c.t.max, "bytes", big.size)
		return []jsonrpc.Message{&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: codeMessageTooLarge, Message: "answer " + limit}}}, nil
	}
	return nil, fmt.Errorf("sent a message over the %s limit (%d bytes) that names no call", byteSize(c.t.max), big.size)
}

// decodeLine is one line's messages: one, or a batch (a JSON array).
func decodeLine(line []byte) ([]jsonrpc.Message, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil
	}
	if line[0] != '[' {
		m, err := decodeMessage(line)
		if err != nil {
			return nil, fmt.Errorf("sent a line that is not a JSON-RPC message: %w", err)
		}
		return []jsonrpc.Message{m}, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(line, &raws); err != nil || len(raws) == 0 {
		return nil, fmt.Errorf("sent a line that is not a JSON-RPC batch: %v", err)
	}
	msgs := make([]jsonrpc.Message, 0, len(raws))
	for _, raw := range raws {
		m, err := decodeMessage(raw)
		if err != nil {
			return nil, fmt.Errorf("sent a batch with a message that is not JSON-RPC: %w", err)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// Read returns the upstream's next message, reading its stdout as needed:
// a line over the limit is read to its end without being kept (see
// transport), a batch is returned one message at a time. At the end of
// the stream (a last line without a newline counts) the stream is dead
// with io.EOF; a read error, a line that is not JSON-RPC, or a kill (a
// broken write, Close, exited) ends it with that reason.
func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		if len(c.queue) > 0 {
			m := c.queue[0]
			c.queue[0] = nil
			c.queue = c.queue[1:]
			if req, ok := m.(*jsonrpc.Request); ok && req.ID.IsValid() {
				if c.asked.Load() >= maxServerRequests {
					if c.dropped++; c.dropped&(c.dropped-1) == 0 { // 1, 2, 4, 8…
						c.t.log.Warn("upstream: a request from the server dropped unanswered: too many of its requests are waiting for answers", "limit", maxServerRequests, "dropped", c.dropped)
					}
					continue
				}
				c.asked.Add(1)
			}
			return m, nil
		}
		select {
		case <-c.t.dead:
			return nil, c.t.deadErr
		default:
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if c.eof {
			c.t.kill(io.EOF)
			return nil, c.t.err()
		}
		if c.buf == nil {
			c.buf = make([]byte, readSize)
		}
		n, err := c.t.r.Read(c.buf)
		if n > 0 {
			if c.fr.feed(c.buf[:n], c.take) != nil {
				return nil, c.t.err() // take killed the stream
			}
		}
		switch {
		case err == io.EOF:
			c.eof = true
			if c.fr.end(c.take) != nil {
				return nil, c.t.err()
			}
		case err != nil:
			c.t.kill(err) // or the kill that woke it is the reason
			return nil, c.t.err()
		}
	}
}

// writeGrace is how long a write may still be blocked after its context
// ended before the stream is broken for it.
const writeGrace = time.Second

// Write sends one message as a line. A write still blocked writeGrace after
// ctx ends, or after the transport's writeTimeout whatever ctx (the upstream stopped
// reading its stdin), breaks the stream: part of the line may be sent, so
// nothing after it could be framed. A write waiting for another to finish
// gives up when its own ctx ends, having sent nothing.
func (c *conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, ok := msg.(*jsonrpc.Response); ok {
		defer c.asked.Add(-1)
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("marshaling message: %w", err)
	}
	data = append(data, '\n')
	if d := c.t.writeTimeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, d, fmt.Errorf("no write to its stdin completed within %s", d))
		defer cancel()
	}
	select {
	case c.writing <- struct{}{}:
		defer func() { <-c.writing }()
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-c.t.dead:
		return c.t.deadErr
	}
	select {
	case <-c.t.dead:
		return c.t.deadErr
	default:
	}
	// The write is broken only if it is still blocked writeGrace after
	// ctx ended: ctx may end (a caller gone) the moment after the line
	// was written, before the write could say so, and breaking the
	// stream then would restart a server that reads its stdin.
	var state atomic.Int32 // writing, done, or broken
	const (
		writing = iota
		done
		broken
	)
	stop := context.AfterFunc(ctx, func() {
		time.AfterFunc(writeGrace, func() {
			if state.CompareAndSwap(writing, broken) {
				c.t.kill(fmt.Errorf("stopped reading its stdin (a write was still blocked when it had to end: %v)", context.Cause(ctx)))
				c.t.w.Close()
			}
		})
	})
	_, err = c.t.w.Write(data)
	stop()
	if !state.CompareAndSwap(writing, done) {
		return c.t.err()
	}
	if err != nil {
		err = fmt.Errorf("writing to its stdin: %w", err)
		c.t.kill(err)
	}
	return err
}

// Close ends the connection (both pipes); the stream is dead from then on.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.t.kill(mcp.ErrConnectionClosed)
		c.t.r.Close()
		c.t.w.Close()
	})
	return nil
}

// pipeWriter is an upstream's stdin as the sandbox hands it out
// (sandbox.StdinPipe). A write that finds the pipe closed, by the process
// (EPIPE: it closed its stdin, or exited) or on our side (os.ErrClosed:
// the process was waited for, or the connection closed), fails with
// io.ErrClosedPipe, so the supervisor reads it as the pipes closing
// (pipesClosed) and not as a broken stream.
type pipeWriter struct{ f *os.File }

func (w pipeWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil && (errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed)) {
		err = fmt.Errorf("%w (%v)", io.ErrClosedPipe, err)
	}
	return n, err
}

func (w pipeWriter) Close() error { return w.f.Close() }

// byteSize writes n as "32 MiB", "64 KiB" or "1000 bytes".
func byteSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// framer cuts a stream, pushed to it in pieces, into lines of at most max
// bytes (the newline not counted) and holds at most one line: its buffer
// grows with the line, doubling, to max bytes and never past it; a line
// that arrives whole in one piece is not copied at all. A longer line is
// read to its end without being kept (only its top-level "id" and whether
// it has a "method" are noted) and given as an oversize.
type framer struct {
	max  int
	buf  []byte     // the line so far, when it spans pieces
	size int        // its length so far
	scan *idScanner // set once the line is over max
}

// oversize is what is known of a line over the limit.
type oversize struct {
	size   int
	id     json.RawMessage // the top-level "id" value, nil if none was found
	method bool            // a top-level "method" key: a request or notification
}

// frameKeep is the buffer a framer keeps between lines; a larger one
// (grown for a large message) is let go once that message is decoded.
const frameKeep = 64 << 10

// feed cuts p into lines and calls emit with each line it completes (valid
// until emit returns) or each oversize, in order; it stops at emit's
// first error and returns it.
func (f *framer) feed(p []byte, emit func(line []byte, big *oversize) error) error {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			f.add(p)
			return nil
		}
		if f.size == 0 && f.scan == nil && i <= f.max {
			// A whole line in this piece: given as it lies.
			if err := emit(p[:i], nil); err != nil {
				return err
			}
		} else {
			f.add(p[:i])
			if err := f.finish(emit); err != nil {
				return err
			}
		}
		p = p[i+1:]
	}
	return nil
}

// end gives a last line that had no newline, if any.
func (f *framer) end(emit func(line []byte, big *oversize) error) error {
	if f.size == 0 && f.scan == nil {
		return nil
	}
	return f.finish(emit)
}

// add appends a piece of the current line, or scans it once the line is
// over max.
func (f *framer) add(p []byte) {
	f.size += len(p)
	switch {
	case f.scan != nil:
		f.scan.feed(p)
	case f.size > f.max:
		// From here the line is only scanned, not kept.
		f.scan = &idScanner{}
		f.scan.feed(f.buf)
		f.scan.feed(p)
		f.buf = nil
	default:
		if need := len(f.buf) + len(p); need > cap(f.buf) {
			nb := make([]byte, len(f.buf), min(max(need, 2*cap(f.buf), 4<<10), f.max))
			copy(nb, f.buf)
			f.buf = nb
		}
		f.buf = append(f.buf, p...)
	}
}

// finish gives the current line (or its oversize) to emit and starts the
// next, letting go of a buffer grown past frameKeep for a large message.
func (f *framer) finish(emit func(line []byte, big *oversize) error) error {
	var err error
	if f.scan != nil {
		err = emit(nil, &oversize{size: f.size, id: f.scan.id(), method: f.scan.method})
	} else {
		err = emit(f.buf, nil)
	}
	f.size, f.scan = 0, nil
	f.buf = f.buf[:0]
	if cap(f.buf) > frameKeep {
		f.buf = nil
	}
	return err
}

// idScanner follows the structure of a JSON object fed to it in pieces,
// without keeping it, and notes its top-level "id" value (up to 256 bytes)
// and whether it has a top-level "method".
type idScanner struct {
	depth    int
	inString bool
	escape   bool
	wantKey  bool // at depth 1, after '{' or ','
	inKey    bool
	key      []byte // the current top-level key (up to 16 bytes)
	afterKey bool   // a top-level key was read; ':' comes next
	inID     bool   // inside the top-level "id" value
	idBuf    []byte
	idBad    bool
	method   bool
}

func (s *idScanner) id() json.RawMessage {
	if s.idBad || len(s.idBuf) == 0 {
		return nil
	}
	return s.idBuf
}

func (s *idScanner) feed(p []byte) {
	for i := 0; i < len(p); i++ {
		if s.inString && !s.escape && !s.inID && !s.inKey {
			// Inside a string that is neither the id nor a key (a large
			// result is mostly one): skip to its next quote or backslash.
			j := bytes.IndexAny(p[i:], `"\`)
			if j < 0 {
				return
			}
			i += j
		}
		b := p[i]
		if s.inID {
			if len(s.idBuf) >= 256 {
				s.idBad = true
			} else if s.inString || (b != ' ' && b != '\t' && b != '\r' && b != '\n' && b != ',' && b != '}') {
				s.idBuf = append(s.idBuf, b)
			}
		}
		if s.inString {
			switch {
			case s.escape:
				s.escape = false
			case b == '\\':
				s.escape = true
			case b == '"':
				s.inString = false
				if s.inKey {
					s.inKey, s.afterKey = false, true
				}
			default:
				if s.inKey && len(s.key) < 16 {
					s.key = append(s.key, b)
				}
			}
			continue
		}
		switch b {
		case '"':
			s.inString = true
			if s.depth == 1 && s.wantKey {
				s.wantKey, s.inKey, s.key = false, true, s.key[:0]
			}
		case '{', '[':
			if s.inID {
				s.idBad = true // an id is a string, a number or null
			}
			s.depth++
			if s.depth == 1 {
				s.wantKey = b == '{'
			}
		case '}', ']':
			s.depth--
			if s.depth <= 1 {
				s.inID = false
			}
		case ':':
			if s.depth == 1 && s.afterKey {
				s.afterKey = false
				switch string(s.key) {
				case "id":
					s.inID, s.idBuf, s.idBad = true, s.idBuf[:0], false
				case "method":
					s.method = true
				}
			}
		case ',':
			if s.depth == 1 {
				s.inID, s.wantKey = false, true
			}
		}
	}
}

package admit

import (
	"bufio"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// ReplyStallTimeout is how long one write of a reply to an HTTP client (at
// most stallChunk bytes, or a flush) may take on every server of the
// project that serves the workspace. A client that sends a request and then
// stops reading its reply, or its SSE stream, would otherwise hold the
// handler's goroutine, its in-flight slot, its connection and the reply
// itself for as long as it likes: the servers set no write timeout, which
// would cut streams and long calls alike.
const ReplyStallTimeout = 30 * time.Second

// stallChunk is the most one write gives the client the stall timeout to
// take: a slow client that keeps reading gets a reply of any size.
const stallChunk = 64 << 10

// ReplyDeadline returns next with the reply's stall bound: each write to
// the client, in pieces of stallChunk, and each flush must make progress
// within d, or it fails (the connection's write deadline), the handler's
// later writes fail too, and the request ends. The deadline is set only
// around a write, so a quiet stream (an MCP session's GET, a long call
// that has written nothing yet) waits as long as it likes, and it is
// cleared after each, for the connection's next request and for a
// connection a WebSocket handshake takes over (Hijack).
func ReplyDeadline(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &stallWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
		defer sw.finish()
		next.ServeHTTP(sw, r)
	})
}

// stallWriter is the ResponseWriter ReplyDeadline hands its handler.
type stallWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
	// wrote: something may wait in net/http's buffer (an MCP session's
	// stream is written by the SDK's goroutines, hence atomic).
	wrote    atomic.Bool
	hijacked atomic.Bool
}

func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// around runs f with the connection's write deadline set (where the
// connection has one: a recorder has none, and then f runs without).
func (w *stallWriter) around(f func() error) error {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	err := f()
	_ = w.rc.SetWriteDeadline(time.Time{})
	return err
}

func (w *stallWriter) Write(p []byte) (int, error) {
	w.wrote.Store(true)
	n := 0
	for len(p) > 0 {
		piece := p[:min(len(p), stallChunk)]
		var m int
		err := w.around(func() (err error) {
			m, err = w.ResponseWriter.Write(piece)
			return err
		})
		n += m
		if err != nil {
			return n, err
		}
		p = p[m:]
	}
	return n, nil
}

// FlushError is what http.ResponseController.Flush calls (an SSE reply
// flushes each event so).
func (w *stallWriter) FlushError() error { return w.around(w.rc.Flush) }

func (w *stallWriter) Flush() { _ = w.FlushError() }

// Hijack hands the connection over (a WebSocket handshake: gorilla/websocket
// asserts http.Hijacker itself) with no deadline left on it; the handler
// that takes it keeps it alive its own way.
func (w *stallWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := w.rc.Hijack()
	if err == nil {
		w.hijacked.Store(true)
	}
	return c, brw, err
}

// finish sends what net/http still buffers of a reply under the same
// bound once the handler is done: net/http would send it after the handler
// returns, without a deadline.
func (w *stallWriter) finish() {
	if w.wrote.Load() && !w.hijacked.Load() {
		_ = w.FlushError()
	}
}

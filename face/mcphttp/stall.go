package mcphttp

import (
	"net/http"
	"sync/atomic"
	"time"
)

// replyStallTimeout is how long one write to an HTTP client (at most
// stallChunk bytes, or a flush) may take: a client that sends a request and
// then stops reading its reply, or its GET stream, would otherwise hold the
// handler's goroutine, its in-flight slot, its connection and the reply
// itself for as long as it likes (the daemon's HTTP server has no write
// timeout, which would cut streams and long calls). Tests shorten it.
var replyStallTimeout = 30 * time.Second

// stallChunk is the most a write gives the client replyStallTimeout to take:
// a slow client that keeps reading gets a reply of any size.
const stallChunk = 64 << 10

// stallWriter is the ResponseWriter of every /mcp request (serveHTTP): each
// write to the client, in pieces of stallChunk, and each flush must make
// progress within replyStallTimeout, or it fails (the connection's write
// deadline), the handler's writes fail after it, and the request ends. The
// deadline is set only around a write, so a GET stream may stay quiet for
// as long as it likes, and it is cleared after, for the connection's next
// request.
type stallWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	wrote atomic.Bool // a GET stream's events are written by the SDK's goroutines
}

func newStallWriter(w http.ResponseWriter) *stallWriter {
	return &stallWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
}

func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// around runs f with the connection's write deadline set (where the
// connection has one: a recorder has none, and then f runs without).
func (w *stallWriter) around(f func() error) error {
	_ = w.rc.SetWriteDeadline(time.Now().Add(replyStallTimeout))
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

// FlushError is what http.ResponseController.Flush calls (the SDK flushes
// each SSE event so).
func (w *stallWriter) FlushError() error { return w.around(w.rc.Flush) }

func (w *stallWriter) Flush() { _ = w.FlushError() }

// finish sends what net/http still buffers of a reply under the same
// bound, once the handler is done: net/http would send it after the
// handler returns, without a deadline.
func (w *stallWriter) finish() {
	if w.wrote.Load() {
		_ = w.FlushError()
	}
}

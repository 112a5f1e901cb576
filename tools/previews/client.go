//go:build linux

package previews

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The lean path's client (leanPool) writes a request and reads its answer
// on the handler's goroutine, over a kept-alive connection to the
// workspace's server, where an http.Transport hands each request to its
// connection's write loop and the answer back from its read loop (two
// goroutine hand-offs, BenchmarkTransportHandoff). What the Transport does
// for a request without a body is kept, with the same bounds as the
// proxy's Transport (newProxy):
//
//   - a pool per (scope, port), most recently used first, of at most
//     maxIdle idle connections, each closed after idleTimeout unused;
//   - a pooled connection is checked before reuse (a peek that does not
//     wait): one the server closed, or that holds bytes nobody asked for,
//     is closed, as the Transport's read loop notices it; one that fails
//     anyway before any byte of its answer came is replaced once by a
//     fresh connection when the request may be sent twice (the
//     Transport's rule: GET, HEAD, OPTIONS, TRACE, or an Idempotency-Key),
//     or when not a byte of the request was written;
//   - 1xx answers go to the caller's on1xx (103 Early Hints passed on,
//     as ReverseProxy does; each resets the header limit as the Transport
//     does for a trace that sees them), 101 ends the connection;
//   - the answer's header is bounded (maxHeader bytes, the Transport's
//     MaxResponseHeaderBytes default), its body framed by
//     http.ReadResponse (length, chunks, until close, none for HEAD, 1xx,
//     204, 304), trailers included;
//   - a connection goes back to the pool only when its answer's body was
//     read to its end, neither side asked to close, the server did not end
//     its side, and nothing more than the answer arrived;
//   - when the request's context ends (the client went away) the
//     connection is closed, never pooled, and the error is the context's;
//   - no read deadline, as the Transport has none (ResponseHeaderTimeout
//     unset): a server that stalls holds the request until the client
//     leaves.
//
// Each new connection is opened by Previews.Dial, which judges the port.
// The error texts are the Transport's for the same failure, so that the
// daemon's 502 says the same on both paths (TestLeanMatchesReverseProxy,
// TestAttackLeanPath).
type leanPool struct {
	p           *Previews
	maxIdle     int           // idle connections per (scope, port)
	idleTimeout time.Duration // an idle connection's life
	maxHeader   int64         // bytes of an answer's header

	mu   sync.Mutex
	idle map[leanKey][]*pconn // most recently used last
	// dialed counts connections opened (for the tests).
	dialed atomic.Int64
}

// leanKey is a pool: a connection is reused only for the scope and port
// it was judged for.
type leanKey struct {
	within string
	port   int
}

// The Transport's defaults and the proxy's settings (newProxy).
const (
	leanMaxIdle     = 8
	leanIdleTimeout = 30 * time.Second
	leanMaxHeader   = 10 << 20
)

func newLeanPool(p *Previews) *leanPool {
	return &leanPool{p: p, maxIdle: leanMaxIdle, idleTimeout: leanIdleTimeout, maxHeader: leanMaxHeader, idle: make(map[leanKey][]*pconn)}
}

// pconn is one kept connection: the previews connection Dial opened, with
// its buffers. Only the goroutine that took it from the pool uses it,
// until it puts it back or closes it.
type pconn struct {
	pool   *leanPool
	key    leanKey
	nc     net.Conn
	raw    syscall.RawConn // for the peek before reuse; nil when none
	br     *bufio.Reader
	bw     *bufio.Writer
	timer  *time.Timer // the idle timeout, while pooled
	reused bool        // it served a request before this one

	readLimit int64 // bytes the header may still take
	nread     int64 // bytes read for the request under way
	nwrite    int64 // bytes written for it
	sawEOF    bool  // the server ended its side
	canceled  atomic.Bool

	peekBuf  [1]byte
	peekFn   func(fd uintptr) bool
	peekGood bool // what peekFn found: nothing waiting, and open

	body leanBody
}

func (pc *pconn) Read(b []byte) (int, error) {
	if pc.readLimit <= 0 {
		return 0, fmt.Errorf("read limit of %d bytes exhausted", pc.pool.maxHeader)
	}
	if int64(len(b)) > pc.readLimit {
		b = b[:pc.readLimit]
	}
	n, err := pc.nc.Read(b)
	if err == io.EOF {
		pc.sawEOF = true
	}
	pc.readLimit -= int64(n)
	pc.nread += int64(n)
	return n, err
}

func (pc *pconn) Write(b []byte) (int, error) {
	n, err := pc.nc.Write(b)
	pc.nwrite += int64(n)
	return n, err
}

// alive says whether a pooled connection can take a request: the server
// has neither closed it nor sent anything unasked. A peek (MSG_PEEK |
// MSG_DONTWAIT) that does not wait for the socket.
func (pc *pconn) alive() bool {
	if pc.br.Buffered() > 0 {
		return false
	}
	if pc.raw == nil {
		return true
	}
	pc.peekGood = false
	if err := pc.raw.Read(pc.peekFn); err != nil {
		return false // closed meanwhile (Previews.Close)
	}
	return pc.peekGood
}

func (pc *pconn) peek(fd uintptr) bool {
	n, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&pc.peekBuf[0])), 1, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	pc.peekGood = errno == unix.EAGAIN || errno == unix.EWOULDBLOCK
	_ = n // 0: the server closed it; 1: bytes nobody asked for
	return true
}

// close ends the connection (its place among MaxConns is given back).
func (pc *pconn) close() { _ = pc.nc.Close() }

// get returns a pooled connection for k that is still good, or one Dial
// opens when there is none (or fresh is set).
func (lp *leanPool) get(ctx context.Context, c Caller, k leanKey, fresh bool) (*pconn, error) {
	for !fresh {
		lp.mu.Lock()
		list := lp.idle[k]
		if len(list) == 0 {
			lp.mu.Unlock()
			break
		}
		pc := list[len(list)-1]
		list[len(list)-1] = nil
		if len(list) == 1 {
			delete(lp.idle, k)
		} else {
			lp.idle[k] = list[:len(list)-1]
		}
		lp.mu.Unlock()
		pc.timer.Stop() // a timer that fired finds it no longer idle
		if pc.alive() {
			pc.reused = true
			return pc, nil
		}
		pc.close()
	}
	nc, err := lp.p.Dial(ctx, c, k.port)
	if err != nil {
		return nil, err
	}
	lp.dialed.Add(1)
	pc := &pconn{pool: lp, key: k, nc: nc}
	if w, ok := nc.(*conn); ok {
		if sc, ok := w.Conn.(syscall.Conn); ok {
			pc.raw, _ = sc.SyscallConn()
		}
	}
	pc.peekFn = pc.peek
	pc.br = bufio.NewReaderSize(pc, 4<<10)
	pc.bw = bufio.NewWriterSize(pc, 4<<10)
	pc.body.pc = pc
	return pc, nil
}

// put pools pc (the most recently used of its key), or closes it when its
// pool is full.
func (lp *leanPool) put(pc *pconn) {
	lp.mu.Lock()
	list := lp.idle[pc.key]
	if len(list) >= lp.maxIdle {
		lp.mu.Unlock()
		pc.close()
		return
	}
	lp.idle[pc.key] = append(list, pc)
	if pc.timer == nil {
		pc.timer = time.AfterFunc(lp.idleTimeout, func() { lp.closeIfIdle(pc) })
	} else {
		pc.timer.Reset(lp.idleTimeout)
	}
	lp.mu.Unlock()
}

// closeIfIdle is an idle connection's timeout: it closes pc if still
// pooled.
func (lp *leanPool) closeIfIdle(pc *pconn) {
	lp.mu.Lock()
	list := lp.idle[pc.key]
	i := -1
	for j, x := range list {
		if x == pc {
			i = j
			break
		}
	}
	if i < 0 {
		lp.mu.Unlock()
		return
	}
	list = append(list[:i], list[i+1:]...)
	if len(list) == 0 {
		delete(lp.idle, pc.key)
	} else {
		lp.idle[pc.key] = list
	}
	lp.mu.Unlock()
	pc.close()
}

// closeIdle closes every pooled connection.
func (lp *leanPool) closeIdle() {
	lp.mu.Lock()
	var all []*pconn
	for k, list := range lp.idle {
		all = append(all, list...)
		delete(lp.idle, k)
	}
	lp.mu.Unlock()
	for _, pc := range all {
		pc.timer.Stop()
		pc.close()
	}
}

// idleCount is how many connections the pool holds for k (for the tests).
func (lp *leanPool) idleCount(k leanKey) int {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return len(lp.idle[k])
}

// replayable is the Transport's rule for a request without a body that
// may be sent again (http.Request's isReplayable).
func replayable(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, a := req.Header["Idempotency-Key"]
	_, b := req.Header["X-Idempotency-Key"]
	return a || b
}

// roundTrip sends req (without a body) to k's server for c and returns
// the final answer; on1xx is told each informational answer before it.
// The answer's Body must be closed: that returns the connection to the
// pool, or closes it.
func (lp *leanPool) roundTrip(ctx context.Context, c Caller, k leanKey, req *http.Request, on1xx func(int, http.Header)) (*http.Response, error) {
	pc, err := lp.get(ctx, c, k, false)
	if err != nil {
		return nil, err
	}
	res, retry, err := pc.roundTrip(ctx, req, on1xx)
	if err == nil {
		return res, nil
	}
	if !retry || ctx.Err() != nil {
		return nil, err
	}
	// A pooled connection the server closed as it was taken: once more,
	// on a fresh one (whose failure is final: a server that hangs up on
	// every request is not asked without end).
	if pc, err = lp.get(ctx, c, k, true); err != nil {
		return nil, err
	}
	res, _, err = pc.roundTrip(ctx, req, on1xx)
	return res, err
}

// roundTrip writes req and reads its answer on pc. On an error pc is
// closed, and retry says whether the request may go again on another
// connection: pc was reused and failed before any byte of the answer
// came, and either nothing of the request was written or it may be sent
// twice.
func (pc *pconn) roundTrip(ctx context.Context, req *http.Request, on1xx func(int, http.Header)) (res *http.Response, retry bool, err error) {
	pc.nread, pc.nwrite = 0, 0
	pc.canceled.Store(false)
	stop := context.AfterFunc(ctx, pc.cancel)
	fail := func(err error) (*http.Response, bool, error) {
		stop()
		pc.close()
		if pc.canceled.Load() {
			return nil, false, context.Cause(ctx)
		}
		return nil, pc.reused && pc.nread == 0 && (pc.nwrite == 0 || replayable(req)), err
	}
	if err := req.Write(pc.bw); err != nil {
		return fail(err)
	}
	if err := pc.bw.Flush(); err != nil {
		return fail(err)
	}
	pc.readLimit = pc.pool.maxHeader
	if _, err := pc.br.Peek(1); err != nil {
		return fail(err) // bare, as the Transport returns it
	}
	for {
		res, err = http.ReadResponse(pc.br, req)
		if err != nil {
			if pc.readLimit <= 0 {
				err = fmt.Errorf("net/http: server response headers exceeded %d bytes; aborted", pc.pool.maxHeader)
			}
			return fail(fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w", err))
		}
		if res.StatusCode < 100 || res.StatusCode > 199 || res.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		if on1xx != nil {
			on1xx(res.StatusCode, res.Header)
		}
		pc.readLimit = pc.pool.maxHeader
	}
	pc.readLimit = 1<<63 - 1 // bodies are not bounded here
	keep := !res.Close && res.StatusCode != http.StatusSwitchingProtocols
	pc.body = leanBody{pc: pc, ctx: ctx, body: res.Body, stop: stop, keep: keep}
	res.Body = &pc.body
	return res, false, nil
}

// cancel is run when the request's context ends: the connection is
// closed, which ends a read or write under way.
func (pc *pconn) cancel() {
	pc.canceled.Store(true)
	pc.close()
}

// leanBody is an answer's body: it gives the connection back to the pool
// when read to its end and closed, or closes it.
type leanBody struct {
	pc   *pconn
	ctx  context.Context
	body io.ReadCloser
	stop func() bool
	keep bool // the answer leaves the connection open
	eof  bool
	done bool
}

func (b *leanBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, http.ErrBodyReadAfterClose
	}
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.eof = true
	} else if err != nil && b.pc.canceled.Load() {
		// The request's context ended, or an abort (aborter) closed
		// the connection while the context runs on.
		if cause := context.Cause(b.ctx); cause != nil {
			err = cause
		}
	}
	return n, err
}

// aborter returns what closes b's connection from another goroutine (a
// reload revoking the caller's token: holdStream) while b is read. It
// holds this answer's own stop, not b's fields: once Close has run, the
// connection may be back in the pool carrying another request, and stop
// then reports that this answer's watch has ended already, so nothing of
// the other request is touched. Only one of Close and the abort closes.
func (b *leanBody) aborter() func() {
	stop, pc := b.stop, b.pc
	return func() {
		if stop() {
			pc.cancel()
		}
	}
}

func (b *leanBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	pc := b.pc
	if !b.eof && b.body == http.NoBody {
		b.eof = true
	}
	if !b.eof {
		// Reading on would take what is left of it; the Transport closes
		// the connection too.
		b.stop()
		pc.close()
		return nil
	}
	_ = b.body.Close() // at its end: fills the trailer, reads nothing more
	if !b.stop() || !b.keep || pc.sawEOF || pc.br.Buffered() > 0 {
		pc.close()
		return nil
	}
	pc.pool.put(pc)
	return nil
}

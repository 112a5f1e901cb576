package wsnet

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentbe/agentbe-daemon/internal/clip"
)

// WebSocket close codes the daemon sends. 4001 is the application code the
// agent-backend clients map to AUTH_FAILED (and then stop reconnecting); the
// others are RFC 6455's.
const (
	CloseNormal       = websocket.CloseNormalClosure     // 1000: the SSH connection ended
	CloseGoingAway    = websocket.CloseGoingAway         // 1001: "Server shutting down"
	CloseInternal     = websocket.CloseInternalServerErr // 1011: keepalive timeout, SSH setup failure
	CloseTryAgain     = websocket.CloseTryAgainLater     // 1013: connection cap reached
	ClosePolicy       = websocket.ClosePolicyViolation   // 1008: no SSH login in time
	CloseUnauthorized = 4001                             // bad or missing token
)

// maxMessageSize is the read limit for one WebSocket message. A message is
// just a chunk of the SSH byte stream, which we read incrementally, so the
// limit is not about memory; it stops a peer from holding one message open
// forever and bounds what a broken client can make us process. SSH packets
// are at most 256 KiB, and the clients send one packet or less per message.
const maxMessageSize = 4 << 20

// closeGrace bounds the WebSocket closing handshake: after we send a close
// frame we wait this long for the peer's reply before dropping TCP.
const closeGrace = 2 * time.Second

// Conn adapts a WebSocket to the byte stream net.Conn that SSH expects.
//
// Every WebSocket message, binary or text, and however fragmented, is a chunk
// of the stream: gorilla reassembles fragments behind NextReader, and we read
// each message incrementally, so a message never has to fit in memory. We
// send binary messages only. gorilla allows one reader and one writer at a
// time; the SSH library reads from a single goroutine but writes from several
// (channel data, global requests, keepalives), so writes go through one
// queue, sent by one flusher (see Write).
//
// Close performs the WebSocket closing handshake (close frame, then wait for
// the peer's) before dropping TCP. Closing TCP right after the frame would let
// data already in flight from the client (the reference client sends its SSH
// banner the moment the socket opens) turn into a TCP reset, and a reset can
// destroy the close frame before the client reads it: the client would then
// see 1006 instead of 4001 and retry forever instead of reporting AUTH_FAILED.
type Conn struct {
	ws *websocket.Conn

	rmu sync.Mutex // one reader at a time; Close takes it to drain
	r   io.Reader  // the message being read, nil between messages

	// Writes are coalesced: Write appends to pending and a flusher goroutine
	// (running only while there is something to send) sends what has
	// accumulated as one message. x/crypto/ssh writes each packet in two or
	// three pieces (through a 4 KiB bufio.Writer: header, payload, MAC);
	// sent as they come that is three frames and three syscalls per packet,
	// on both sides. Coalesced it is usually one, which is most of the cost
	// of a bulk transfer.
	wmu       sync.Mutex
	wcond     sync.Cond // on wmu: the flusher finished a message or stopped
	pending   []byte    // bytes accepted by Write, not yet sent
	spare     []byte    // the previous message's buffer, reused
	flushing  bool      // a flusher goroutine is running
	werr      error     // first write error; every later Write returns it
	wclosed   bool      // Close started: no more writes
	wdeadline time.Time // write deadline for the flusher's messages

	heard      heard       // when the peer last sent anything (keepalive.go)
	peerClosed atomic.Bool // the peer's close frame (or EOF) has been seen
	peerClose  atomic.Pointer[websocket.CloseError]

	closeOnce sync.Once
	closeErr  error
	code      atomic.Int32 // close code Close sends; 0 = CloseNormal
	reason    atomic.Pointer[string]
}

// New wraps ws, an upgraded (server) or dialed (client) WebSocket. The
// buffers of the WebSocket itself (read buffer size, write buffer pool) are
// the Upgrader's or Dialer's choice, made by the caller for its side.
func New(ws *websocket.Conn) *Conn {
	c := &Conn{ws: ws}
	c.wcond.L = &c.wmu
	ws.SetReadLimit(maxMessageSize)
	// Any frame proves the peer is alive: its pings and pongs here, the
	// bytes of its messages in Read. Keepalive only looks at the clock.
	c.heard.listen(ws)
	return c
}

// Read reads the stream: it continues the current message or waits for the
// next one. A close frame or a dropped connection reads as io.EOF, which is
// what SSH expects when the transport ends.
func (c *Conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for {
		if c.r == nil {
			if c.peerClosed.Load() {
				return 0, io.EOF
			}
			_, r, err := c.ws.NextReader()
			if err != nil {
				return 0, c.readErr(err)
			}
			c.heard.mark()
			c.r = r
		}
		n, err := c.r.Read(p)
		if n > 0 {
			c.heard.mark()
		}
		if err == io.EOF {
			// End of this message, not of the stream. Empty messages are
			// legal and carry nothing; keep reading.
			c.r = nil
			if n > 0 {
				return n, nil
			}
			continue
		}
		if err != nil {
			c.r = nil
			return n, c.readErr(err)
		}
		return n, nil
	}
}

// readErr maps the end of the WebSocket to io.EOF and keeps real errors
// (timeouts, protocol errors) for the logs.
func (c *Conn) readErr(err error) error {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		c.peerClose.CompareAndSwap(nil, ce)
	}
	if ce != nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		c.peerClosed.Store(true)
		return io.EOF
	}
	return err
}

// maxPending is how much Write buffers before it blocks the caller
// (backpressure); a few SSH packets. It also bounds a coalesced message
// (maxPending plus one SSH packet), which must stay under what the clients'
// WebSocket libraries accept: 1 MiB by default for Python's websockets,
// 100 MiB for Node's ws.
const maxPending = 256 << 10

// Write queues p for sending and returns; it blocks only while maxPending
// bytes are already queued. An error sending earlier data is returned by
// the next Write, as with a kernel socket buffer.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for len(c.pending) >= maxPending && c.werr == nil && !c.wclosed {
		c.wcond.Wait()
	}
	if c.werr != nil {
		return 0, c.werr
	}
	if c.wclosed {
		return 0, net.ErrClosed
	}
	if c.pending == nil {
		c.pending = getBuf()
	}
	c.pending = append(c.pending, p...)
	if !c.flushing {
		c.flushing = true
		go c.flush()
	}
	return len(p), nil
}

// flush sends pending data until there is none, then exits, so an idle
// connection has no flusher goroutine and holds no buffer: the two buffers
// it alternates between (one being sent, one filling) go back to msgBufs,
// shared by all connections.
func (c *Conn) flush() {
	c.wmu.Lock()
	for len(c.pending) > 0 && c.werr == nil {
		msg := c.pending
		c.pending, c.spare = c.spare, nil // nil: Write takes one from msgBufs
		deadline := c.wdeadline
		c.wcond.Broadcast() // room for blocked writers
		c.wmu.Unlock()

		err := c.ws.SetWriteDeadline(deadline)
		if err == nil {
			err = c.ws.WriteMessage(websocket.BinaryMessage, msg)
		}

		c.wmu.Lock()
		if err != nil {
			if errors.Is(err, websocket.ErrCloseSent) {
				err = net.ErrClosed
			}
			c.werr = err
			c.pending = nil
		}
		c.spare = msg[:0]
	}
	c.flushing = false
	putBuf(c.spare)
	c.spare = nil
	if len(c.pending) == 0 {
		putBuf(c.pending)
		c.pending = nil
	}
	c.wcond.Broadcast()
	c.wmu.Unlock()
}

// msgBufs recycles message buffers between bursts and connections. During
// a bulk transfer the queue refills to maxPending plus a packet every round;
// growing a fresh buffer each time costs a tenth of the CPU of a download.
var msgBufs sync.Pool // of *[]byte

func getBuf() []byte {
	if p, ok := msgBufs.Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return nil
}

func putBuf(b []byte) {
	if b != nil && cap(b) <= 4*maxPending {
		b = b[:0]
		msgBufs.Put(&b)
	}
}

// drain stops accepting writes and waits until queued data is sent (or its
// sending failed), giving up on a peer that does not read after closeGrace.
func (c *Conn) drain() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wclosed = true
	c.wcond.Broadcast() // writers blocked on a full queue give up
	if c.flushing {
		// Bound a write blocked on a peer that stopped reading: the
		// message in progress through the socket, later ones through
		// wdeadline (gorilla sets the socket deadline per message).
		d := time.Now().Add(closeGrace)
		c.wdeadline = d
		_ = c.ws.NetConn().SetWriteDeadline(d)
	}
	for c.flushing {
		c.wcond.Wait()
	}
}

// CloseFrame is the payload of a close frame with code and reason, the
// one every WebSocket of the daemon sends (/ssh, /gateway). The reason is
// made valid UTF-8, which RFC 6455 requires of it (a client fails a
// connection whose reason is not, and sees no code; a reason can quote
// what a client sent, an X-Scope-Path of any bytes), each invalid byte
// run replaced by U+FFFD, then cut to 120 bytes on a rune boundary, with
// clip's marker: 123 bytes at most, what a control frame holds beside the
// code (gorilla refuses to send a longer one, and the peer would get no
// close frame at all).
func CloseFrame(code int, reason string) []byte {
	return websocket.FormatCloseMessage(code, clip.String(strings.ToValidUTF8(reason, "\uFFFD"), 120))
}

// SetCloseCode chooses the code and reason the next Close sends.
func (c *Conn) SetCloseCode(code int, reason string) {
	c.code.Store(int32(code))
	c.reason.Store(&reason)
}

// CloseWith sets the close code and closes.
func (c *Conn) CloseWith(code int, reason string) error {
	c.SetCloseCode(code, reason)
	return c.Close()
}

// Close sends a close frame (unless the peer closed first), waits up to
// closeGrace for the peer's close frame, then closes the TCP connection.
// It is safe to call from any goroutine and more than once.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		// Queued data goes out before the close frame: the last SSH
		// packets (exit-status, channel close, disconnect) matter.
		c.drain()
		if !c.peerClosed.Load() {
			code := int(c.code.Load())
			if code == 0 {
				code = CloseNormal
			}
			reason := ""
			if r := c.reason.Load(); r != nil {
				reason = *r
			}
			msg := CloseFrame(code, reason)
			if err := c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(closeGrace)); err == nil {
				// Wake a reader blocked in NextReader if the peer never
				// answers, then wait for it and drain ourselves until the
				// peer's close frame arrives.
				_ = c.ws.SetReadDeadline(time.Now().Add(closeGrace))
				c.rmu.Lock()
				for !c.peerClosed.Load() {
					_, r, err := c.ws.NextReader()
					if err != nil {
						c.readErr(err)
						break
					}
					if _, err := io.Copy(io.Discard, r); err != nil {
						break
					}
				}
				c.rmu.Unlock()
			}
		}
		c.closeErr = c.ws.Close()
	})
	return c.closeErr
}

// LocalAddr is this side of the WebSocket's TCP connection.
func (c *Conn) LocalAddr() net.Addr { return c.ws.LocalAddr() }

// RemoteAddr is the peer's side of the WebSocket's TCP connection.
func (c *Conn) RemoteAddr() net.Addr { return c.ws.RemoteAddr() }

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the read deadline. As with gorilla itself, a read that
// times out leaves the WebSocket unusable; SSH treats it as the end.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.ws.SetReadDeadline(t) }

// SetWriteDeadline sets the deadline for sending queued data; a message
// not sent by then fails the connection's later writes.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wdeadline = t
	return nil
}

// CloseReason returns the code and text of the peer's close frame, if one came.
func (c *Conn) CloseReason() (int, string) {
	if ce := c.peerClose.Load(); ce != nil {
		return ce.Code, ce.Text
	}
	return 0, ""
}

// IdleFor reports how long ago the peer last sent anything.
func (c *Conn) IdleFor(now time.Time) time.Duration { return c.heard.idleFor(now) }

func (c *Conn) ping(interval time.Duration) error { return ping(c.ws, interval) }

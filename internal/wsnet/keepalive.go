package wsnet

import (
	"io"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentbe/agentbe-daemon/internal/tick"
)

// The daemon's one rule for a WebSocket peer that is gone or silent, for
// every WebSocket it serves (/ssh through Conn, /gateway through Peer):
// the server pings the peer every keepalive interval (--keepalive, 30 s),
// anything from the peer (a data frame's bytes, a ping, a pong) counts as
// a sign of life, and a peer that sent nothing for KeepaliveMisses
// intervals is closed with CloseKeepalive and KeepaliveReason. Browsers,
// Node's ws, Python's websockets and gorilla answer a ping by themselves
// whenever their side reads, so a client that reads is never dropped,
// however long it thinks between calls.
const (
	// DefaultKeepalive is the interval when none is given.
	DefaultKeepalive = 30 * time.Second
	// KeepaliveMisses is how many intervals without a word from the peer
	// make it dead: OpenSSH's own default (ServerAliveCountMax 3).
	KeepaliveMisses = 3
	// CloseKeepalive and KeepaliveReason are the close frame a silent
	// peer gets (RFC 6455 has no code of its own for it; 1011 is the
	// server ending the connection for a condition of its own).
	CloseKeepalive  = CloseInternal
	KeepaliveReason = "keepalive timeout"
)

// heard is when a WebSocket's peer last sent anything.
type heard struct{ last atomic.Int64 }

func (h *heard) mark() { h.last.Store(time.Now().UnixNano()) }

func (h *heard) idleFor(now time.Time) time.Duration {
	return now.Sub(time.Unix(0, h.last.Load()))
}

// listen starts h's clock and makes the peer's control frames count on
// it: a pong marks (and does nothing else, as gorilla's default), a ping
// marks and is answered as gorilla's default answers it. gorilla runs
// these handlers inside the read calls of the connection's one reader.
func (h *heard) listen(ws *websocket.Conn) {
	h.mark()
	ws.SetPongHandler(func(string) error { h.mark(); return nil })
	answer := ws.PingHandler()
	ws.SetPingHandler(func(s string) error { h.mark(); return answer(s) })
}

// ping sends a WebSocket ping on ws. It waits up to the keepalive
// interval (at least the close grace) for its turn and for room in the
// socket: a ping is a control frame that goes between the frames of a
// message being sent, and a slow reader's socket can stay full for longer
// than the close grace while the reader still takes bytes.
func ping(ws *websocket.Conn, interval time.Duration) error {
	return ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(max(interval, closeGrace)))
}

// Peer is the liveness of a WebSocket whose owner reads it message by
// message (/gateway) rather than through Conn. NewPeer takes over ws's
// ping and pong handlers; the owner reads with Peer.ReadMessage, so the
// bytes of a message count as they arrive, and runs Keepalive on it.
type Peer struct {
	ws    *websocket.Conn
	heard heard
}

// NewPeer starts the clock of ws's peer.
func NewPeer(ws *websocket.Conn) *Peer {
	p := &Peer{ws: ws}
	p.heard.listen(ws)
	return p
}

// ReadMessage is gorilla's ReadMessage, with each piece of the message
// counted as a sign of life as it arrives: a large message sent slowly
// over a slow link keeps its sender alive while it comes.
func (p *Peer) ReadMessage() (int, []byte, error) {
	typ, r, err := p.ws.NextReader()
	if err != nil {
		return typ, nil, err
	}
	p.heard.mark()
	b, err := io.ReadAll(markingReader{r, &p.heard})
	return typ, b, err
}

type markingReader struct {
	r io.Reader
	h *heard
}

func (m markingReader) Read(b []byte) (int, error) {
	n, err := m.r.Read(b)
	if n > 0 {
		m.h.mark()
	}
	return n, err
}

// IdleFor reports how long ago the peer last sent anything.
func (p *Peer) IdleFor(now time.Time) time.Duration { return p.heard.idleFor(now) }

func (p *Peer) ping(interval time.Duration) error { return ping(p.ws, interval) }

// Pinged is what Keepalive watches: a Peer, or a Conn (only this package
// pings).
type Pinged interface {
	ping(interval time.Duration) error
	IdleFor(now time.Time) time.Duration
}

// Keepalive applies the rule to p: every interval (DefaultKeepalive when
// not positive) it pings the peer, and once the peer has sent nothing for
// KeepaliveMisses intervals it calls dead(CloseKeepalive, KeepaliveReason)
// and stops; dead sends that close frame and ends the connection. A ping
// that waited its whole interval behind a message being written is given
// up and decides nothing by itself. One that found the socket full and
// could not be written in that time has made gorilla fail the
// connection's writes: the owner's next write fails and ends the
// connection, as a data write the peer takes nothing of for as long
// would, and a connection with nothing more to write goes silent and is
// closed by this rule. A timer, not a goroutine, so an idle connection
// costs no stack for it.
// stop ends the keepalive; the owner calls it when the connection ends.
func Keepalive(p Pinged, interval time.Duration, dead func(code int, reason string)) (stop func()) {
	if interval <= 0 {
		interval = DefaultKeepalive
	}
	return tick.Every(interval, func() bool {
		if p.IdleFor(time.Now()) >= KeepaliveMisses*interval {
			dead(CloseKeepalive, KeepaliveReason)
			return false
		}
		_ = p.ping(interval)
		return true
	})
}

package wsnet

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// peerPair serves a Peer under Keepalive at interval and returns a client
// for it, and the close the keepalive decided (code and reason), if any,
// once the server's side is done.
func peerPair(t *testing.T, interval time.Duration, dialer *websocket.Dialer, serve func(p *Peer)) (*websocket.Conn, <-chan string) {
	t.Helper()
	decided := make(chan string, 1)
	done := make(chan struct{})
	hts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		p := NewPeer(ws)
		dead := make(chan struct{})
		stop := Keepalive(p, interval, func(code int, reason string) {
			decided <- fmt.Sprint(code, " ", reason)
			_ = ws.WriteControl(websocket.CloseMessage, CloseFrame(code, reason), time.Now().Add(time.Second))
			_ = ws.SetReadDeadline(time.Now())
			close(dead)
		})
		defer stop()
		serve(p)
		select {
		case <-dead:
		default:
			close(decided)
		}
	}))
	if dialer == nil {
		dialer = websocket.DefaultDialer
	}
	ws, _, err := dialer.Dial("ws"+strings.TrimPrefix(hts.URL, "http"), nil)
	if err != nil {
		hts.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close(); hts.Close(); <-done })
	return ws, decided
}

// readAll reads every message p's peer sends until the connection ends.
func readAll(p *Peer) (msgs [][]byte) {
	for {
		_, b, err := p.ReadMessage()
		if err != nil {
			return msgs
		}
		msgs = append(msgs, b)
	}
}

// TestKeepaliveDropsSilentPeer: a peer that reads but answers no ping is
// closed with CloseKeepalive and KeepaliveReason, and sees that close.
func TestKeepaliveDropsSilentPeer(t *testing.T) {
	ws, decided := peerPair(t, 30*time.Millisecond, nil, func(p *Peer) { readAll(p) })
	ws.SetPingHandler(func(string) error { return nil })
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err := ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != CloseKeepalive || ce.Text != KeepaliveReason {
		t.Fatalf("client read %v, want close %d %q", err, CloseKeepalive, KeepaliveReason)
	}
	if got := <-decided; got != fmt.Sprint(CloseKeepalive, " ", KeepaliveReason) {
		t.Fatalf("keepalive decided %q", got)
	}
}

// TestKeepaliveCountsTheBytesOfAMessage: a message that arrives a few
// bytes at a time, over many more than 3 intervals, keeps its sender
// alive though it answers no ping (it does not read while it sends), and
// arrives whole.
func TestKeepaliveCountsTheBytesOfAMessage(t *testing.T) {
	got := make(chan [][]byte, 1)
	// A 16-byte write buffer: each Write below goes out as frames at once.
	ws, decided := peerPair(t, 100*time.Millisecond, &websocket.Dialer{WriteBufferSize: 16}, func(p *Peer) { got <- readAll(p) })
	w, err := ws.NextWriter(websocket.TextMessage)
	if err != nil {
		t.Fatal(err)
	}
	piece := bytes.Repeat([]byte("x"), 40)
	for range 40 { // 1.2 s: 12 intervals
		if _, err := w.Write(piece); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ws.Close()
	msgs := <-got
	if len(msgs) != 1 || len(msgs[0]) != 40*len(piece) {
		t.Fatalf("server read %d messages", len(msgs))
	}
	if reason, decidedOne := <-decided; decidedOne {
		t.Fatalf("the keepalive closed a peer that was sending: %q", reason)
	}
}

// TestKeepalivePingWaitsBehindAMessage: the peer reads nothing for a
// while (a slow link, a client busy elsewhere) but is alive, sending small
// messages, while a large message to it is being written and holds the
// write lock. The keepalive's ping waits for its turn and is given up;
// the connection stays: the peer, once it reads, gets every byte, and
// then an answer to what it sends next.
func TestKeepalivePingWaitsBehindAMessage(t *testing.T) {
	const total = 2 << 20
	done := make(chan struct{})
	hts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		// One frame per message (up to 1 MiB), and a small socket
		// buffer: a message the peer does not read holds the lock.
		ws, err := (&websocket.Upgrader{WriteBufferSize: 1 << 20}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		_ = ws.NetConn().(*net.TCPConn).SetWriteBuffer(16 << 10)
		c := New(ws)
		defer c.Close()
		stop := Keepalive(c, 300*time.Millisecond, func(code int, reason string) { c.CloseWith(code, reason) })
		defer stop()
		go c.Write(bytes.Repeat([]byte("y"), total))
		// The peer's small messages are signs of life; "m" asks for
		// one more message, to show the connection is still up.
		buf := make([]byte, 64)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if bytes.IndexByte(buf[:n], 'm') >= 0 {
				_, _ = c.Write([]byte("z"))
			}
		}
	}))
	defer func() { hts.Close(); <-done }()
	dialer := &websocket.Dialer{NetDial: func(network, addr string) (net.Conn, error) {
		nc, err := net.Dial(network, addr)
		if err == nil {
			_ = nc.(*net.TCPConn).SetReadBuffer(16 << 10)
		}
		return nc, err
	}}
	ws, _, err := dialer.Dial("ws"+strings.TrimPrefix(hts.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	// 3 s without reading (the ping waits up to 2 s for its turn, the
	// close grace), sending a small message every 50 ms.
	for range 60 {
		if err := ws.WriteMessage(websocket.BinaryMessage, []byte("k")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopSending, stopped := make(chan struct{}), make(chan struct{})
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(stopSending) }); <-stopped }
	defer stop()
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stopSending:
				return
			case <-time.After(50 * time.Millisecond):
				_ = ws.WriteMessage(websocket.BinaryMessage, []byte("k"))
			}
		}
	}()
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	got := 0
	for got < total {
		_, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("after %d of %d bytes: %v", got, total, err)
		}
		got += len(b)
	}
	if got != total {
		t.Fatalf("got %d bytes, want %d", got, total)
	}
	stop() // one writer at a time
	if err := ws.WriteMessage(websocket.BinaryMessage, []byte("m")); err != nil {
		t.Fatal(err)
	}
	if _, b, err := ws.ReadMessage(); err != nil || string(b) != "z" {
		t.Fatalf("after the whole message: %q %v; want the connection up", b, err)
	}
}

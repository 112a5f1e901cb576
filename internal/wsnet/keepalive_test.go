package wsnet

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
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

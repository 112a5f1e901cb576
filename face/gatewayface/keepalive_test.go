package gatewayface_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentbe/agentbe-daemon/face/gatewayface"
	"github.com/agentbe/agentbe-daemon/internal/wsnet"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// readUntilClose reads what the server sends until its close frame, and
// returns it (nil if the connection ended without one).
func readUntilClose(t *testing.T, ws *websocket.Conn, within time.Duration) *websocket.CloseError {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(within))
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce
		}
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("no close within %v", within)
		}
		return nil
	}
}

// TestKeepaliveClosesSilentPeer: a client that answers no ping (its
// machine dropped off the network, or it never reads) is closed with 1011
// "keepalive timeout" once it has been silent for 3 intervals.
func TestKeepaliveClosesSilentPeer(t *testing.T) {
	f := newFaces(t, registry.Options{}, func(o *gatewayface.Options) { o.Keepalive = 50 * time.Millisecond })
	gw := dialGateway(t, f.srv.URL, authHdr())
	gw.SetPingHandler(func(string) error { return nil }) // reads, answers nothing
	ce := readUntilClose(t, gw, 10*time.Second)
	if ce == nil || ce.Code != wsnet.CloseKeepalive || ce.Text != wsnet.KeepaliveReason {
		t.Fatalf("close %+v, want %d %q", ce, wsnet.CloseKeepalive, wsnet.KeepaliveReason)
	}
}

// TestKeepaliveKeepsAnsweringPeer: a client that answers pings but sends
// nothing stays open for many times the bound, and is then served.
func TestKeepaliveKeepsAnsweringPeer(t *testing.T) {
	// The pong waits for the client's reading goroutine to be scheduled:
	// 150ms intervals, so a loaded machine under -race has 450ms for it.
	f := newFaces(t, registry.Options{}, func(o *gatewayface.Options) { o.Keepalive = 150 * time.Millisecond })
	gw := dialGateway(t, f.srv.URL, authHdr())
	var pings atomic.Int32
	answer := gw.PingHandler()
	gw.SetPingHandler(func(s string) error { pings.Add(1); return answer(s) })
	msgs := make(chan []byte, 1)
	ended := make(chan error, 1)
	go func() {
		for {
			_, b, err := gw.ReadMessage()
			if err != nil {
				ended <- err
				return
			}
			msgs <- b
		}
	}()
	// 10 pings: more than 3 intervals of nothing but pongs, three times over.
	deadline := time.After(30 * time.Second)
	for pings.Load() < 10 {
		select {
		case err := <-ended:
			t.Fatalf("connection ended after %d pings: %v", pings.Load(), err)
		case <-deadline:
			t.Fatalf("only %d pings in 30s", pings.Load())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := gw.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools.list"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-msgs:
		if len(b) == 0 || b[0] != '{' {
			t.Fatalf("answer %q", b)
		}
	case err := <-ended:
		t.Fatalf("connection ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
}

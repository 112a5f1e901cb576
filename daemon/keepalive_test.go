package daemon

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentbe/agentbe-daemon/internal/wsnet"
)

// dialSilent opens a WebSocket to path from src whose client reads
// everything but answers no ping (a machine that dropped off the network
// looks the same to the daemon), and returns the close the daemon sent it,
// once it comes.
func dialSilent(t *testing.T, base, path, src string) <-chan *websocket.CloseError {
	t.Helper()
	d := websocket.Dialer{NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext}
	ws, _, err := d.Dial("ws"+strings.TrimPrefix(base, "http")+path, nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	t.Cleanup(func() { ws.Close() })
	ws.SetPingHandler(func(string) error { return nil })
	closed := make(chan *websocket.CloseError, 1)
	go func() {
		_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		for {
			_, _, err := ws.ReadMessage()
			if err != nil {
				var ce *websocket.CloseError
				errors.As(err, &ce)
				closed <- ce
				return
			}
		}
	}()
	return closed
}

// TestSilentWebSocketsGiveBackTheirSlots: a /gateway and an /ssh
// WebSocket whose clients answer no ping, and a /gateway one whose client
// never reads at all, fill their address's --max-connections-per-ip. The
// daemon closes them with 1011 "keepalive timeout" after 3 silent
// --keepalive intervals, and the address's slots are free again: its next
// request is served.
func TestSilentWebSocketsGiveBackTheirSlots(t *testing.T) {
	c := testConfig(t)
	c.MaxConns, c.MaxConnsPerIP = 16, 3
	c.Keepalive = 50 * time.Millisecond
	r := start(t, c, nil)
	gateway := dialSilent(t, r.url, "/gateway", "127.0.0.1")
	ssh := dialSilent(t, r.url, "/ssh", "127.0.0.1")
	d := websocket.Dialer{NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}).DialContext}
	deaf, _, err := d.Dial("ws"+strings.TrimPrefix(r.url, "http")+"/gateway", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer deaf.Close()
	deaf.SetPingHandler(func(string) error { return nil }) // for the read at the end
	for name, closed := range map[string]<-chan *websocket.CloseError{"/gateway": gateway, "/ssh": ssh} {
		ce := <-closed
		if ce == nil || ce.Code != wsnet.CloseKeepalive || ce.Text != wsnet.KeepaliveReason {
			t.Errorf("%s: close %+v, want %d %q", name, ce, wsnet.CloseKeepalive, wsnet.KeepaliveReason)
		}
	}
	waitFor(t, "the silent connections' slots back", func() bool { n, _ := r.limiter(t).counts(); return n == 0 })
	// The client that never read finds the daemon's pings and then its
	// close when it reads at last.
	_ = deaf.SetReadDeadline(time.Now().Add(10 * time.Second))
	var ce *websocket.CloseError
	if _, _, err := deaf.ReadMessage(); !errors.As(err, &ce) || ce.Code != wsnet.CloseKeepalive {
		t.Errorf("/gateway client that never read: %v, want close %d", err, wsnet.CloseKeepalive)
	}
	one := clientFrom("127.0.0.1", false)
	if resp, body := do(t, one, http.MethodPost, r.url+"/mcp", mcpList); resp.StatusCode != http.StatusOK {
		t.Errorf("/mcp from the address after its WebSockets were closed: %d %.200q", resp.StatusCode, body)
	}
}

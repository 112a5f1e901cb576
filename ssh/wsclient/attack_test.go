package wsclient

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// This file: the client side of /ssh played against a hostile daemon, or
// whatever answers in its place (docs/security.md, "Attack review: the REST
// face, the client and the bridge").

// TestAttackRedirectNotFollowed: a server that answers the upgrade with a
// redirect (to another address or to itself) fails Dial with the status;
// gorilla follows none, so the token reaches no other address.
func TestAttackRedirectNotFollowed(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		to := other.URL + "/ssh"
		if r.URL.Query().Has("loop") {
			to = r.URL.String()
		}
		http.Redirect(w, r, to, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	for _, q := range []string{"", "?loop"} {
		hits.Store(0)
		c, err := Dial(context.Background(), srv.URL+"/ssh"+q, "tok")
		if err == nil {
			c.Close()
			t.Fatalf("Dial%s succeeded through a redirect", q)
		}
		if !strings.Contains(err.Error(), "307") {
			t.Errorf("Dial%s: %v", q, err)
		}
		if n := hits.Load(); n != 1 {
			t.Errorf("Dial%s: %d requests, want 1", q, n)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("%d requests followed the redirect", n)
	}
}

// TestAttackHugeMessage: a server that sends one WebSocket message past
// the 4 MiB read limit (internal/wsnet) ends the connection: Read returns
// what came before the limit and then an error, so one message never holds
// the client longer or makes it buffer more.
func TestAttackHugeMessage(t *testing.T) {
	var upgrader websocket.Upgrader
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		wr, err := ws.NextWriter(websocket.BinaryMessage)
		if err != nil {
			return
		}
		chunk := make([]byte, 64<<10)
		for range 16 << 20 / len(chunk) {
			if _, err := wr.Write(chunk); err != nil {
				return
			}
		}
		wr.Close()
	}))
	defer srv.Close()
	c, err := Dial(context.Background(), srv.URL+"/ssh", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(time.Minute))
	n, err := io.Copy(io.Discard, c)
	if err == nil || !strings.Contains(err.Error(), "read limit") {
		t.Errorf("a 16 MiB message: read %d bytes, then %v; want the read limit's error", n, err)
	}
	if n > 4<<20 {
		t.Errorf("read %d bytes of one message (limit 4 MiB)", n)
	}
}

package daemon

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestAttackUpgradeHeaderKeepsBodyDeadline: a request that says
// "Connection: Upgrade" on a route that never upgrades (/mcp, /execute,
// /tools, a preview's POST the workspace server answers without switching)
// and declares a body it never sends must end at the body deadline like
// any other: the header is the client's say-so, not an upgrade. Otherwise
// such requests hold their connections (never idle, so never shed) and
// /mcp's in-flight slots for as long as the client likes.
func TestAttackUpgradeHeaderKeepsBodyDeadline(t *testing.T) {
	saved := bodyTimeout
	t.Cleanup(func() { bodyTimeout = saved })
	bodyTimeout = time.Second
	c := testConfig(t)
	c.MaxConns, c.MaxConnsPerIP = 8, 8
	r := start(t, c, nil)
	var held []net.Conn
	for i, path := range []string{"/mcp", "/mcp", "/execute", "/tools", "/nowhere", "/mcp", "/execute", "/mcp"} {
		cn := dialRaw(t, r.url, "127.0.0.1")
		method := "POST"
		if path == "/tools" {
			method = "GET"
		}
		if _, err := cn.Write([]byte(method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
			"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n")); err != nil {
			t.Fatal(i, err)
		}
		held = append(held, cn)
	}
	defer func() {
		for _, h := range held {
			h.Close()
		}
	}()
	deadline := time.Now().Add(reserveLifetime + 10*time.Second)
	for {
		total, reserved := r.d.conns.Load().counts()
		if total == 0 && reserved == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("requests claiming an upgrade with a silent body still hold %d connections and %d reserve slots", total, reserved)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// usage is what the test process holds: the daemon runs in it, so these
// are the daemon's numbers plus the test's own clients'.
type usage struct {
	goroutines, fds int
	heap            uint64 // live heap after a collection
}

func measureUsage(t testing.TB) usage {
	t.Helper()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return usage{goroutines: runtime.NumGoroutine(), fds: len(fds), heap: m.HeapInuse}
}

func (u usage) String() string {
	return fmt.Sprintf("%d goroutines, %d descriptors, %.1f MiB heap", u.goroutines, u.fds, float64(u.heap)/(1<<20))
}

// settles waits (up to 20 s) until the process is back within slack
// goroutines and descriptors of base: whatever a flood made the daemon
// hold was let go.
func settles(t testing.TB, what string, base usage, slack int) usage {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		u := measureUsage(t)
		if u.goroutines <= base.goroutines+slack && u.fds <= base.fds+slack {
			return u
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("%s: still %s; before: %s\n%s", what, u, base, buf[:n])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// wsFrom dials a WebSocket from the loopback address src.
func wsFrom(src, url string, hdr http.Header) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second,
		NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext}
	return d.Dial(url, hdr)
}

// mcpListFrom posts tools/list to /mcp from src with token and returns the
// status.
func mcpListFrom(t testing.TB, src, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := clientFrom(src, false).Do(req)
	if err != nil {
		t.Errorf("/mcp from %s: %v", src, err)
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// endsWithin reports whether the daemon closes c within wait, whatever it
// answers first.
func endsWithin(c net.Conn, wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestAttackPreviewFlood floods /preview/ from one address: WebSockets
// through the proxy up to --max-connections-per-ip and past it, header
// slowloris and silent bodies behind "Connection: Upgrade" from others.
// What holds: past the per-address cap nothing is served (the reserve's
// 503, or a closed connection); another client's /mcp and previews still
// answer; the slowloris and the silent bodies end at their deadlines; and
// once the clients let go, the daemon's goroutines, descriptors and
// preview slots are back where they were.
func TestAttackPreviewFlood(t *testing.T) {
	saved := bodyTimeout
	t.Cleanup(func() { bodyTimeout = saved })
	bodyTimeout = time.Second
	const perIP = 24
	c := previewConfig(t, "software", true)
	c.MaxConns, c.MaxConnsPerIP = 96, perIP
	must(t, c.Validate())
	r := start(t, c, nil)
	port := startPreviewServer(t, r, c.Root)
	pv := r.d.proto.previews
	wsURL := fmt.Sprintf("ws%s/preview/%d/echo", strings.TrimPrefix(r.url, "http"), port)
	auth := http.Header{"Authorization": {"Bearer " + previewToken}}
	echo := func(ws *websocket.Conn, m string) error {
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		if err := ws.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
			return err
		}
		_, got, err := ws.ReadMessage()
		if err == nil && string(got) != m {
			err = fmt.Errorf("echoed %q", got)
		}
		return err
	}
	// Warm up the proxy's transport and the server, then measure.
	if ws, _, err := wsFrom("127.0.0.1", wsURL, auth); err != nil {
		t.Fatal(err)
	} else {
		must(t, echo(ws, "warm"))
		ws.Close()
	}
	waitFor(t, "the warm-up's connection to close", func() bool { return pv.Held() == 0 })
	base := measureUsage(t)

	// The flood: perIP WebSockets through the proxy from 127.0.0.7, each
	// echoing once, then held.
	var flood []*websocket.Conn
	defer func() {
		for _, ws := range flood {
			ws.Close()
		}
	}()
	for i := range perIP {
		ws, _, err := wsFrom("127.0.0.7", wsURL, auth)
		if err != nil {
			t.Fatalf("WebSocket %d of %d: %v", i+1, perIP, err)
		}
		flood = append(flood, ws)
		must(t, echo(ws, fmt.Sprint(i)))
	}
	at := measureUsage(t)
	if held := pv.Held(); held != perIP {
		t.Errorf("previews hold %d connections; want the flood's %d", held, perIP)
	}
	// Slowloris from 127.0.0.9 (headers that never end) and silent
	// bodies behind an upgrade header from 127.0.0.10, opened while the
	// flood is held: they run out on their own.
	var slow []net.Conn
	for i := range perIP {
		cn := dialRaw(t, r.url, "127.0.0.9")
		fmt.Fprintf(cn, "GET /preview/%d/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nX-Slow-%d: ", port, previewToken, i)
		slow = append(slow, cn)
		cn = dialRaw(t, r.url, "127.0.0.10")
		fmt.Fprintf(cn, "POST /preview/%d/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 100\r\n\r\n", port, previewToken)
		slow = append(slow, cn)
	}
	slowStart := time.Now()

	// Past the cap from the same address: never served.
	refused := 0
	for i := range 2*reserveConns + 4 {
		ws, resp, err := wsFrom("127.0.0.7", wsURL, auth)
		if err == nil {
			t.Errorf("upgrade %d past --max-connections-per-ip was served", i)
			ws.Close()
			continue
		}
		if resp != nil && resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("upgrade %d past the cap: %d", i, resp.StatusCode)
		}
		refused++
	}
	// Another client is not starved: /mcp and a preview of its own answer.
	if code := mcpListFrom(t, "127.0.0.8", r.url, previewToken); code != http.StatusOK {
		t.Errorf("/mcp from another address during the flood: %d", code)
	}
	if ws, _, err := wsFrom("127.0.0.8", wsURL, auth); err != nil {
		t.Errorf("a preview from another address during the flood: %v", err)
	} else {
		if err := echo(ws, "other"); err != nil {
			t.Errorf("a preview from another address during the flood: %v", err)
		}
		ws.Close()
	}
	t.Logf("before: %s; with %d proxied WebSockets held: %s (per WebSocket: %.1f goroutines, %.1f descriptors, %.0f KiB heap, the test's client end included); %d upgrades past the cap refused",
		base, perIP, at, float64(at.goroutines-base.goroutines)/perIP, float64(at.fds-base.fds)/perIP,
		float64(int64(at.heap)-int64(base.heap))/perIP/1024, refused)

	// The slowloris and the silent bodies end (the header deadline is
	// 10 s, the body deadline shortened to 1 s here).
	for _, cn := range slow {
		if !endsWithin(cn, 20*time.Second-time.Since(slowStart)) {
			t.Fatalf("a slow request to /preview/ from %s is still open after %v", cn.LocalAddr(), time.Since(slowStart))
		}
		cn.Close() // the test's end
	}
	t.Logf("%d header slowloris and %d silent upgrade bodies ended within %v", perIP, perIP, time.Since(slowStart).Round(100*time.Millisecond))

	for _, ws := range flood {
		ws.Close()
	}
	flood = nil
	waitFor(t, "the preview slots to be given back", func() bool { return pv.Held() == 0 })
	end := settles(t, "after the flood", base, 8)
	t.Logf("after the flood: %s", end)
}

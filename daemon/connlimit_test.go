package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// mcpList is a tools/list over /mcp: real work on the workspace's server.
const mcpList = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

// clientFrom is an HTTP client whose connections leave from the loopback
// address src (127.0.0.1, 127.0.0.2, ...), one connection per request
// unless keepAlive.
func clientFrom(src string, keepAlive bool) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: !keepAlive}, Timeout: 10 * time.Second}
}

func do(t *testing.T, c *http.Client, method, url, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// openWS opens n WebSockets to /ssh from src and closes them at cleanup.
// They are hijacked connections: never idle, never shed.
func openWS(t *testing.T, base, src string, n int) []*websocket.Conn {
	t.Helper()
	d := websocket.Dialer{NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext}
	var out []*websocket.Conn
	for range n {
		ws, _, err := d.Dial("ws"+strings.TrimPrefix(base, "http")+"/ssh", nil)
		if err != nil {
			t.Fatalf("WebSocket %d: %v", len(out)+1, err)
		}
		t.Cleanup(func() { ws.Close() })
		out = append(out, ws)
	}
	return out
}

// dialRaw opens a TCP connection from src that sends nothing.
func dialRaw(t *testing.T, base, src string) net.Conn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitCounted waits (up to 10 s) until the listener counts total
// connections and reserved reserve ones: a dial returns once the kernel has
// the connection, before the daemon accepts it, so a test that waits for
// the counts to fall must first see them rise, or it passes at once.
func waitCounted(t *testing.T, r *running, total, reserved int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		gotTotal, gotReserved := r.limiter(t).counts()
		if gotTotal == total && gotReserved == reserved {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the listener counts %d connections and %d reserve ones; want %d and %d", gotTotal, gotReserved, total, reserved)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closedAtOnce reports whether the daemon closed c without a word within
// wait: the read ends with EOF or a reset instead of timing out.
func closedAtOnce(c net.Conn, wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestConnectionCapKeepsReserveForHealth fills --max-connections with
// WebSockets (hijacked, so they count until closed and are never shed):
// /health and /metrics still answer on the reserve slots, work endpoints get
// 503, and once the reserve is held too, a new connection is closed at once.
func TestConnectionCapKeepsReserveForHealth(t *testing.T) {
	c := testConfig(t)
	c.MaxConns, c.MaxConnsPerIP = 4, 4
	r := start(t, c, nil)
	wss := openWS(t, r.url, "127.0.0.1", 4)
	one := clientFrom("127.0.0.1", false)

	resp, body := do(t, one, http.MethodGet, r.url+"/health", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("/health with the cap full: %d %q", resp.StatusCode, body)
	}
	if resp, _ := do(t, one, http.MethodGet, r.url+"/metrics", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("/metrics with the cap full: %d", resp.StatusCode)
	}
	resp, body = do(t, one, http.MethodPost, r.url+"/mcp", mcpList)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "--max-connections") {
		t.Errorf("/mcp with the cap full: %d %.200q (Retry-After %q), want 503 naming --max-connections", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	if _, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(r.url, "http")+"/ssh", nil); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/ssh with the cap full: err %v resp %v, want 503", err, resp)
	}

	// Hold every reserve slot with silent connections (once the daemon has
	// closed the reserve connections above after their answers): the next
	// one is closed before a byte is read.
	waitFor(t, "the reserve to be free", func() bool { _, n := r.limiter(t).counts(); return n == 0 })
	held := make([]net.Conn, reserveConns)
	for i := range held {
		held[i] = dialRaw(t, r.url, "127.0.0.1")
	}
	for i, h := range held {
		if closedAtOnce(h, 100*time.Millisecond) {
			t.Fatalf("reserve connection %d was closed", i+1)
		}
	}
	if extra := dialRaw(t, r.url, "127.0.0.1"); !closedAtOnce(extra, 5*time.Second) {
		t.Errorf("a connection beyond the cap and the reserve was kept open")
	}
	// A reserve connection that sends no request is closed at the end of
	// its reserveLifetime, not after the 10 s header timeout.
	start := time.Now()
	if !closedAtOnce(held[0], reserveLifetime+2*time.Second) {
		t.Errorf("a silent reserve connection was kept open for %v", reserveLifetime+2*time.Second)
	} else if waited := time.Since(start); waited > reserveLifetime+time.Second {
		t.Errorf("a silent reserve connection was closed after %v", waited)
	}
	for _, h := range held {
		h.Close()
	}

	// A closed WebSocket gives its slot back.
	wss[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		// Until the daemon has seen the closes, a new connection may still
		// be refused (closed at once) or get a reserve slot (503).
		req, _ := http.NewRequest(http.MethodPost, r.url+"/mcp", strings.NewReader(mcpList))
		req.Header.Set("Content-Type", "application/json")
		resp, err := one.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/mcp after a WebSocket closed: %v %v", resp, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, metrics := get(t, r.url+"/metrics")
	if !strings.Contains(string(metrics), `agentbe_http_connections_refused_total{limit="max-connections"}`) {
		t.Errorf("/metrics does not count the refused connection:\n%s", metrics)
	}
	if !strings.Contains(r.logs.String(), "connection refused: too many connections") {
		t.Errorf("the refusal was not logged:\n%s", r.logs.String())
	}
}

// TestConnectionCapPerAddress: an address at --max-connections-per-ip
// gets only reserve slots (/health answers, /mcp gets 503), then its next
// connection is closed at once; another address is served.
func TestConnectionCapPerAddress(t *testing.T) {
	c := testConfig(t)
	c.MaxConns, c.MaxConnsPerIP = 16, 2
	r := start(t, c, nil)
	openWS(t, r.url, "127.0.0.1", 2)
	one := clientFrom("127.0.0.1", false)
	if resp, body := do(t, one, http.MethodGet, r.url+"/health", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("/health from the full address: %d %.200q", resp.StatusCode, body)
	}
	if resp, body := do(t, one, http.MethodPost, r.url+"/mcp", mcpList); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/mcp from the full address: %d %.200q, want 503", resp.StatusCode, body)
	}
	waitFor(t, "the reserve to be free", func() bool { _, n := r.limiter(t).counts(); return n == 0 })
	for range reserveConns {
		dialRaw(t, r.url, "127.0.0.1")
	}
	if extra := dialRaw(t, r.url, "127.0.0.1"); !closedAtOnce(extra, 5*time.Second) {
		t.Errorf("a connection from 127.0.0.1 beyond its cap and the reserve was kept open")
	}
	other := clientFrom("127.0.0.2", false)
	if resp, body := do(t, other, http.MethodPost, r.url+"/mcp", mcpList); resp.StatusCode != http.StatusOK {
		t.Errorf("/mcp from 127.0.0.2: %d %q", resp.StatusCode, body)
	}
	_, metrics := get2(t, other, r.url+"/metrics")
	if !strings.Contains(metrics, `agentbe_http_connections_refused_total{limit="max-connections-per-ip"}`) {
		t.Errorf("/metrics does not count the per-address refusal")
	}
}

// TestIdleConnectionsAreShed: keep-alive connections left idle fill 80% of
// the cap; the next connection closes the oldest idle ones to get back
// under 80%, and their clients reconnect transparently.
func TestIdleConnectionsAreShed(t *testing.T) {
	c := testConfig(t)
	c.MaxConns, c.MaxConnsPerIP = 10, 10
	r := start(t, c, nil)
	var clients []*http.Client
	for range 8 {
		cl := clientFrom("127.0.0.1", true)
		t.Cleanup(cl.CloseIdleConnections)
		if resp, _ := do(t, cl, http.MethodGet, r.url+"/health", ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("/health: %d", resp.StatusCode)
		}
		clients = append(clients, cl)
	}
	lim := r.limiter(t)
	waitFor(t, "8 idle connections", func() bool {
		lim.mu.Lock()
		defer lim.mu.Unlock()
		return lim.total == 8 && lim.idleCountLocked() == 8
	})
	fresh := clientFrom("127.0.0.1", false)
	if resp, body := do(t, fresh, http.MethodPost, r.url+"/mcp", mcpList); resp.StatusCode != http.StatusOK {
		t.Fatalf("/mcp with the cap 80%% idle: %d %q", resp.StatusCode, body)
	}
	// The oldest idle one closed to admit the new one at 80% (8 → 7 → 8),
	// and the new one closed after its answer.
	waitFor(t, "an idle connection closed", func() bool { n, _ := lim.counts(); return n == 7 })
	for i, cl := range clients {
		if resp, _ := do(t, cl, http.MethodGet, r.url+"/health", ""); resp.StatusCode != http.StatusOK {
			t.Errorf("client %d after its idle connection was closed: %d", i, resp.StatusCode)
		}
	}
}

func TestConnCapsFitTheDescriptorLimit(t *testing.T) {
	tests := []struct {
		max, perIP      int
		nofile          uint64
		wantMax, wantIP int
		lowered         bool
	}{
		{1024, 128, 1 << 20, 1024, 128, false},
		{1024, 128, 1024, 1024 - fdReserve - reserveConns, 128, true},
		{1024, 1024, 1024, 1024 - fdReserve - reserveConns, 1024 - fdReserve - reserveConns, true},
		{1024, 128, 100, 16, 16, true},
		{1024, 128, ^uint64(0), 1024, 128, false}, // RLIM_INFINITY
		{1024, 128, 0, 1024, 128, false},          // unknown
	}
	for _, tt := range tests {
		m, ip, why := connCaps(tt.max, tt.perIP, tt.nofile)
		if m != tt.wantMax || ip != tt.wantIP || (why != "") != tt.lowered {
			t.Errorf("connCaps(%d, %d, %d) = %d, %d, %q; want %d, %d, lowered %v", tt.max, tt.perIP, tt.nofile, m, ip, why, tt.wantMax, tt.wantIP, tt.lowered)
		}
		if tt.lowered && !strings.Contains(why, "--max-connections") {
			t.Errorf("the reason does not name the flag: %q", why)
		}
	}
	// At start the soft limit is the hard one.
	n, err := raiseNoFile()
	if err != nil {
		t.Fatal(err)
	}
	cur, hard := readNoFile(t)
	if cur != strconv.FormatUint(n, 10) && cur != "unlimited" {
		t.Errorf("raiseNoFile = %d, but the soft limit is %s", n, cur)
	}
	// (An unlimited hard limit may be more than the kernel lets the soft
	// one be; then the soft one stays where it was.)
	if hard != "unlimited" && cur != hard {
		t.Errorf("the soft limit %s was not raised to the hard limit %s", cur, hard)
	}
}

func get2(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, body := do(t, c, http.MethodGet, url, "")
	return resp.StatusCode, body
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// readNoFile reads RLIMIT_NOFILE from /proc, independently of the code
// under test.
func readNoFile(t *testing.T) (cur, max string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(strings.TrimPrefix(line, "Max open files")); strings.HasPrefix(line, "Max open files") && len(f) >= 2 {
			return f[0], f[1]
		}
	}
	t.Fatalf("no open files line in /proc/self/limits:\n%s", b)
	return "", ""
}

// TestMCPBoundsFromConfig: --max-batch and --max-reply-bytes reach /mcp.
func TestMCPBoundsFromConfig(t *testing.T) {
	c := testConfig(t)
	c.MaxBatch = 2
	c.MaxReplyBytes = 64 << 10
	c.MaxReadSize = 64 << 10
	r := start(t, c, nil)
	cl := clientFrom("127.0.0.1", false)
	batch := "[" + mcpList + "," + mcpList + "," + mcpList + "]"
	if resp, body := do(t, cl, http.MethodPost, r.url+"/mcp", batch); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "more than 2 messages") {
		t.Errorf("batch of 3 with --max-batch 2: %d %.300q", resp.StatusCode, body)
	}
	// 5000 lines of 30 bytes pass 64 KiB.
	if err := os.WriteFile(c.Root+"/f.txt", []byte(strings.Repeat("012345678901234567890123456789\n", 6000)), 0o644); err != nil {
		t.Fatal(err)
	}
	read := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"f.txt","limit":5000}}}`
	if resp, body := do(t, cl, http.MethodPost, r.url+"/mcp", read); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"code":-32000`) || !strings.Contains(body, "--max-reply-bytes") {
		t.Errorf("a 5000-line read with --max-reply-bytes 64KiB: %d %.300q", resp.StatusCode, body)
	}
}

// TestIdleTLSConnectionsAreShed: the same over TLS, where the HTTP server
// holds a tls.Conn around the counted connection, and with a WebSocket (not
// idle, never shed) arriving as the connection that needs room.
func TestIdleTLSConnectionsAreShed(t *testing.T) {
	c := testConfig(t)
	c.TLSCert, c.TLSKey = writeCert(t, t.TempDir(), "tls")
	c.MaxConns, c.MaxConnsPerIP = 5, 5
	r := start(t, c, nil)
	base := "https://" + strings.TrimPrefix(r.url, "http://")
	for range 4 {
		cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second}
		t.Cleanup(cl.CloseIdleConnections)
		if resp, _ := do(t, cl, http.MethodGet, base+"/health", ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("/health: %d", resp.StatusCode)
		}
	}
	lim := r.limiter(t)
	state := func() (total, idle int) {
		lim.mu.Lock()
		defer lim.mu.Unlock()
		return lim.total, lim.idleCountLocked()
	}
	waitFor(t, "4 idle TLS connections", func() bool { n, i := state(); return n == 4 && i == 4 })
	// At 80% (4 of 5): the oldest idle connection is closed to admit the
	// WebSocket, which then holds its slot.
	d := websocket.Dialer{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	ws, _, err := d.Dial("wss"+strings.TrimPrefix(base, "https")+"/ssh", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	waitFor(t, "one idle TLS connection closed for the WebSocket", func() bool { n, i := state(); return n == 4 && i == 3 })
}

// TestSilentBodiesDoNotPinSlots: connections that send a header declaring a
// body and then nothing are neither counted as idle nor sheddable; they
// must still end (the body deadline, the reserve's lifetime), so that they
// cannot hold every slot and the reserve and silence /health.
func TestSilentBodiesDoNotPinSlots(t *testing.T) {
	// Restored by a cleanup registered before the daemon's, so it runs
	// after the daemon (whose handlers read it) has stopped.
	saved := bodyTimeout
	t.Cleanup(func() { bodyTimeout = saved })
	bodyTimeout = time.Second
	c := testConfig(t)
	c.MaxConns, c.MaxConnsPerIP = 4, 4
	r := start(t, c, nil)
	var held []net.Conn
	for i := 0; i < 4+reserveConns; i++ {
		cn := dialRaw(t, r.url, "127.0.0.1")
		if _, err := cn.Write([]byte("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		held = append(held, cn)
	}
	defer func() {
		for _, h := range held {
			h.Close()
		}
	}()
	waitCounted(t, r, 4, reserveConns)
	// Past the body deadline and the reserve's lifetime, all of them are
	// gone and /health answers from any address.
	deadline := time.Now().Add(reserveLifetime + 10*time.Second)
	for {
		total, reserved := r.limiter(t).counts()
		if total == 0 && reserved == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("silent bodies still hold %d connections and %d reserve slots", total, reserved)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The counts reach zero as the server closes the connections; the
	// listener's own bookkeeping of them may lag by a moment, so /health
	// gets until the deadline to answer.
	probe := clientFrom("127.0.0.2", false)
	for {
		resp, err := probe.Get(r.url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("/health after silent bodies: %d", resp.StatusCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health after silent bodies: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A request on a reserve connection that declares a body is refused without
// waiting for the body.
func TestReserveRefusesBodies(t *testing.T) {
	h := reserveGate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the request reached the handler")
	}))
	req := httptest.NewRequest(http.MethodGet, "/health", strings.NewReader("0123456789"))
	req = req.WithContext(context.WithValue(req.Context(), reserveKey{}, true))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || rec.Header().Get("Connection") != "close" {
		t.Fatalf("got %d, Connection %q; want 400 and close", rec.Code, rec.Header().Get("Connection"))
	}
}

// acceptFrom opens n connections from the loopback address src to l and
// returns them as l.Accept admitted them; cleanup closes both ends.
func acceptFrom(t *testing.T, l *connLimiter, src string, n int) []*limitedConn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	var out []*limitedConn
	for range n {
		c, err := d.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		a, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		out = append(out, a.(*limitedConn))
	}
	return out
}

// TestShedReadsPerConnectionIdleness holds the shedding to the idle state
// each connection keeps (limitedConn.idle, set by the ConnState hook without
// a lock): under pressure the oldest idle connection goes first; one whose
// request runs, one handed over (hijacked), one closed, and one in its first
// newConnGrace without a request are never picked; a connection whose
// request began after the scan read it is not closed; a connection's
// release drops it from the set; and an address at its own cap sheds one
// of its own idle connections, not another address's.
func TestShedReadsPerConnectionIdleness(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newConnLimiter(ln, 5, 4, slog.New(slog.DiscardHandler), func(string) {})
	defer l.Close()
	cs := acceptFrom(t, l, "127.0.0.1", 4)
	older, newer, active, fresh := cs[0], cs[1], cs[2], cs[3]
	for _, c := range cs {
		l.ConnState(c, http.StateNew)
	}
	l.ConnState(older, http.StateActive)
	l.ConnState(older, http.StateIdle)
	l.ConnState(newer, http.StateActive)
	l.ConnState(newer, http.StateIdle)
	l.ConnState(active, http.StateActive)
	// The hook stamps the wall clock; set the two idle times apart so the
	// order does not rest on the clock's resolution.
	older.idle.Store(time.Now().Add(-2 * time.Minute).UnixNano())
	newer.idle.Store(time.Now().Add(-time.Minute).UnixNano())
	if n := func() int { l.mu.Lock(); defer l.mu.Unlock(); return l.idleCountLocked() }(); n != 3 {
		t.Fatalf("%d idle connections, want 3 (two idle, one new)", n)
	}

	// 4 of 5 admitted: one over 80% (3), from another address.
	other := netip.MustParseAddr("127.0.0.2")
	if shed := l.shedIfPressed(other); len(shed) != 1 || shed[0] != older {
		t.Fatalf("shed %v, want only the oldest idle connection %p", shed, older)
	}
	// Claimed: a second scan before it is closed does not pick it again.
	if shed := l.shedIfPressed(other); len(shed) != 1 || shed[0] != newer {
		t.Fatalf("second scan shed %v, want the next idle one %p", shed, newer)
	}
	// Nothing else is idle: the new one is in its grace, the other runs a request.
	if shed := l.shedIfPressed(other); len(shed) != 0 {
		t.Fatalf("third scan shed %d connections, want none", len(shed))
	}
	older.Close()
	newer.Close()
	if total, _ := l.counts(); total != 2 || len(l.conns) != 2 {
		t.Fatalf("after two closes: %d admitted, %d tracked; want 2 and 2", total, len(l.conns))
	}

	// Past its grace, the silent new connection is as idle as any.
	fresh.idle.Store(-time.Now().Add(-2 * newConnGrace).UnixNano())
	// A request that began after the scan read the connection: the claim
	// (a compare-and-swap on the value read) fails and it stays open.
	l.ConnState(active, http.StateIdle)
	scanned := active.idle.Load()
	l.ConnState(active, http.StateActive)
	if active.idle.CompareAndSwap(scanned, 0) {
		t.Fatal("claimed a connection whose request had begun")
	}
	for _, st := range []http.ConnState{http.StateHijacked, http.StateClosed} {
		l.ConnState(active, http.StateIdle)
		l.ConnState(active, st)
		if _, _, idle := idleSince(active.idle.Load()); idle {
			t.Errorf("idle after %v", st)
		}
	}

	// The address at its cap (4 of 4) sheds one of its own idle
	// connections; another address's stay.
	mine := acceptFrom(t, l, "127.0.0.3", 2)
	for _, c := range mine {
		l.ConnState(c, http.StateNew)
		l.ConnState(c, http.StateActive)
		l.ConnState(c, http.StateIdle)
	}
	l.mu.Lock()
	l.perIP = 2
	l.max = 100 // no global pressure
	l.mu.Unlock()
	shed := l.shedIfPressed(netip.MustParseAddr("127.0.0.3"))
	if len(shed) != 1 || (shed[0] != mine[0] && shed[0] != mine[1]) {
		t.Fatalf("shed %v at the per-address cap, want one of 127.0.0.3's own", shed)
	}
	if shed := l.shedIfPressed(netip.MustParseAddr("127.0.0.4")); len(shed) != 0 {
		t.Fatalf("an address under its cap with no global pressure shed %d", len(shed))
	}
}

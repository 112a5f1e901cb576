package daemon

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/internal/audit"
	"github.com/agentbe/agentbe-daemon/internal/previewtest"
	"github.com/agentbe/agentbe-daemon/internal/wsnet"
	"github.com/agentbe/agentbe-daemon/ssh/sshd"
	"github.com/agentbe/agentbe-daemon/tools/previews"
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
	waitCounted(t, r, len(held), 0)
	deadline := time.Now().Add(reserveLifetime + 10*time.Second)
	for {
		total, reserved := r.limiter(t).counts()
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
	pv := r.d.w.previews
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

// certSigner is a key with a user certificate of ca carrying ext
// (extensions) and crit (critical options), valid for principals now.
func certSigner(t *testing.T, ca gossh.Signer, name string, principals []string, ext, crit map[string]string) gossh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cert := &gossh.Certificate{Key: key.PublicKey(), Serial: 1, CertType: gossh.UserCert, KeyId: name,
		ValidPrincipals: principals, ValidAfter: uint64(time.Now().Add(-time.Hour).Unix()),
		ValidBefore: uint64(time.Now().Add(time.Hour).Unix()),
		Permissions: gossh.Permissions{Extensions: ext, CriticalOptions: crit}}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	s, err := gossh.NewCertSigner(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fetch sends GET path over a forwarded connection and returns the body.
func fetch(t *testing.T, c net.Conn, path string) string {
	t.Helper()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path)
	b, _ := io.ReadAll(c)
	_, body, _ := strings.Cut(string(b), "\r\n\r\n")
	return body
}

// directTCPIP opens a direct-tcpip channel to host:port as the client
// sends it, unchecked (x/crypto's Dial parses the port first).
func directTCPIP(c *gossh.Client, host string, port uint32) error {
	ch, reqs, err := c.OpenChannel("direct-tcpip", gossh.Marshal(struct {
		Host       string
		Port       uint32
		OriginHost string
		OriginPort uint32
	}{host, port, "127.0.0.1", 40000}))
	if err == nil {
		go gossh.DiscardRequests(reqs)
		ch.Close()
	}
	return err
}

// TestAttackSSHForwardWithCertificates attacks `ssh -L` on the SSH port
// with user certificates (docs/ssh.md): a certificate with
// permit-port-forwarding reaches the workspace's server and nothing else
// (not the daemon's HTTP or SSH port, not a host service, not a
// non-loopback host, not a malformed port); one without the extension is
// refused as OpenSSH refuses it; a force-command or unmet source-address
// certificate does not log in; remote forwarding, Unix-socket forwarding
// and every other channel type are refused; and one connection holds at
// most 64 forwards (the 65th is refused, the previews' slots are given
// back when they close).
func TestAttackSSHForwardWithCertificates(t *testing.T) {
	c := previewConfig(t, "software", true)
	dir := t.TempDir()
	_, caPriv, _ := ed25519.GenerateKey(rand.Reader)
	ca, _ := gossh.NewSignerFromKey(caPriv)
	caFile := filepath.Join(dir, "ca.pub")
	must(t, os.WriteFile(caFile, gossh.MarshalAuthorizedKey(ca.PublicKey()), 0o644))
	c.SSHListen = freeAddr(t)
	c.SSHTrustedUserCAKeys = caFile
	must(t, c.Validate())
	r := start(t, c, nil)
	waitFor(t, "the SSH port", func() bool { return r.d.SSHAddr() != "" })
	port := startPreviewServer(t, r, c.Root)
	pv := r.d.w.previews
	login := func(s gossh.Signer) (*gossh.Client, error) {
		cl, err := gossh.Dial("tcp", r.d.SSHAddr(), &gossh.ClientConfig{User: "agent", Auth: []gossh.AuthMethod{gossh.PublicKeys(s)},
			HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 20 * time.Second})
		if err == nil {
			t.Cleanup(func() { cl.Close() })
		}
		return cl, err
	}
	permit := map[string]string{"permit-port-forwarding": ""}
	fwd, err := login(certSigner(t, ca, "fwd", []string{"agent"}, permit, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		fc, err := fwd.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("a forward to %s:%d: %v", host, port, err)
		}
		if got := fetch(t, fc, "/cert"); got != "hello from workspace at /cert" {
			t.Fatalf("through %s: %q", host, got)
		}
	}
	// Not the workspace's: refused whatever the host says.
	sshPort, _ := strconv.Atoi(r.d.SSHAddr()[strings.LastIndex(r.d.SSHAddr(), ":")+1:])
	for what, p := range map[string]int{"the daemon's HTTP port": portOf(t, r.url), "the SSH port itself": sshPort,
		"a loopback server of the host's": previewtest.HostServer(t, "host secret")} {
		if _, err := fwd.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil || !strings.Contains(err.Error(), "no workspace process listens") {
			t.Errorf("a forward to %s: %v", what, err)
		}
	}
	refusedHosts := []string{"10.0.0.1", "example.com", "127.0.0.2", "0.0.0.0", "::ffff:127.0.0.1", "localhost.", "127.1", "0x7f000001", "", "[::1]x"}
	for _, host := range refusedHosts {
		if err := directTCPIP(fwd, host, uint32(port)); err == nil || !strings.Contains(err.Error(), "is not localhost, 127.0.0.1 or ::1") {
			t.Errorf("a forward to %q: %v", host, err)
		}
	}
	for _, p := range []uint32{0, 65536, 1 << 31} {
		if err := directTCPIP(fwd, "127.0.0.1", p); err == nil || !strings.Contains(err.Error(), "is not in 1..65535") {
			t.Errorf("a forward to port %d: %v", p, err)
		}
	}
	// Remote and Unix-socket forwarding: no listening socket, no socket path.
	for _, req := range []string{"tcpip-forward", "cancel-tcpip-forward", "streamlocal-forward@openssh.com", "cancel-streamlocal-forward@openssh.com"} {
		if ok, _, err := fwd.SendRequest(req, true, gossh.Marshal(struct {
			Addr string
			Port uint32
		}{"127.0.0.1", 0})); ok || err != nil {
			t.Errorf("global request %s: granted %v, %v", req, ok, err)
		}
	}
	if l, err := fwd.Listen("tcp", "127.0.0.1:0"); err == nil {
		l.Close()
		t.Error("ssh -R opened a listening port")
	}
	for _, kind := range []string{"direct-streamlocal@openssh.com", "forwarded-tcpip", "forwarded-streamlocal@openssh.com", "x11", "auth-agent@openssh.com", "tun@openssh.com"} {
		if _, _, err := fwd.OpenChannel(kind, gossh.Marshal(struct{ Path, R string }{"/run/docker.sock", ""})); err == nil {
			t.Errorf("channel %s was opened", kind)
		} else if oe := (*gossh.OpenChannelError)(nil); !errors.As(err, &oe) || oe.Reason != gossh.UnknownChannelType {
			t.Errorf("channel %s: %v", kind, err)
		}
	}

	// The count: 64 forwards held open on one connection, the 65th refused.
	base := measureUsage(t)
	held := make([]net.Conn, 0, 64)
	defer func() {
		for _, h := range held {
			h.Close()
		}
	}()
	for i := range 64 {
		fc, err := fwd.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatalf("forward %d of 64: %v", i+1, err)
		}
		held = append(held, fc)
	}
	if _, err := fwd.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil || !strings.Contains(err.Error(), "too many channels on this connection (limit 64)") {
		t.Errorf("the 65th forward: %v", err)
	}
	at := measureUsage(t)
	if n := pv.Held(); n != 64 {
		t.Errorf("previews hold %d places; want the 64 forwards", n)
	}
	t.Logf("64 forwards held on one certificate connection: %s, from %s (per forward %.1f goroutines, %.1f descriptors, %.0f KiB heap, the test's client end included)",
		at, base, float64(at.goroutines-base.goroutines)/64, float64(at.fds-base.fds)/64, float64(int64(at.heap)-int64(base.heap))/64/1024)
	for _, h := range held {
		h.Close()
	}
	held = held[:0]
	waitFor(t, "the forwards' preview places to be given back", func() bool { return pv.Held() == 0 })
	settles(t, "after the forwards closed", base, 8)

	// A certificate without permit-port-forwarding: refused, as OpenSSH
	// refuses it; it still runs commands.
	noFwd, err := login(certSigner(t, ca, "nofwd", []string{"agent"}, map[string]string{"permit-pty": ""}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noFwd.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil || !strings.Contains(err.Error(), "not permitted for this key") {
		t.Errorf("a certificate without permit-port-forwarding: %v", err)
	}
	if s, err := noFwd.NewSession(); err != nil {
		t.Errorf("a certificate without permit-port-forwarding cannot run commands either: %v", err)
	} else {
		if out, err := s.Output("echo still-runs"); err != nil || string(out) != "still-runs\n" {
			t.Errorf("exec with the certificate: %q %v", out, err)
		}
		s.Close()
	}
	// Critical options this server cannot honour, a source address that
	// does not match, a principal it does not name: no login at all.
	for name, s := range map[string]gossh.Signer{
		"force-command":                certSigner(t, ca, "forced", []string{"agent"}, permit, map[string]string{"force-command": "true"}),
		"verify-required":              certSigner(t, ca, "verify", []string{"agent"}, permit, map[string]string{"verify-required": ""}),
		"source-address 10.0.0.0/8":    certSigner(t, ca, "elsewhere", []string{"agent"}, permit, map[string]string{"source-address": "10.0.0.0/8"}),
		"a principal other than agent": certSigner(t, ca, "other", []string{"root"}, permit, nil),
		"no principals":                certSigner(t, ca, "none", nil, permit, nil),
	} {
		if _, err := login(s); err == nil {
			t.Errorf("a certificate with %s logged in", name)
		}
	}
	if ok, err := login(certSigner(t, ca, "here", []string{"agent"}, permit, map[string]string{"source-address": "127.0.0.1/32"})); err != nil {
		t.Errorf("a certificate whose source-address admits 127.0.0.1: %v", err)
	} else if fc, err := ok.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
		t.Errorf("a forward with source-address 127.0.0.1/32: %v", err)
	} else if got := fetch(t, fc, "/src"); got != "hello from workspace at /src" {
		t.Errorf("through the source-address certificate: %q", got)
	}
}

// TestAttackSSHUnreadChannelData: what an SSH client makes the daemon hold
// with data it sends on channels nobody reads. x/crypto/ssh grants each
// channel a fixed 2 MiB window and keeps what arrives until it is read.
//
// Sessions that never ask for a command are read from the moment they
// open and closed, saying why, once 64 KiB arrived (sshd.MaxDataBeforeRequest):
// 16 of them hold next to nothing once refused (each held its whole window
// before). A channel whose reader is stalled (here a command that never
// reads its stdin; SFTP whose client stops reading the answers, a forward
// whose server does not read, are the same) still holds its window, about
// 2.6 MiB with full packets, and cannot be pushed past it;
// --ssh-max-channels bounds how many channels there are, /ssh and the SSH
// port together, so the daemon holds at most that many windows: the 17th
// channel at 16 is refused. The connection's end gives it all back.
func TestAttackSSHUnreadChannelData(t *testing.T) {
	c := testConfig(t)
	c.AuthToken = previewToken
	const n, window = 16, 2 << 20
	c.SSHMaxChannels, c.SSHMaxChannelsPerIP = n, n
	must(t, c.Validate())
	r := start(t, c, nil)
	cl := sshAs(t, r.url, previewToken)
	base := measureUsage(t)
	chunk := make([]byte, 32<<10)
	// flood writes twice the window on ch (the writes past what the daemon
	// lets in block), counting what went, and says how it ended.
	var sent atomic.Int64
	var wg sync.WaitGroup
	flood := func(ch io.Writer, ended chan<- error) {
		defer wg.Done()
		for range 2 * window / len(chunk) {
			if _, err := ch.Write(chunk); err != nil {
				ended <- err
				return
			}
			sent.Add(int64(len(chunk)))
		}
		ended <- nil
	}

	// Sessions with no request: refused once 64 KiB arrived.
	ended := make(chan error, n)
	stderrs := make(chan string, n)
	for i := range n {
		ch, reqs, err := cl.OpenChannel("session", nil)
		if err != nil {
			t.Fatal(i, err)
		}
		go gossh.DiscardRequests(reqs)
		go func() {
			b, _ := io.ReadAll(ch.Stderr())
			stderrs <- string(b)
		}()
		wg.Add(1)
		go flood(ch, ended)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the sessions with no request were not closed: %d bytes sent", sent.Load())
	}
	time.Sleep(200 * time.Millisecond)
	at := measureUsage(t)
	got, grew := sent.Load(), int64(at.heap)-int64(base.heap)
	for range n {
		if err := <-ended; err == nil {
			t.Errorf("a session with no request took twice the window")
		}
		if msg := <-stderrs; !strings.Contains(msg, "bytes of data before an exec, shell or subsystem request") {
			t.Errorf("a session with no request closed with stderr %q", msg)
		}
	}
	if limit := int64(n * (window + sshd.MaxDataBeforeRequest + 512)); got > limit {
		t.Errorf("the client pushed %d bytes on %d sessions with no request; the windows and what the daemon read allow %d", got, n, limit)
	}
	if limit := int64(n*2*sshd.MaxDataBeforeRequest + (8 << 20)); grew > limit {
		t.Errorf("%d refused sessions hold %.1f MiB of heap; want under %.1f", n, float64(grew)/(1<<20), float64(limit)/(1<<20))
	}
	t.Logf("%d sessions with no request, %.1f MiB sent before they were closed: heap +%.1f MiB; %s",
		n, float64(got)/(1<<20), float64(grew)/(1<<20), at)
	waitFor(t, "the refused sessions' places", func() bool { return r.d.w.sshConf.Channels.Open() == 0 })

	// Commands that never read their stdin: each holds its window, and
	// there are at most --ssh-max-channels of them.
	sent.Store(0)
	ended = make(chan error, n)
	for i := range n {
		s, err := cl.NewSession()
		if err != nil {
			t.Fatal(i, err)
		}
		in, err := s.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start("sleep 60"); err != nil {
			t.Fatal(i, err)
		}
		wg.Add(1)
		go flood(in, ended)
	}
	if _, _, err := cl.OpenChannel("session", nil); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("too many channels on this daemon (limit %d)", n)) {
		t.Errorf("a channel past --ssh-max-channels %d: %v", n, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for sent.Load() < n*window && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	at = measureUsage(t)
	got, grew = sent.Load(), int64(at.heap)-int64(base.heap)
	// Besides the window, the command's pipe (64 KiB) and the copy into it
	// (32 KiB) take some.
	if limit := int64(n * (window + 128<<10)); got > limit {
		t.Errorf("the client pushed %d bytes on %d commands that do not read; the windows and pipes allow %d", got, n, limit)
	}
	if grew > n*window*3/2+(8<<20) {
		t.Errorf("%d channels of unread data hold %.1f MiB of heap; want about %d × 2 MiB", n, float64(grew)/(1<<20), n)
	}
	t.Logf("%d commands that do not read, %.1f MiB sent: heap +%.1f MiB (%.2f MiB per channel); %s",
		n, float64(got)/(1<<20), float64(grew)/(1<<20), float64(grew)/n/(1<<20), at)
	cl.Close()
	waitFor(t, "the connection's end", func() bool {
		u := measureUsage(t)
		return int64(u.heap)-int64(base.heap) < 8<<20
	})
	wg.Wait()
}

// TestAttackAuditFloodThroughDaemon drives the audit log's queue to its
// drop point through /mcp: the log is a FIFO nobody reads (a writer that
// fell behind for good), and batches of 64 list_directory calls arrive
// from 4 clients. What holds: no call waits on the
// log, the drops are counted on /metrics and told in the daemon's log,
// the queue's memory stays bounded (each line is cut), and once the log is
// read again it says how many lines were lost.
func TestAttackAuditFloodThroughDaemon(t *testing.T) {
	c := testConfig(t)
	fifo := filepath.Join(t.TempDir(), "audit.fifo")
	must(t, syscall.Mkfifo(fifo, 0o600))
	reader, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	must(t, err)
	defer reader.Close()
	c.AuditLog = fifo
	must(t, c.Validate())
	r := start(t, c, nil)
	base := measureUsage(t)

	var batch strings.Builder
	batch.WriteString("[")
	for i := range 64 {
		if i > 0 {
			batch.WriteString(",")
		}
		fmt.Fprintf(&batch, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"list_directory","arguments":{"path":"."}}}`, i)
	}
	batch.WriteString("]")
	body := batch.String()
	const clients, each = 4, 24 // 4 × 24 × 64 = 6144 calls, 1.5 times the queue
	var slowest atomic.Int64
	began := time.Now()
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := clientFrom(fmt.Sprintf("127.0.0.%d", 20+i), true)
			for range each {
				req, _ := http.NewRequest(http.MethodPost, r.url+"/mcp", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				t0 := time.Now()
				resp, err := cl.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if d := time.Since(t0); d > time.Duration(slowest.Load()) {
					slowest.Store(int64(d))
				}
				if resp.StatusCode != http.StatusOK {
					t.Errorf("a batch: %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(began)
	at := measureUsage(t)
	dropped := r.d.audit.Dropped()
	// The FIFO takes 64 KiB of lines (about 250 of these) before the
	// writer blocks; the queue the next DefaultQueue.
	if dropped < clients*each*64-audit.DefaultQueue-1000 {
		t.Errorf("%d of %d lines dropped; the queue holds %d and the FIFO 64 KiB", dropped, clients*each*64, audit.DefaultQueue)
	}
	if grew := int64(at.heap) - int64(base.heap); grew > 64<<20 {
		t.Errorf("with the audit queue full the heap grew by %d MiB; want under 64", grew>>20)
	}
	_, metrics := get(t, r.url+"/metrics")
	if !strings.Contains(string(metrics), fmt.Sprintf("agentbe_audit_dropped_total %d", dropped)) {
		t.Errorf("/metrics does not show %d dropped lines", dropped)
	}
	if !strings.Contains(r.logs.String(), "lines are dropped") {
		t.Errorf("the daemon's log does not tell of the drops")
	}
	t.Logf("%d calls from %d clients in %v (slowest batch of 64: %v) with the audit log stuck: %d lines dropped; %s, from %s",
		clients*each*64, clients, took.Round(time.Millisecond), time.Duration(slowest.Load()).Round(time.Millisecond), dropped, at, base)

	// Read the log again: the queue drains and a note says what was lost.
	// (reader was opened non-blocking, so Go's poller waits for it and
	// Close ends a read in progress.)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(reader)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"event":"audit.dropped"`) {
				lines <- sc.Text()
				io.Copy(io.Discard, reader)
				return
			}
		}
		lines <- ""
	}()
	mcpListFrom(t, "127.0.0.1", r.url, "")
	executeTool(t, r.url, "list_directory", `{"path":"."}`)
	select {
	case l := <-lines:
		if !strings.Contains(l, `"dropped":`) {
			t.Errorf("the drop note: %q", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no audit.dropped line once the log was read again")
	}
}

// sshFrom logs in over /ssh from the loopback address src with token.
func sshFrom(t *testing.T, src, url, token string) *gossh.Client {
	t.Helper()
	ws, _, err := wsFrom(src, "ws"+strings.TrimPrefix(url, "http")+"/ssh", http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		t.Fatal(err)
	}
	cc, chans, reqs, err := gossh.NewClientConn(wsnet.New(ws), "ws", &gossh.ClientConfig{
		User: "agent", Auth: []gossh.AuthMethod{gossh.Password(token)}, HostKeyCallback: gossh.InsecureIgnoreHostKey(),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := gossh.NewClient(cc, chans, reqs)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestAttackEveryFaceAtOnce: one client address holds connections on every
// face at once up to --max-connections-per-ip: logged-in /ssh connections
// (each with a session and a forward), /gateway WebSockets, proxied
// WebSockets at /preview/, tool calls in flight on /mcp and /execute, a
// /site/ command in flight, and header slowloris for the rest. What holds:
// the per-address cap counts them all together (one more on any face is
// refused); another address is served; what the daemon holds at the cap
// is measured per face (so the total one address can make it hold is the
// cap times the dearest face); and all of it is given back.
func TestAttackEveryFaceAtOnce(t *testing.T) {
	c := previewConfig(t, "software", true)
	c.Site = t.TempDir()
	must(t, os.CopyFS(c.Site, os.DirFS("../examples/site")))
	const perIP = 40
	c.MaxConns, c.MaxConnsPerIP = 128, perIP
	c.MaxConcurrentCalls = 32
	must(t, c.Validate())
	r := start(t, c, nil)
	port := startPreviewServer(t, r, c.Root)
	const src = "127.0.0.30"
	url, tok := r.url, previewToken
	base := measureUsage(t)
	type stage struct {
		face string
		n    int
		at   usage
	}
	var stages []stage
	prev := base
	note := func(face string, n int) {
		t.Helper()
		at := measureUsage(t)
		stages = append(stages, stage{face, n, at})
		t.Logf("%-40s ×%2d: +%5.1f goroutines, +%4.1f descriptors, +%5.0f KiB heap each (test's client end included)", face, n,
			float64(at.goroutines-prev.goroutines)/float64(n), float64(at.fds-prev.fds)/float64(n), float64(int64(at.heap)-int64(prev.heap))/float64(n)/1024)
		prev = at
	}
	held := 0

	// /ssh: logged in, each with an idle shell-less session and a forward.
	var closers []io.Closer // everything the address holds, let go at the end
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	for range 6 {
		cl := sshFrom(t, src, url, tok)
		closers = append(closers, cl)
		if _, err := cl.NewSession(); err != nil {
			t.Fatal(err)
		}
		fc, err := cl.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		closers = append(closers, fc)
	}
	held += 6
	note("/ssh (a session and a forward each)", 6)

	// /gateway, each having answered a tools.list.
	gwURL := "ws" + strings.TrimPrefix(url, "http") + "/gateway"
	for range 6 {
		ws, _, err := wsFrom(src, gwURL, http.Header{"Authorization": {"Bearer " + tok}})
		if err != nil {
			t.Fatal(err)
		}
		closers = append(closers, ws)
		if got := rpcGW(t, ws, `{"jsonrpc":"2.0","id":1,"method":"tools.list","params":{"sessionId":"s"}}`); !strings.Contains(got, "read_text_file") {
			t.Fatalf("tools.list: %.200s", got)
		}
	}
	held += 6
	note("/gateway", 6)

	// /preview/ WebSockets.
	pvURL := fmt.Sprintf("ws%s/preview/%d/echo", strings.TrimPrefix(url, "http"), port)
	for range 6 {
		ws, _, err := wsFrom(src, pvURL, http.Header{"Authorization": {"Bearer " + tok}})
		if err != nil {
			t.Fatal(err)
		}
		closers = append(closers, ws)
	}
	held += 6
	note("/preview/ WebSockets", 6)

	// Calls in flight: exec sleep 20 to 25 on /mcp and /execute; the
	// client's going away ends them (its request's context).
	var cancels []context.CancelFunc
	defer func() {
		for _, cancel := range cancels {
			cancel()
		}
	}()
	inflight := func(method, path, body string) {
		ctx, cancel := context.WithCancel(context.Background())
		cancels = append(cancels, cancel)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, method, url+path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+tok)
			if resp, err := clientFrom(src, false).Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	waitCalls := func(n int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			out, _ := exec.Command("pgrep", "-c", "-f", "sleep 2[0-9]").Output()
			if got, _ := strconv.Atoi(strings.TrimSpace(string(out))); got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the calls in flight did not all start (want %d)", n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for i := range 6 {
		inflight(http.MethodPost, "/mcp", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 2%d"}}}`, i, i))
	}
	waitCalls(6)
	held += 6
	note("/mcp calls in flight (exec sleep)", 6)
	for i := range 6 {
		inflight(http.MethodPost, "/execute", fmt.Sprintf(`{"tool_name":"exec","arguments":{"command":"sleep 2%d"}}`, i))
	}
	waitCalls(12)
	held += 6
	note("/execute calls in flight (exec sleep)", 6)

	// The rest of the address's slots: header slowloris on /site/.
	for i := 0; held < perIP; i++ {
		cn := dialRaw(t, url, src)
		fmt.Fprintf(cn, "GET /site/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow-%d: ", i)
		closers = append(closers, cn)
		held++
	}
	time.Sleep(100 * time.Millisecond)
	note("/site/ header slowloris", perIP-30)
	lim := r.limiter(t)
	lim.mu.Lock()
	n := lim.byIP[netip.MustParseAddr(src)]
	lim.mu.Unlock()
	if n != perIP {
		t.Errorf("the daemon counts %d connections of the address; want %d", n, perIP)
	}
	at := measureUsage(t)

	// One more on any face from the same address: refused (the reserve's
	// 503, or closed), never served.
	for _, path := range []string{"/mcp", "/execute", "/site/", fmt.Sprintf("/preview/%d/", port), "/tools"} {
		req, _ := http.NewRequest(http.MethodGet, url+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := clientFrom(src, false).Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("%s past the address's cap: %d", path, resp.StatusCode)
			}
		}
	}
	for _, path := range []string{"/ssh", "/gateway"} {
		if ws, resp, err := wsFrom(src, "ws"+strings.TrimPrefix(url, "http")+path, http.Header{"Authorization": {"Bearer " + tok}}); err == nil {
			ws.Close()
			t.Errorf("%s past the address's cap was upgraded", path)
		} else if resp != nil && resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s past the address's cap: %d", path, resp.StatusCode)
		}
	}
	// Another address is served on every face.
	if code := mcpListFrom(t, "127.0.0.31", url, tok); code != http.StatusOK {
		t.Errorf("/mcp from another address: %d", code)
	}
	if ws, _, err := wsFrom("127.0.0.31", pvURL, http.Header{"Authorization": {"Bearer " + tok}}); err != nil {
		t.Errorf("/preview/ from another address: %v", err)
	} else {
		ws.Close()
	}
	sshFrom(t, "127.0.0.31", url, tok).Close()
	if code, _ := send(t, http.MethodPost, url+"/site/data", `{"command":["head","-n","1","cities.csv"]}`, bearer(tok)); code != http.StatusOK {
		t.Errorf("/site/ from another address: %d", code)
	}
	resp, err := clientFrom("127.0.0.31", false).Get(url + "/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/health from another address: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	dearest := 0.0
	for i, s := range stages {
		p := base
		if i > 0 {
			p = stages[i-1].at
		}
		dearest = max(dearest, float64(s.at.goroutines-p.goroutines)/float64(s.n))
	}
	t.Logf("one address at its cap of %d connections on every face: %s, from %s (+%d goroutines, +%d descriptors, +%.1f MiB heap); at the default cap of 128 the dearest face would make it about %.0f goroutines",
		perIP, at, base, at.goroutines-base.goroutines, at.fds-base.fds, float64(int64(at.heap)-int64(base.heap))/(1<<20), dearest*128)

	// The address lets go of everything: the daemon is back where it was.
	for _, cancel := range cancels {
		cancel()
	}
	for _, c := range closers {
		c.Close()
	}
	closers, cancels = nil, nil
	end := settles(t, "after the address let go", base, 10)
	t.Logf("after: %s", end)
}

// TestAttackPreviewCapSharedBySSH: the previews' cap (256 connections) is
// the daemon's, not an address's or a token's: one client with 4 SSH
// connections of 64 forwards each holds all of it. What holds is the bound
// (the 257th forward is refused with the cap's error, the proxy answers
// 503 to everyone meanwhile, nothing hangs) and the release (closing the
// forwards gives every place back); what does not is fairness between
// the holders of tokens that may run commands.
func TestAttackPreviewCapSharedBySSH(t *testing.T) {
	c := previewConfig(t, "software", true)
	must(t, c.Validate())
	r := start(t, c, nil)
	port := startPreviewServer(t, r, c.Root)
	pv := r.d.w.previews
	base := measureUsage(t)
	var held []net.Conn
	defer func() {
		for _, h := range held {
			h.Close()
		}
	}()
	var clients []*gossh.Client
	for range previews.DefaultMaxConns / 64 {
		cl := sshFrom(t, "127.0.0.40", r.url, previewToken)
		clients = append(clients, cl)
		for range 64 {
			fc, err := cl.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err != nil {
				t.Fatalf("forward %d: %v", len(held)+1, err)
			}
			held = append(held, fc)
		}
	}
	if n := pv.Held(); n != previews.DefaultMaxConns {
		t.Fatalf("previews hold %d; want all %d", n, previews.DefaultMaxConns)
	}
	at := measureUsage(t)
	extra := sshFrom(t, "127.0.0.41", r.url, previewToken)
	if _, err := extra.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil || !strings.Contains(err.Error(), "too many preview connections (limit 256)") {
		t.Errorf("a forward past the previews' cap: %v", err)
	}
	code, body := send(t, http.MethodGet, fmt.Sprintf("%s/preview/%d/", r.url, port), "", previewAuth)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "too many preview connections") {
		t.Errorf("/preview/ from another client with the cap held: %d %s", code, body)
	}
	t.Logf("%d forwards from one address hold every preview place: %s, from %s", len(held), at, base)
	for _, h := range held {
		h.Close()
	}
	held = nil
	waitFor(t, "the preview places to be given back", func() bool { return pv.Held() == 0 })
	if code, _ := send(t, http.MethodGet, fmt.Sprintf("%s/preview/%d/", r.url, port), "", previewAuth); code != http.StatusOK {
		t.Errorf("/preview/ once the forwards closed: %d", code)
	}
	for _, cl := range clients {
		cl.Close()
	}
	extra.Close()
}

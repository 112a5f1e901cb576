package sshws

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/ssh/sshd"
	"github.com/agentbe/agentbe-daemon/ssh/wsclient"
)

// startSleeper starts `sleep` on a new session and returns its pid (in
// software mode commands share our pid namespace).
func startSleeper(t *testing.T, c *gossh.Client) (*gossh.Session, int) {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := s.StdoutPipe()
	if err := s.Start("echo $$; exec sleep 1000"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	return s, pid
}

// waitGone waits (bounded) until pid no longer exists or is a zombie.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(b), ") Z ") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d still running", pid)
}

func TestVanishingClientIsDropped(t *testing.T) {
	e := newEnv(t, withOpts(func(o *Options) { o.KeepaliveInterval = 50 * time.Millisecond }))
	// A client whose WebSocket layer stops answering: pings are ignored and
	// nothing is sent, as if the machine had dropped off the network.
	ws, _, err := websocket.DefaultDialer.Dial(e.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn := wsclient.NewConn(ws)
	var silent atomic.Bool
	ws.SetPingHandler(func(data string) error {
		if silent.Load() {
			return nil
		}
		return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	c, err := sshClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, pid := startSleeper(t, c)
	defer s.Close()
	silent.Store(true)

	if err := s.Wait(); err == nil {
		t.Fatal("session ended cleanly; want the connection dropped")
	}
	if code, reason := conn.CloseReason(); code != wsclient.CloseInternal || reason != "keepalive timeout" {
		t.Errorf("close %d %q, want 1011 keepalive timeout", code, reason)
	}
	waitGone(t, pid)
}

func TestLoginTimeout(t *testing.T) {
	e := newEnv(t, withConfig(func(c *sshd.Config) { c.LoginTimeout = 50 * time.Millisecond }))
	// A peer that upgrades and answers pings but never speaks SSH (it reads
	// and ignores the server's banner).
	ws, _, err := websocket.DefaultDialer.Dial(e.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := ws.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			if ce.Code != wsclient.ClosePolicy || ce.Text != "SSH login timeout" {
				t.Fatalf("close %d %q, want 1008 SSH login timeout", ce.Code, ce.Text)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// A client that logs in is not affected once its timer has passed. The
	// timeout is longer here so that the handshake itself (post-quantum key
	// exchange on a loaded CI machine) never races the 50ms one above.
	e = newEnv(t, withConfig(func(c *sshd.Config) { c.LoginTimeout = time.Second }))
	c := e.dial(t, "")
	time.Sleep(1500 * time.Millisecond)
	if out, _, code, _ := run(t, c, "echo in", ""); out != "in\n" || code != 0 {
		t.Fatalf("%q %d", out, code)
	}
}

func TestKeepaliveKeepsAnsweringPeerAlive(t *testing.T) {
	// The server drops a peer silent for 3 intervals, and the peer's pong
	// waits for its reading goroutine to be scheduled (and, during the
	// handshake, for its key exchange to be computed): 250ms, not less, so
	// that a loaded machine under -race does not stall the peer past the
	// 750ms (at 20ms, a 60ms stall dropped it, in the handshake or idle).
	e := newEnv(t, withOpts(func(o *Options) { o.KeepaliveInterval = 250 * time.Millisecond }))
	c := e.dial(t, "")
	// Idle for 8 keepalive intervals: the peer answers pings, so it stays.
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if out, err := s.Output("sleep 2; echo alive"); err != nil || string(out) != "alive\n" {
		t.Fatalf("%q %v", out, err)
	}
}

func TestClientClosesChannelKillsCommand(t *testing.T) {
	e := newEnv(t)
	c := e.dial(t, "")
	s, pid := startSleeper(t, c)
	s.Close()
	waitGone(t, pid)
	// The connection is still good.
	if out, _, code, _ := run(t, c, "echo ok", ""); out != "ok\n" || code != 0 {
		t.Fatalf("%q %d", out, code)
	}
}

func TestClientDisconnectKillsCommand(t *testing.T) {
	e := newEnv(t)
	conn, c := dialConn(t, e.url)
	_, pid := startSleeper(t, c)
	conn.Close() // the WebSocket goes away under the SSH connection
	c.Close()
	waitGone(t, pid)
}

func TestShutdown(t *testing.T) {
	e := newEnv(t)
	conn, c := dialConn(t, e.url)
	s, pid := startSleeper(t, c)
	defer s.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// Shutdown returned: the process is already reaped.
	if err := syscall.Kill(pid, 0); err == nil {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		t.Fatalf("process %d survived shutdown: %s", pid, b)
	}
	s.Wait()
	if code, reason := conn.CloseReason(); code != wsclient.CloseGoingAway || reason != "Server shutting down" {
		t.Fatalf("close %d %q, want 1001 Server shutting down", code, reason)
	}
	if code, reason := closeCode(t, e.url, nil); code != wsclient.CloseGoingAway {
		t.Fatalf("connection after shutdown: %d %q", code, reason)
	}
	// Close after Shutdown is fine, and idempotent.
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestHostKey: /ssh presents the Config's host key, the one the daemon
// loaded from --ssh-host-key, the same on every connection (the loader's
// own test is sshd's TestLoadOrCreateHostKey).
func TestHostKey(t *testing.T) {
	key, err := sshd.LoadOrCreateHostKey(filepath.Join(t.TempDir(), "key"))
	if err != nil {
		t.Fatal(err)
	}
	ws := fsops.NewMemory("/mem", fsops.Options{})
	e := startEnv(t, "/mem", ws, Options{}, sshd.Config{Workspace: ws, HostKey: key})
	for range 2 {
		var seen gossh.PublicKey
		conn, err := wsclient.Dial(context.Background(), e.url, "")
		if err != nil {
			t.Fatal(err)
		}
		cc, chans, reqs, err := gossh.NewClientConn(conn, "ws", &gossh.ClientConfig{
			User: "agent",
			HostKeyCallback: func(_ string, _ net.Addr, key gossh.PublicKey) error {
				seen = key
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		gossh.NewClient(cc, chans, reqs).Close()
		if !bytes.Equal(seen.Marshal(), key.PublicKey().Marshal()) {
			t.Fatal("server presented another host key")
		}
	}
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without an SSH configuration succeeded")
	}
}

// TestServeHTTPReturnsAfterLogin: the HTTP handler returns once the SSH
// client has logged in (the connection carries on, on a goroutine of its
// own), so net/http's per-request state is not held by idle connections;
// Shutdown still reaches the connection.
func TestServeHTTPReturnsAfterLogin(t *testing.T) {
	e := newEnv(t)
	returned := make(chan struct{}, 1)
	hts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.srv.ServeHTTP(w, r)
		returned <- struct{}{}
	}))
	defer hts.Close()
	conn, c := dialConn(t, hts.URL)
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("ServeHTTP still running after the login")
	}
	if out, _, code, _ := run(t, c, "echo alive", ""); out != "alive\n" || code != 0 {
		t.Fatalf("%q %d", out, code)
	}
	if err := e.srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Shutdown has sent the close; the client knows its code once its
	// reader has read it, which ends the SSH connection.
	waited := make(chan struct{})
	go func() { c.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second): // a hang guard, not a speed check
		t.Fatal("SSH connection still up 10s after Shutdown")
	}
	if code, _ := conn.CloseReason(); code != wsclient.CloseGoingAway {
		t.Fatalf("close code %d after Shutdown, want 1001", code)
	}
}

// TestLargestControlFrame: the server's small WebSocket read buffer still
// takes the largest control frame (125 bytes of payload). Messages larger
// than the buffer are in every other test (a key-exchange packet alone is
// over 1 KiB).
func TestLargestControlFrame(t *testing.T) {
	e := newEnv(t)
	ws, _, err := websocket.DefaultDialer.Dial(e.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	payload := strings.Repeat("p", 125)
	pong := make(chan string, 1)
	ws.SetPongHandler(func(s string) error { pong <- s; return nil })
	if err := ws.WriteControl(websocket.PingMessage, []byte(payload), time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	go func() {
		for {
			if _, _, err := ws.NextReader(); err != nil {
				return
			}
		}
	}()
	select {
	case got := <-pong:
		if got != payload {
			t.Fatalf("pong %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no pong for a 125-byte ping")
	}
}

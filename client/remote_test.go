package client

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/daemon"
	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// testDaemon serves a fresh workspace on a loopback port with a token, in
// this process, until the test ends (or stop is called).
type testDaemon struct {
	root, token string
	port        int
	stop        func()
	hostKey     string
	d           *daemon.Daemon
}

func startDaemon(t *testing.T, addr string) *testDaemon {
	t.Helper()
	return startDaemonAddr(t, addr, nil)
}

func startDaemonWith(t *testing.T, tweak func(*config.Config)) *testDaemon {
	t.Helper()
	return startDaemonAddr(t, "127.0.0.1:0", tweak)
}

func startDaemonAddr(t testing.TB, addr string, tweak func(*config.Config)) *testDaemon {
	t.Helper()
	c := config.Default()
	c.Root = t.TempDir()
	c.Isolation = "software"
	c.SSHHostKey = filepath.Join(t.TempDir(), "host_key")
	c.AuthToken = "remote-test-token-0123456789abcdef"
	c.ShutdownTimeout = 2 * time.Second
	if tweak != nil {
		tweak(&c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(c, daemon.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			d.Close()
		})
	}
	t.Cleanup(stop)
	if c.SSHListen != "" {
		deadline := time.Now().Add(30 * time.Second) // a hang guard
		for d.SSHAddr() == "" {
			if time.Now().After(deadline) {
				t.Fatal("the SSH port did not come up")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return &testDaemon{root: c.Root, token: c.AuthToken, port: ln.Addr().(*net.TCPAddr).Port, stop: stop, hostKey: c.SSHHostKey, d: d}
}

func (d *testDaemon) options() RemoteOptions {
	return RemoteOptions{Host: "127.0.0.1", Port: d.port, Root: d.root, Token: d.token}
}

// TestRemoteContract: the remote backend against our daemon passes the
// contract suite every kind passes (files, escapes, exec with the daemon's
// policy, scopes, lifecycle, MCP over the daemon's /mcp).
func TestRemoteContract(t *testing.T) {
	runContractMCP(t, func(t *testing.T) Backend {
		d := startDaemon(t, "127.0.0.1:0")
		r, err := NewRemote(context.Background(), d.options())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}, true, MCPOptions{})
}

func TestRemoteRefusals(t *testing.T) {
	d := startDaemon(t, "127.0.0.1:0")
	ctx := context.Background()
	bad := d.options()
	bad.Token = "wrong"
	if _, err := NewRemote(ctx, bad); !errcode.Is(err, errcode.AuthFailed) || !strings.Contains(err.Error(), "refused the token") {
		t.Errorf("a wrong token: %v", err)
	}
	for _, o := range []RemoteOptions{{Root: "/x"}, {Host: "h"}, {Host: "h", Root: "rel"}, {Host: "h", Root: "/x", Port: 70000}} {
		if _, err := NewRemote(ctx, o); !errcode.Is(err, errcode.InvalidConfiguration) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	closed := d.options()
	closed.Port = freeTCPPort(t)
	if _, err := NewRemote(ctx, closed); !errcode.Is(err, errcode.ConnectionClosed) || !errors.Is(err, ErrConnectionClosed) {
		t.Errorf("nothing listening: %v", err)
	}
}

// TestRemoteReconnects: when the daemon goes away the backend is
// reconnecting and operations fail at once with CONNECTION_CLOSED; when it
// is back on the same address the backend reconnects and works; when it
// never comes back the backend ends disconnected. Destroy during
// reconnection stops it.
func TestRemoteReconnects(t *testing.T) {
	ctx := context.Background()
	d := startDaemon(t, "127.0.0.1:0")
	addr := "127.0.0.1:" + itoa(d.port)
	opts := d.options()
	opts.KeepaliveInterval = 200 * time.Millisecond
	opts.Reconnect = ReconnectOptions{MaxAttempts: 40, InitialDelay: 50 * time.Millisecond, MaxDelay: 200 * time.Millisecond}
	r, err := NewRemote(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Destroy()
	changes := make(chan StatusChange, 16)
	r.OnStatusChange(func(c StatusChange) { changes <- c })
	if err := r.Write(ctx, "a.txt", []byte("before")); err != nil {
		t.Fatal(err)
	}
	d.stop()
	waitStatus(t, changes, StatusReconnecting)
	if _, err := r.Read(ctx, "a.txt"); !errors.Is(err, ErrConnectionClosed) {
		t.Errorf("a read while reconnecting: %v", err)
	}
	// The daemon comes back on the same address, over the same root.
	d2 := startDaemonAt(t, addr, d.root, d.token)
	_ = d2
	waitStatus(t, changes, StatusConnected)
	if got, err := r.Read(ctx, "a.txt"); err != nil || string(got) != "before" {
		t.Fatalf("after reconnecting: %q %v", got, err)
	}

	// A daemon that never comes back: disconnected after the attempts.
	once := startDaemon(t, "127.0.0.1:0")
	o := once.options()
	o.KeepaliveInterval = 200 * time.Millisecond
	o.Reconnect = ReconnectOptions{MaxAttempts: 2, InitialDelay: 20 * time.Millisecond, MaxDelay: 40 * time.Millisecond}
	r2, err := NewRemote(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	ch2 := make(chan StatusChange, 16)
	r2.OnStatusChange(func(c StatusChange) { ch2 <- c })
	once.stop()
	waitStatus(t, ch2, StatusReconnecting)
	waitStatus(t, ch2, StatusDisconnected)
	if _, err := r2.Read(ctx, "x"); !errcode.Is(err, errcode.ConnectionClosed) || !strings.Contains(err.Error(), "after 2 reconnection attempts") {
		t.Errorf("after giving up: %v", err)
	}
	r2.Destroy()
	if r2.Status() != StatusDestroyed {
		t.Errorf("status after destroy: %s", r2.Status())
	}
}

func waitStatus(t *testing.T, ch <-chan StatusChange, want Status) {
	t.Helper()
	timeout := time.After(30 * time.Second) // a hang guard
	for {
		select {
		case c := <-ch:
			if c.To == want {
				return
			}
		case <-timeout:
			t.Fatalf("no transition to %s", want)
		}
	}
}

// startDaemonAt serves root with token on addr (a daemon restarted in
// place).
func startDaemonAt(t *testing.T, addr, root, token string) *testDaemon {
	t.Helper()
	c := config.Default()
	c.Root = root
	c.Isolation = "software"
	c.SSHHostKey = filepath.Join(t.TempDir(), "host_key")
	c.AuthToken = token
	c.ShutdownTimeout = 2 * time.Second
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(c, daemon.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	for i := 0; ; i++ { // the old listener's port may take a moment to free
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		if i > 100 {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done; d.Close() })
	return &testDaemon{root: root, token: token, port: ln.Addr().(*net.TCPAddr).Port}
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func itoa(n int) string { return strconv.Itoa(n) }

// startReference runs the npm package's own daemon (agent-backend 0.13.2,
// from the interop suite's node_modules: cd interop && npm ci) on a fresh
// workspace.
func startReference(t *testing.T) RemoteOptions {
	t.Helper()
	cli, err := filepath.Abs("../interop/node_modules/agent-backend/dist/cli.js")
	if err != nil {
		t.Fatal(err)
	}
	testenv.File(t, cli, "cd interop && npm ci")
	testenv.Command(t, "nodejs", "node")
	root, port, token := t.TempDir(), freeTCPPort(t), "reference-token-0123456789"
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", cli, "daemon", "--rootDir", root, "--port", strconv.Itoa(port), "--isolation", "software",
		"--auth-token", token, "--ssh-host-key", filepath.Join(t.TempDir(), "host_key"))
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cancel(); <-exited })
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		if resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/health"); err == nil {
			resp.Body.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("the reference daemon exited:\n%s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reference daemon did not start:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return RemoteOptions{Host: "127.0.0.1", Port: port, Root: root, Token: token}
}

// TestRemoteAgainstReference: the same contract against the npm package's
// daemon, which the spec's remote backend talks to.
func TestRemoteAgainstReference(t *testing.T) {
	runContractMCP(t, func(t *testing.T) Backend {
		r, err := NewRemote(context.Background(), startReference(t))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}, true, MCPOptions{})
}

// TestRemoteConventionalSSH: the remote backend over the daemon's SSH port
// (--ssh-listen) with key authentication and a pinned host key passes the
// contract; a wrong host key and a missing host-key check are refused.
func TestRemoteConventionalSSH(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := gossh.NewSignerFromKey(priv)
	start := func(t *testing.T) (RemoteOptions, gossh.PublicKey) {
		keys := filepath.Join(t.TempDir(), "authorized_keys")
		os.WriteFile(keys, gossh.MarshalAuthorizedKey(signer.PublicKey()), 0o600)
		sshPort := freeTCPPort(t)
		d := startDaemonWith(t, func(c *config.Config) {
			c.SSHListen = "127.0.0.1:" + strconv.Itoa(sshPort)
			c.SSHAuthorizedKeys = keys
		})
		pem, err := os.ReadFile(d.hostKey)
		if err != nil {
			t.Fatal(err)
		}
		hk, err := gossh.ParsePrivateKey(pem)
		if err != nil {
			t.Fatal(err)
		}
		o := d.options()
		o.Transport = "ssh"
		o.SSH = SSHOptions{Port: sshPort, Signers: []gossh.Signer{signer}, HostKeyCallback: gossh.FixedHostKey(hk.PublicKey())}
		return o, hk.PublicKey()
	}
	runContractMCP(t, func(t *testing.T) Backend {
		o, _ := start(t)
		r, err := NewRemote(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}, true, MCPOptions{})

	o, _ := start(t)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	otherSigner, _ := gossh.NewSignerFromKey(other)
	wrong := o
	wrong.SSH.HostKeyCallback = gossh.FixedHostKey(otherSigner.PublicKey())
	if _, err := NewRemote(context.Background(), wrong); !errcode.Is(err, errcode.ConnectionClosed) || !strings.Contains(err.Error(), "SSH login to the daemon failed") {
		t.Errorf("a wrong host key: %v", err)
	}
	unchecked := o
	unchecked.SSH.HostKeyCallback = nil
	if _, err := NewRemote(context.Background(), unchecked); !errcode.Is(err, errcode.InvalidConfiguration) {
		t.Errorf("no host-key check: %v", err)
	}
	badKey := o
	badKey.SSH.Signers = []gossh.Signer{otherSigner}
	if _, err := NewRemote(context.Background(), badKey); !errcode.Is(err, errcode.AuthFailed) {
		t.Errorf("a key the daemon does not know: %v", err)
	}
}

// tcpProxy forwards loopback connections to target; it can cut every
// connection, blackhole them (stop forwarding, keep them open), and refuse
// new ones, and it records when each connection was accepted.
type tcpProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	conns   []net.Conn
	refuse  bool
	holes   bool
	accepts []time.Time
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.accepts = append(p.accepts, time.Now())
			refuse := p.refuse
			p.mu.Unlock()
			if refuse {
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					p.mu.Lock()
					hole := p.holes
					p.mu.Unlock()
					if n > 0 && !hole {
						if _, werr := dst.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				dst.Close()
			}
			go pipe(up, c)
			go pipe(c, up)
		}
	}()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *tcpProxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// cut closes every forwarded connection.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *tcpProxy) set(refuse, holes bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse, p.holes = refuse, holes
}

func (p *tcpProxy) acceptTimes() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.accepts...)
}

// TestRemoteThroughProxy: a blackholed connection is found dead by the
// keepalive (3 probes unanswered) and a command pending on it is rejected
// with CONNECTION_CLOSED; reconnection attempts follow the backoff formula
// (checked as lower bounds: a loaded machine is only ever late); when the
// daemon is reachable again the backend is connected; Destroy during a
// pending retry cancels it.
func TestRemoteThroughProxy(t *testing.T) {
	ctx := context.Background()
	d := startDaemon(t, "127.0.0.1:0")
	proxy := newTCPProxy(t, "127.0.0.1:"+strconv.Itoa(d.port))
	opts := d.options()
	opts.Port = proxy.port()
	opts.KeepaliveInterval = 100 * time.Millisecond
	opts.Reconnect = ReconnectOptions{MaxAttempts: 4, InitialDelay: 100 * time.Millisecond, MaxDelay: 400 * time.Millisecond, Multiplier: 2}
	r, err := NewRemote(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Destroy()
	changes := make(chan StatusChange, 32)
	r.OnStatusChange(func(c StatusChange) { changes <- c })

	pending := make(chan error, 1)
	go func() { _, err := r.Exec(ctx, "sleep 30", ExecOptions{}); pending <- err }()
	time.Sleep(100 * time.Millisecond)
	proxy.set(true, true) // blackhole what is open, refuse what is new
	waitStatus(t, changes, StatusDisconnected)
	select {
	case err := <-pending:
		if !errcode.Is(err, errcode.ConnectionClosed) || !errors.Is(err, ErrConnectionClosed) {
			t.Errorf("the pending command: %v; want CONNECTION_CLOSED", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pending command was not rejected")
	}
	waitStatus(t, changes, StatusReconnecting)
	if _, err := r.Read(ctx, "x"); !errors.Is(err, ErrConnectionClosed) {
		t.Errorf("a read while reconnecting: %v", err)
	}
	// Let two refused attempts go by, then open the way again.
	for len(proxy.acceptTimes()) < 3 {
		time.Sleep(10 * time.Millisecond)
	}
	proxy.cut()
	proxy.set(false, false)
	waitStatus(t, changes, StatusConnected)
	if err := r.Write(ctx, "back.txt", []byte("ok")); err != nil {
		t.Errorf("after reconnecting: %v", err)
	}
	acc := proxy.acceptTimes()
	// acc[0] is the first connection; acc[1], acc[2] the refused attempts
	// 0 and 1, after delays of at least 100 ms and 200 ms.
	if len(acc) >= 3 {
		if gap := acc[2].Sub(acc[1]); gap < 180*time.Millisecond {
			t.Errorf("attempt 1 came %v after attempt 0; the backoff says 200ms", gap)
		}
	}

	// Destroy while a retry is scheduled: the retry is cancelled.
	d2 := startDaemon(t, "127.0.0.1:0")
	o := d2.options()
	o.KeepaliveInterval = 100 * time.Millisecond
	o.Reconnect = ReconnectOptions{InitialDelay: time.Hour}
	r2, err := NewRemote(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	ch2 := make(chan StatusChange, 16)
	r2.OnStatusChange(func(c StatusChange) { ch2 <- c })
	d2.stop()
	waitStatus(t, ch2, StatusReconnecting)
	r2.Destroy()
	waitStatus(t, ch2, StatusDestroyed)
	// goleak (TestMain) fails the package if the retry's goroutine lived on.
}

func TestBackoffFormula(t *testing.T) {
	ro := ReconnectOptions{InitialDelay: time.Second, MaxDelay: 30 * time.Second, Multiplier: 2}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for n, w := range want {
		if got := backoff(ro, n); got != w {
			t.Errorf("attempt %d: %v, want %v", n, got, w)
		}
	}
	if got := backoff(ro, 10000); got != 30*time.Second {
		t.Errorf("a huge attempt number: %v", got)
	}
}

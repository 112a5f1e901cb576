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
)

// testDaemon serves a fresh workspace on a loopback port with a token, in
// this process, until the test ends (or stop is called).
type testDaemon struct {
	root, token string
	port        int
	stop        func()
	hostKey     string
}

func startDaemon(t *testing.T, addr string) *testDaemon {
	t.Helper()
	return startDaemonAddr(t, addr, nil)
}

func startDaemonWith(t *testing.T, tweak func(*config.Config)) *testDaemon {
	t.Helper()
	return startDaemonAddr(t, "127.0.0.1:0", tweak)
}

func startDaemonAddr(t *testing.T, addr string, tweak func(*config.Config)) *testDaemon {
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
	return &testDaemon{root: c.Root, token: c.AuthToken, port: ln.Addr().(*net.TCPAddr).Port, stop: stop, hostKey: c.SSHHostKey}
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
	if _, err := NewRemote(ctx, bad); !errcode.Is(err, errcode.ConnectionClosed) || !strings.Contains(err.Error(), "refused the token") {
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
	if _, err := os.Stat(cli); err != nil {
		t.Fatalf("the reference daemon is needed (cd interop && npm ci): %v", err)
	}
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
	if _, err := NewRemote(context.Background(), badKey); !errcode.Is(err, errcode.ConnectionClosed) {
		t.Errorf("a key the daemon does not know: %v", err)
	}
}

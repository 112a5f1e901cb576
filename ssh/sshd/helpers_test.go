package sshd

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/sshtest"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		hostKeyKillChild(dir) // never returns: killed, or exits 3
	}
	goleak.VerifyTestMain(m)
}

// env is the core served on a real TCP loopback listener (Serve), over a
// real directory workspace and executor, with x/crypto/ssh's client.
type env struct {
	root string
	ws   fsops.Workspace
	srv  *Server
	addr string
}

// testOptions are what a test sets of the Config and of the listener's
// Transport, in one value.
type testOptions struct {
	Config
	Transport
}

type envOpt func(*testOptions, *sandbox.Config)

func withMode(m sandbox.Mode) envOpt {
	return func(_ *testOptions, c *sandbox.Config) { c.Mode = m }
}
func withOpts(f func(*testOptions)) envOpt { return func(o *testOptions, _ *sandbox.Config) { f(o) } }

// newEnv starts a server accepting method "none" (unless opts set other
// authentication) with software isolation unless told otherwise.
func newEnv(t testing.TB, opts ...envOpt) *env {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root = filepath.Join(root, "ws")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions{Config{Workspace: ws, HostKey: sshtest.HostKey(t)}, Transport{NoClientAuth: true}}
	sc := sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: root}
	for _, f := range opts {
		f(&o, &sc)
	}
	if o.Executor == nil && sc.Mode != "" {
		ex, err := sandbox.New(sc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ex.Close() })
		o.Executor = ex
	}
	cfg, err := NewConfig(o.Config)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := cfg.Server(o.Transport)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Server.Close: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrShuttingDown) {
			t.Errorf("Serve returned %v, want ErrShuttingDown", err)
		}
		ws.Close()
	})
	return &env{root: root, ws: ws, srv: srv, addr: l.Addr().String()}
}

// clientConfig logs in as "agent" with auth, or method "none" if auth is nil.
func clientConfig(auth ...gossh.AuthMethod) *gossh.ClientConfig {
	return &gossh.ClientConfig{User: "agent", Auth: auth, HostKeyCallback: gossh.InsecureIgnoreHostKey()}
}

func (e *env) tryDial(auth ...gossh.AuthMethod) (*gossh.Client, error) {
	return gossh.Dial("tcp", e.addr, clientConfig(auth...))
}

// dial logs in with method "none" ("" ) or the password.
func (e *env) dial(t testing.TB, password string) *gossh.Client {
	t.Helper()
	var auth []gossh.AuthMethod
	if password != "" {
		auth = append(auth, gossh.Password(password))
	}
	c, err := e.tryDial(auth...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// tcpConn returns the two ends of a TCP loopback connection: the server's
// (for HandleConn) and the client's. (net.Pipe does not do: it has no
// buffer, and both sides of SSH write their banner before reading.)
func tcpConn(t testing.TB) (server, client net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = l.Accept()
	if err != nil {
		client.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return server, client
}

// handleConn serves a TCP loopback connection with HandleConn and returns
// the client's end; HandleConn's result arrives on the channel.
func handleConn(t testing.TB, srv *Server, wrap func(net.Conn) net.Conn) (net.Conn, <-chan error) {
	a, b := tcpConn(t)
	if wrap != nil {
		a = wrap(a)
	}
	done := make(chan error, 1)
	go func() { done <- srv.HandleConn(context.Background(), a) }()
	return b, done
}

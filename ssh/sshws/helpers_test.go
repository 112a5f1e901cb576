package sshws

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkg/sftp"
	"go.uber.org/goleak"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/sshtest"
	"github.com/agentbe/agentbe-daemon/internal/testbin"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"
	"github.com/agentbe/agentbe-daemon/ssh/sshd"
	"github.com/agentbe/agentbe-daemon/ssh/wsclient"
)

func TestMain(m *testing.M) {
	sandboxexec.Main() // the landlock mode's trampoline: its commands run through this binary
	if root := os.Getenv("SSHWS_BENCH_SERVE"); root != "" {
		benchServe(root) // the server process of BenchmarkIdleConnRSS
		return
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		testbin.Cleanup()
		os.Exit(code)
	}))
}

// env is a daemon-like setup: a real directory workspace, a real executor,
// our Server behind a real loopback HTTP server.
type env struct {
	root string
	ws   fsops.Workspace
	srv  *Server
	hts  *httptest.Server
	url  string // ws://127.0.0.1:P/ssh
}

type envOpt func(*Options, *sshd.Config, *sandbox.Config)

func withToken(t string) envOpt {
	return func(o *Options, _ *sshd.Config, _ *sandbox.Config) { o.AuthToken = t }
}
func withMode(m sandbox.Mode) envOpt {
	return func(_ *Options, _ *sshd.Config, c *sandbox.Config) { c.Mode = m }
}
func withOpts(f func(*Options)) envOpt {
	return func(o *Options, _ *sshd.Config, _ *sandbox.Config) { f(o) }
}

// withConfig adjusts the SSH configuration (lower limits, shorter
// timeouts, another executor).
func withConfig(f func(*sshd.Config)) envOpt {
	return func(_ *Options, c *sshd.Config, _ *sandbox.Config) { f(c) }
}

// newEnv starts a server over a fresh directory workspace; software
// isolation unless told otherwise (it needs nothing installed).
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
	var o Options
	c := sshd.Config{Workspace: ws, HostKey: sshtest.HostKey(t)}
	sc := sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: root}
	for _, f := range opts {
		f(&o, &c, &sc)
	}
	if c.Executor == nil && sc.Mode != "" {
		ex, err := sandbox.New(sc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ex.Close() })
		c.Executor = ex
	}
	return startEnv(t, root, ws, o, c)
}

// newMemEnv serves an in-memory workspace, without an executor.
func newMemEnv(t testing.TB) *env {
	ws := fsops.NewMemory("/mem", fsops.Options{})
	return startEnv(t, "/mem", ws, Options{}, sshd.Config{Workspace: ws, HostKey: sshtest.HostKey(t)})
}

// startEnv serves /ssh with o over the SSH configuration c (its Workspace
// is ws, rooted at root), as the daemon mounts it.
func startEnv(t testing.TB, root string, ws fsops.Workspace, o Options, c sshd.Config) *env {
	t.Helper()
	var err error
	if o.SSH, err = sshd.NewConfig(c); err != nil {
		t.Fatal(err)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ssh", srv) // as the daemon mounts it
	hts := httptest.NewServer(mux)
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Server.Close: %v", err)
		}
		hts.Close()
		ws.Close()
	})
	return &env{root: root, ws: ws, srv: srv, hts: hts,
		url: "ws" + strings.TrimPrefix(hts.URL, "http") + "/ssh"}
}

// dial opens the WebSocket and an SSH client over it, as the agent-backend
// client does: user "agent", auth "none" then password.
func (e *env) dial(t testing.TB, token string) *gossh.Client {
	t.Helper()
	c, err := e.tryDial(token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dialConn dials url (no token) and returns the WebSocket connection too,
// for tests that close it under the SSH client or read its close code.
func dialConn(t testing.TB, url string) (*wsclient.Conn, *gossh.Client) {
	t.Helper()
	conn, err := wsclient.Dial(context.Background(), url, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := sshClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return conn, c
}

func (e *env) tryDial(token string) (*gossh.Client, error) {
	conn, err := wsclient.Dial(context.Background(), e.url, token)
	if err != nil {
		return nil, err
	}
	return sshClient(conn)
}

func sshClient(conn *wsclient.Conn) (*gossh.Client, error) {
	cc, chans, reqs, err := gossh.NewClientConn(conn, "ws", &gossh.ClientConfig{
		User:            "agent",
		Auth:            []gossh.AuthMethod{gossh.Password("agent")},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(),
	})
	if err != nil {
		conn.Close()
		return nil, err
	}
	return gossh.NewClient(cc, chans, reqs), nil
}

func (e *env) sftp(t testing.TB) *sftp.Client {
	t.Helper()
	c, err := sftp.NewClient(e.dial(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// run runs a command on a fresh session (sshtest.Run).
var run = sshtest.Run

func newSFTP(c *gossh.Client) (*sftp.Client, error) { return sftp.NewClient(c) }

package sshd

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"
)

// run runs cmd on a new session of c.
func run(t testing.TB, c *gossh.Client, cmd string) (string, int) {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Output(cmd)
	var ee *gossh.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitStatus()
	}
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return string(out), 0
}

// exerciseClient runs a command and an SFTP round trip on c: the two
// things every client does.
func exerciseClient(t *testing.T, e *env, c *gossh.Client) {
	t.Helper()
	if out, code := run(t, c, "echo hello"); out != "hello\n" || code != 0 {
		t.Fatalf("exec: %q %d", out, code)
	}
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	f, err := sc.Create("/up.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("over sftp")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(e.root, "up.txt")); err != nil || string(got) != "over sftp" {
		t.Fatalf("host file: %q %v", got, err)
	}
	if _, err := sc.Stat("/../../etc/passwd"); err == nil {
		t.Fatal("SFTP reached /etc/passwd: the chroot at the workspace is gone")
	}
}

// TestEntryPoints: the core serves a plain net.Conn, whichever way it comes:
// a TCP listener (Serve), and HandleConn on one end of a net.Pipe.
func TestEntryPoints(t *testing.T) {
	t.Run("Serve on TCP", func(t *testing.T) {
		e := newEnv(t)
		exerciseClient(t, e, e.dial(t, ""))
	})
	t.Run("HandleConn", func(t *testing.T) {
		e := newEnv(t)
		nc, done := handleConn(t, e.srv, nil)
		cc, chans, reqs, err := gossh.NewClientConn(nc, "pipe", clientConfig())
		if err != nil {
			t.Fatal(err)
		}
		c := gossh.NewClient(cc, chans, reqs)
		exerciseClient(t, e, c)
		c.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("HandleConn = %v, want nil after a served connection", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("HandleConn did not return after the client closed")
		}
	})
}

// TestAuth: the core's authentication is what the Transport says, and its zero
// value lets nobody in.
func TestAuth(t *testing.T) {
	pw := func(_ gossh.ConnMetadata, p []byte) (*gossh.Permissions, error) {
		if string(p) != "right" {
			return nil, errors.New("wrong password")
		}
		return nil, nil
	}
	for _, tc := range []struct {
		name string
		set  func(*testOptions)
		auth []gossh.AuthMethod
		ok   bool
	}{
		{"zero value refuses none", func(o *testOptions) { o.NoClientAuth = false }, nil, false},
		{"zero value refuses a password", func(o *testOptions) { o.NoClientAuth = false }, []gossh.AuthMethod{gossh.Password("x")}, false},
		{"NoClientAuth admits none", nil, nil, true},
		{"callback refuses a bad password", func(o *testOptions) { o.NoClientAuth = false; o.PasswordCallback = pw },
			[]gossh.AuthMethod{gossh.Password("wrong")}, false},
		{"callback admits the right password", func(o *testOptions) { o.NoClientAuth = false; o.PasswordCallback = pw },
			[]gossh.AuthMethod{gossh.Password("right")}, true},
		{"password callback alone refuses none", func(o *testOptions) { o.NoClientAuth = false; o.PasswordCallback = pw }, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, withOpts(func(o *testOptions) {
				if tc.set != nil {
					tc.set(o)
				}
			}))
			c, err := e.tryDial(tc.auth...)
			if tc.ok {
				if err != nil {
					t.Fatalf("login refused: %v", err)
				}
				defer c.Close()
				if out, code := run(t, c, "echo in"); out != "in\n" || code != 0 {
					t.Fatalf("%q %d", out, code)
				}
				return
			}
			if err == nil {
				c.Close()
				t.Fatal("login admitted")
			}
			// With a method configured the client is told no method
			// worked; with none the server drops it after key exchange.
			if tc.set != nil && !strings.Contains(err.Error(), "unable to authenticate") && !strings.Contains(err.Error(), "handshake failed") {
				t.Fatalf("err = %v, want an authentication failure", err)
			}
		})
	}
}

// causeConn is a net.Conn that records why the server closed it.
type causeConn struct {
	net.Conn
	mu    sync.Mutex
	cause error
}

func (c *causeConn) CloseCause(err error) error {
	c.mu.Lock()
	c.cause = err
	c.mu.Unlock()
	return c.Conn.Close()
}

func (c *causeConn) Cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}

// TestRefusals: over the connection cap, after Shutdown and without a
// login in time, the core refuses or closes the connection with a typed
// error, which a CloseCauser is told (the WebSocket adapter turns it into a
// close code).
func TestRefusals(t *testing.T) {
	t.Run("connection cap", func(t *testing.T) {
		e := newEnv(t, withOpts(func(o *testOptions) { o.MaxConns = 1 }))
		first := e.dial(t, "")
		a, _ := tcpConn(t)
		cc := &causeConn{Conn: a}
		err := e.srv.HandleConn(context.Background(), cc)
		if !errors.Is(err, ErrTooManyConns) || !strings.Contains(err.Error(), "limit 1") {
			t.Fatalf("HandleConn over the cap = %v, want ErrTooManyConns naming the limit", err)
		}
		if !errors.Is(cc.Cause(), ErrTooManyConns) {
			t.Fatalf("close cause %v, want ErrTooManyConns", cc.Cause())
		}
		if _, err := e.tryDial(); err == nil {
			t.Fatal("a TCP connection over the cap logged in")
		}
		// The first one is unaffected, and its end frees the slot.
		if out, _ := run(t, first, "echo one"); out != "one\n" {
			t.Fatalf("%q", out)
		}
		first.Close()
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err := e.tryDial()
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("slot not freed: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Run("login timeout", func(t *testing.T) {
		e := newEnv(t, withOpts(func(o *testOptions) { o.LoginTimeout = 50 * time.Millisecond }))
		a, b := tcpConn(t)
		go io.Copy(io.Discard, b) // reads the banner, never answers
		cc := &causeConn{Conn: a}
		if err := e.srv.HandleConn(context.Background(), cc); err == nil {
			t.Fatal("HandleConn = nil for a client that never logged in")
		}
		if !errors.Is(cc.Cause(), ErrLoginTimeout) {
			t.Fatalf("close cause %v, want ErrLoginTimeout", cc.Cause())
		}
	})
	t.Run("shutdown", func(t *testing.T) {
		e := newEnv(t)
		var cc *causeConn
		b, done := handleConn(t, e.srv, func(c net.Conn) net.Conn { cc = &causeConn{Conn: c}; return cc })
		conn, chans, reqs, err := gossh.NewClientConn(b, "pipe", clientConfig())
		if err != nil {
			t.Fatal(err)
		}
		c := gossh.NewClient(conn, chans, reqs)
		defer c.Close()
		if err := e.srv.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("HandleConn = %v", err)
		}
		if !errors.Is(cc.Cause(), ErrShuttingDown) {
			t.Fatalf("close cause %v, want ErrShuttingDown", cc.Cause())
		}
		a2, _ := tcpConn(t)
		if err := e.srv.HandleConn(context.Background(), a2); !errors.Is(err, ErrShuttingDown) {
			t.Fatalf("HandleConn after Shutdown = %v, want ErrShuttingDown", err)
		}
	})
}

// TestKeepalive: with KeepaliveInterval set the server sends
// keepalive@openssh.com (want-reply) to a logged-in client; with 0 it sends
// nothing.
func TestKeepalive(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		want     bool
	}{
		{"on", 20 * time.Millisecond, true},
		{"off", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, withOpts(func(o *testOptions) { o.KeepaliveInterval = tc.interval }))
			nc, err := net.Dial("tcp", e.addr)
			if err != nil {
				t.Fatal(err)
			}
			conn, chans, reqs, err := gossh.NewClientConn(nc, e.addr, clientConfig())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			go func() {
				for nc := range chans {
					nc.Reject(gossh.Prohibited, "")
				}
			}()
			// With keepalive on, wait as long as a loaded machine may take
			// to send the first one; with it off, a window of 15 intervals
			// in which none may come.
			wait := 300 * time.Millisecond
			if tc.want {
				wait = 10 * time.Second
			}
			select {
			case req := <-reqs:
				if !tc.want {
					t.Fatalf("got global request %q with keepalive off", req.Type)
				}
				if req.Type != "keepalive@openssh.com" || !req.WantReply {
					t.Fatalf("got %q (want-reply %v), want keepalive@openssh.com with want-reply", req.Type, req.WantReply)
				}
				req.Reply(false, nil) // what OpenSSH answers
			case <-time.After(wait):
				if tc.want {
					t.Fatalf("no keepalive within %v at a 20ms interval", wait)
				}
			}
			go gossh.DiscardRequests(reqs)
		})
	}
}

// flakyListener fails its first Accepts with errs, then accepts for real.
type flakyListener struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// TestServeOutlivesTransientAcceptErrors: running out of descriptors for a
// moment (EMFILE) or a connection aborted before Accept must not stop the
// port; any other Accept error ends Serve with that error.
func TestServeOutlivesTransientAcceptErrors(t *testing.T) {
	e := newEnv(t)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	aborted := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)}
	l := &flakyListener{Listener: inner, errs: []error{emfile, aborted, emfile}}
	served := make(chan error, 1)
	go func() { served <- e.srv.Serve(l) }()
	nc, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	// If Serve gave up, nobody answers the handshake: fail, don't hang.
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	cc, chans, reqs, err := gossh.NewClientConn(nc, "tcp", clientConfig())
	if err != nil {
		t.Fatalf("SSH handshake after transient Accept errors: %v", err)
	}
	_ = nc.SetDeadline(time.Time{})
	c := gossh.NewClient(cc, chans, reqs)
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := sess.Output("echo alive"); err != nil || string(out) != "alive\n" {
		t.Fatalf("exec = %q, %v", out, err)
	}
	c.Close()
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, ErrShuttingDown) {
		t.Fatalf("Serve = %v, want ErrShuttingDown after Close", err)
	}

	// A permanent error ends Serve with it.
	e2 := newEnv(t)
	bad := errors.New("listener broken")
	l2 := &flakyListener{Listener: inner, errs: []error{bad}}
	if err := e2.srv.Serve(l2); !errors.Is(err, bad) {
		t.Fatalf("Serve = %v, want the listener's error", err)
	}
}

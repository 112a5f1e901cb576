package sshd

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

// echoServer answers each connection with what it reads, then closes its
// side once the client half-closed.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	return l.Addr().String()
}

// TestForward: a direct-tcpip channel is carried to the connection the
// Forward function opened, both ways, with half closes passed on; the
// function is told the client's target and the workspace; its refusal
// reaches the client; without it, or for a key with no-port-forwarding,
// forwarding is refused; forwards count against MaxChannels.
func TestForward(t *testing.T) {
	echo := echoServer(t)
	var mu sync.Mutex
	var seen []ForwardRequest
	forward := func(ctx context.Context, r ForwardRequest) (net.Conn, error) {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		if r.Port == 9 {
			return nil, errors.New("port 9: nothing of the workspace listens there")
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", echo)
	}
	e := newEnv(t, withOpts(func(o *testOptions) { o.Forward = forward; o.MaxChannels = 2 }))
	c := e.dial(t, "")
	defer c.Close()

	fc, err := c.Dial("tcp", "localhost:8080")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(fc, "ping"); err != nil {
		t.Fatal(err)
	}
	if err := fc.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(fc)
	if err != nil || string(got) != "ping" {
		t.Fatalf("echo: %q %v", got, err)
	}
	fc.Close()
	mu.Lock()
	if len(seen) != 1 || seen[0].Host != "localhost" || seen[0].Port != 8080 || seen[0].Within != e.root || seen[0].Remote == "" {
		t.Fatalf("Forward was told %+v", seen)
	}
	mu.Unlock()

	if _, err := c.Dial("tcp", "127.0.0.1:9"); err == nil || !strings.Contains(err.Error(), "nothing of the workspace listens there") {
		t.Fatalf("refusal: %v", err)
	}

	// Two held, the third over MaxChannels.
	a, err := c.Dial("tcp", "localhost:1")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := c.Dial("tcp", "localhost:2")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := c.Dial("tcp", "localhost:3"); err == nil || !strings.Contains(err.Error(), "too many channels") {
		t.Fatalf("over the cap: %v", err)
	}
	if _, _, err := c.OpenChannel("direct-streamlocal@openssh.com", nil); err == nil {
		t.Fatal("a Unix socket forward was accepted")
	}
}

func TestForwardRefused(t *testing.T) {
	forward := func(context.Context, ForwardRequest) (net.Conn, error) {
		t.Error("Forward called for a connection that may not forward")
		return nil, errors.New("no")
	}
	t.Run("off", func(t *testing.T) {
		e := newEnv(t)
		c := e.dial(t, "")
		defer c.Close()
		if _, err := c.Dial("tcp", "localhost:80"); err == nil || !strings.Contains(err.Error(), "port forwarding is off") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("no-port-forwarding", func(t *testing.T) {
		e := newEnv(t, withOpts(func(o *testOptions) {
			o.Forward = forward
			o.NoClientAuth = false
			o.PasswordCallback = func(gossh.ConnMetadata, []byte) (*gossh.Permissions, error) {
				return &gossh.Permissions{Extensions: map[string]string{PermNoPortForwarding: ""}}, nil
			}
		}))
		c := e.dial(t, "pw")
		defer c.Close()
		if _, err := c.Dial("tcp", "localhost:80"); err == nil || !strings.Contains(err.Error(), "not permitted for this key") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		e := newEnv(t, withOpts(func(o *testOptions) { o.Forward = forward }))
		c := e.dial(t, "")
		defer c.Close()
		if _, _, err := c.OpenChannel("direct-tcpip", []byte{0, 0, 0, 9, 'x'}); err == nil || !strings.Contains(err.Error(), "malformed direct-tcpip") {
			t.Fatalf("got %v", err)
		}
	})
}

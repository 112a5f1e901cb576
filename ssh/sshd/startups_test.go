package sshd

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

// TestAttackUnauthenticatedConnsPerAddr: a client with no credentials
// opens connections to a listener that requires a login and never logs in
// (it sends its version line, then nothing). Each is held for the login
// grace time, and every connection, logged in or not, counts against
// MaxConns: without a bound of their own, one address filled the cap and
// locked out every key holder until the grace time ran out. A listener now
// holds at most MaxUnauthPerAddr such connections from one address; one
// more is closed at once, and a client from another address still logs in.
func TestAttackUnauthenticatedConnsPerAddr(t *testing.T) {
	const maxConns = 3 * DefaultMaxUnauthPerAddr
	e := newEnv(t, withOpts(func(o *testOptions) {
		o.MaxConns = maxConns
		o.NoClientAuth = false
		o.PasswordCallback = func(_ gossh.ConnMetadata, p []byte) (*gossh.Permissions, error) {
			if string(p) != "secret" {
				return nil, errors.New("no")
			}
			return nil, nil
		}
	}))
	attacker := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	closedAtOnce := 0
	for range maxConns {
		c, err := attacker.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, "SSH-2.0-attacker\r\n"); err != nil {
			t.Fatal(err)
		}
		// The server's version line comes first; then either the key
		// exchange (held, waiting for a login) or the end.
		c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard
		r := bufio.NewReader(c)
		if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "SSH-2.0-agentbe") {
			closedAtOnce++
			continue
		}
		if _, err := io.Copy(io.Discard, io.LimitReader(r, 4)); err != nil {
			closedAtOnce++
		}
	}
	held := maxConns - closedAtOnce
	t.Logf("%d connections that never log in from one address: %d held, %d closed", maxConns, held, closedAtOnce)
	if held > DefaultMaxUnauthPerAddr {
		t.Errorf("one address holds %d connections that have not logged in, want at most %d", held, DefaultMaxUnauthPerAddr)
	}
	// A key holder elsewhere still gets in.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}, Timeout: 10 * time.Second}
	nc, err := d.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	cc, chans, reqs, err := gossh.NewClientConn(nc, e.addr, clientConfig(gossh.Password("secret")))
	if err != nil {
		t.Fatalf("a client with the password from another address: %v", err)
	}
	c := gossh.NewClient(cc, chans, reqs)
	defer c.Close()
	if out, code := run(t, c, "echo in"); out != "in\n" || code != 0 {
		t.Fatalf("%q %d", out, code)
	}
}

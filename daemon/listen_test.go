package daemon

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
	gossh "golang.org/x/crypto/ssh"
)

// TestListenFirst: Listen binds --port and --ssh-listen before New, and
// Serve serves the SSH port on the socket Listen bound (Options.SSHListener);
// a failed bind is config.ListenError's line and leaves nothing bound.
func TestListenFirst(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("right"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	hf := filepath.Join(t.TempDir(), "hash")
	if err := os.WriteFile(hf, hash, 0o600); err != nil {
		t.Fatal(err)
	}
	c := testConfig(t)
	_, port, _ := net.SplitHostPort(freeAddr(t))
	c.Port, _ = strconv.Atoi(port)
	c.SSHListen = freeAddr(t)
	c.SSHPasswordHashFile = hf
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	lns, err := Listen(c)
	if err != nil {
		t.Fatal(err)
	}
	defer lns.Close()
	if got := lns.HTTP.Addr().String(); got != c.Addr() {
		t.Errorf("HTTP listener on %s, want %s", got, c.Addr())
	}
	if _, err := Listen(c); err == nil || !strings.HasPrefix(err.Error(), "--port "+port+": "+c.Addr()+" is in use") {
		t.Errorf("a second Listen: %v", err)
	}

	r := startWith(t, c, Options{SSHListener: lns.SSH})
	waitFor(t, "the SSH port", func() bool { return r.d.SSHAddr() != "" })
	if got := r.d.SSHAddr(); got != lns.SSH.Addr().String() {
		t.Fatalf("SSH port on %s, want the listener Listen bound, %s", got, lns.SSH.Addr())
	}
	conn, err := gossh.Dial("tcp", c.SSHListen, &gossh.ClientConfig{
		User: "agent", Auth: []gossh.AuthMethod{gossh.Password("right")},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(),
	})
	if err != nil {
		t.Fatalf("SSH login on the listener Listen bound: %v", err)
	}
	conn.Close()
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	// The SSH address taken: the error names --ssh-listen, and the HTTP
	// port Listen had bound is free again.
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	c2 := c
	_, port2, _ := net.SplitHostPort(freeAddr(t))
	c2.Port, _ = strconv.Atoi(port2)
	c2.SSHListen = held.Addr().String()
	if _, err := Listen(c2); err == nil || !strings.HasPrefix(err.Error(), "--ssh-listen: "+c2.SSHListen+" is in use: another process listens there") {
		t.Errorf("SSH address taken: %v", err)
	}
	if ln, err := net.Listen("tcp", c2.Addr()); err != nil {
		t.Errorf("the HTTP port stays bound after a failed Listen: %v", err)
	} else {
		ln.Close()
	}
	// The SSH port on --port's own address.
	c2.SSHListen = c2.Addr()
	want := "--ssh-listen: " + c2.Addr() + " is in use by this daemon's own --port " + port2 + " (HTTP)"
	if _, err := Listen(c2); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("SSH on --port's address: %v, want %q", err, want)
	}
}

func TestSameSocket(t *testing.T) {
	for _, tc := range []struct {
		addr, bind string
		port       int
		want       bool
	}{
		{"127.0.0.1:3001", "127.0.0.1", 3001, true},
		{"0.0.0.0:3001", "127.0.0.1", 3001, true},
		{":3001", "127.0.0.1", 3001, true},
		{"127.0.0.1:3001", "::", 3001, true},
		{"10.0.0.1:3001", "127.0.0.1", 3001, false},
		{"127.0.0.1:3002", "127.0.0.1", 3001, false},
		{"not an address", "127.0.0.1", 3001, false},
	} {
		if got := sameSocket(tc.addr, tc.bind, tc.port); got != tc.want {
			t.Errorf("sameSocket(%q, %q, %d) = %v, want %v", tc.addr, tc.bind, tc.port, got, tc.want)
		}
	}
}

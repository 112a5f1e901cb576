package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestListenError: each reason a bind fails is one line naming the flag,
// the address and what to do; the errors are the kernel's own where the
// test can provoke them.
func TestListenError(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	port := held.Addr().(*net.TCPAddr).Port
	_, inUse := net.Listen("tcp", held.Addr().String())
	if !errors.Is(inUse, syscall.EADDRINUSE) {
		t.Fatalf("second listen on %s: %v, want EADDRINUSE", held.Addr(), inUse)
	}
	_, notMine := net.Listen("tcp", "192.0.2.1:0") // TEST-NET-1: no machine's address
	denied := &net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", syscall.EACCES)}
	odd := &net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", syscall.EINVAL)}

	c := Default()
	c.Bind, c.Port = "127.0.0.1", port
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for _, tc := range []struct {
		name string
		got  error
		want string
	}{
		{"in use", c.PortListenError(inUse), fmt.Sprintf("--port %d: %s is in use: another process listens there; stop it or choose another port", port, addr)},
		{"ssh in use", ListenError("--ssh-listen", addr, inUse), "--ssh-listen: " + addr + " is in use: another process listens there"},
		{"privileged", ListenError("--port 80", "0.0.0.0:80", denied), "--port 80: 0.0.0.0:80 needs root or CAP_NET_BIND_SERVICE (a port below 1024); choose a port from 1024 up, or grant the capability"},
		{"other", ListenError("--port 1", "x:1", odd), "--port 1: cannot listen on x:1: bind: invalid argument"},
	} {
		if tc.got == nil || !strings.HasPrefix(tc.got.Error(), tc.want) {
			t.Errorf("%s: %v\nwant prefix %q", tc.name, tc.got, tc.want)
		}
	}
	if errors.Is(notMine, syscall.EADDRNOTAVAIL) {
		c.Bind = "192.0.2.1"
		want := fmt.Sprintf("--bind 192.0.2.1: 192.0.2.1:%d is not an address of this machine", port)
		if got := c.PortListenError(notMine); !strings.HasPrefix(got.Error(), want) {
			t.Errorf("not mine: %v\nwant prefix %q", got, want)
		}
	} else {
		t.Logf("listen on 192.0.2.1 gave %v, not EADDRNOTAVAIL: that case is not exercised here", notMine)
	}
}

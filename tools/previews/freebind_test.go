package previews

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/sandbox"
)

// TestPreviewDialOnlyThisMachine: a workspace process that listens with
// IP_FREEBIND on an address this machine does not have (here 192.0.2.1,
// documentation space; the cloud metadata address would do as well) holds
// a real listening socket of the workspace, but a connection to that
// address would leave the machine for whatever answers there, with the
// daemon's identity. Dial refuses it without connecting; the workspace's
// server on loopback is still reached.
func TestPreviewDialOnlyThisMachine(t *testing.T) {
	p, ex, root := newProvider(t, sandbox.ModeSoftware)
	port := startServer(t, ex, root, root, "-freebind -addr 192.0.2.1:0")
	ports := p.Ports("")
	if len(ports) != 1 || ports[0].Port != port || ports[0].Addr.String() != "192.0.2.1" {
		t.Fatalf("Ports = %+v; want %d on 192.0.2.1", ports, port)
	}
	c, err := p.Dial(context.Background(), Caller{}, port)
	if err == nil {
		c.Close()
		t.Fatal("a listener on an address of another machine was dialled")
	}
	if !errors.Is(err, ErrNotWorkspacePort) || !strings.Contains(err.Error(), "not an address of this machine") {
		t.Errorf("Dial: %v; want a refusal saying the address is not this machine's", err)
	}
	// A listener on an address this machine does have, other than
	// loopback, is still reached at that address.
	var own string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			own = n.IP.String()
			break
		}
	}
	if own == "" {
		t.Log("this machine has no IPv4 address but loopback: the reachable case is not tried")
		return
	}
	p2, ex2, root2 := newProvider(t, sandbox.ModeSoftware)
	reachable := startServer(t, ex2, root2, root2, "-addr "+net.JoinHostPort(own, "0"))
	c, err = p2.Dial(context.Background(), Caller{}, reachable)
	if err != nil {
		t.Fatalf("a listener on %s, an address of this machine: %v", own, err)
	}
	if body := get(t, c, "/"); body != "hello from the workspace at /" {
		t.Errorf("got %q", body)
	}
}

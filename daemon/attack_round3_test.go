package daemon

import (
	"net"
	"testing"
	"time"
)

// TestAttackUpgradeHeaderKeepsBodyDeadline: a request that says
// "Connection: Upgrade" on a route that never upgrades (/mcp, /execute,
// /tools, a preview's POST the workspace server answers without switching)
// and declares a body it never sends must end at the body deadline like
// any other: the header is the client's say-so, not an upgrade. Otherwise
// such requests hold their connections (never idle, so never shed) and
// /mcp's in-flight slots for as long as the client likes.
func TestAttackUpgradeHeaderKeepsBodyDeadline(t *testing.T) {
	saved := bodyTimeout
	t.Cleanup(func() { bodyTimeout = saved })
	bodyTimeout = time.Second
	c := testConfig(t)
	c.MaxConns, c.MaxConnsPerIP = 8, 8
	r := start(t, c, nil)
	var held []net.Conn
	for i, path := range []string{"/mcp", "/mcp", "/execute", "/tools", "/nowhere", "/mcp", "/execute", "/mcp"} {
		cn := dialRaw(t, r.url, "127.0.0.1")
		method := "POST"
		if path == "/tools" {
			method = "GET"
		}
		if _, err := cn.Write([]byte(method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
			"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n")); err != nil {
			t.Fatal(i, err)
		}
		held = append(held, cn)
	}
	defer func() {
		for _, h := range held {
			h.Close()
		}
	}()
	deadline := time.Now().Add(reserveLifetime + 10*time.Second)
	for {
		total, reserved := r.d.conns.Load().counts()
		if total == 0 && reserved == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("requests claiming an upgrade with a silent body still hold %d connections and %d reserve slots", total, reserved)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

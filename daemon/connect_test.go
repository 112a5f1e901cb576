package daemon

import (
	"bytes"
	"net"
	"strings"
	"testing"
)

// TestConnectURL: the URL in the start-up line is the listener's own
// address, loopback for one on every address, IPv6 in brackets.
func TestConnectURL(t *testing.T) {
	for _, tc := range []struct {
		scheme string
		addr   net.Addr
		want   string
	}{
		{"http", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3001}, "http://127.0.0.1:3001/mcp"},
		{"http", &net.TCPAddr{IP: net.IPv4zero, Port: 3001}, "http://127.0.0.1:3001/mcp"},
		{"http", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, "http://127.0.0.1:8080/mcp"},
		{"https", &net.TCPAddr{IP: net.IPv6loopback, Port: 443}, "https://[::1]:443/mcp"},
		{"https", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 3001}, "https://10.0.0.5:3001/mcp"},
	} {
		if got := connectURL(tc.scheme, tc.addr); got != tc.want {
			t.Errorf("connectURL(%s, %v) = %s, want %s", tc.scheme, tc.addr, got, tc.want)
		}
	}
}

// TestConnectBlock: the terminal block holds the command on a line of its
// own, unquoted, and where the JSON is.
func TestConnectBlock(t *testing.T) {
	cmd := claudeCodeCommand("http://127.0.0.1:3001/mcp", "$(cat /etc/agentbe/token)")
	if want := `claude mcp add --transport http agentbe http://127.0.0.1:3001/mcp --header "Authorization: Bearer $(cat /etc/agentbe/token)"`; cmd != want {
		t.Fatalf("command %s, want %s", cmd, want)
	}
	if got := claudeCodeCommand("http://127.0.0.1:3001/mcp", ""); strings.Contains(got, "--header") {
		t.Errorf("no token, yet a header: %s", got)
	}
	var b bytes.Buffer
	writeConnectBlock(&b, cmd)
	if !strings.Contains(b.String(), "\n    "+cmd+"\n") || !strings.Contains(b.String(), connectDoc) {
		t.Errorf("block:\n%s", b.String())
	}
}

package daemon

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/previewtest"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/tools/previews"
)

// TestLoopbackJudgeFailsClosed: where the ports of workspace commands
// cannot be judged (previews.New failed: no network namespace to read),
// a tool call of a caller bound to a scope, or of one that may not run
// commands, reaches no port of this machine through the network door,
// while a caller of the whole workspace that may run commands (whom the
// judge admits to every port anyway) keeps reaching them; a browser
// session's connections are judged the same.
func TestLoopbackJudgeFailsClosed(t *testing.T) {
	port := previewtest.HostServer(t, "a host service")
	door := netguard.New(netguard.Options{AllowLoopback: true, AllowPorts: []uint16{uint16(port)}})
	j := &loopbackJudge{
		reach: func() (*previews.Previews, error) { return nil, errors.New("no /proc/self/ns/net") },
		root:  func() string { return "/srv/ws" },
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for _, tc := range []struct {
		name   string
		within string
		exec   bool
		admit  bool
	}{
		{"the whole workspace, with commands", "/srv/ws", true, true},
		{"a scope, with commands", "/srv/ws/a", true, false},
		{"the whole workspace, without commands", "/srv/ws", false, false},
	} {
		// The browser's LocalPort is the same judgement.
		if err := j.port(tc.within, tc.exec, port); (err == nil) != tc.admit {
			t.Errorf("%s: the browser's judge: %v, admit %v", tc.name, err, tc.admit)
		}
		conn, err := door.Dial(j.context(context.Background(), tc.within, tc.exec), "tcp", addr)
		if conn != nil {
			conn.Close()
		}
		switch {
		case tc.admit && err != nil:
			t.Errorf("%s: %v, want the connection", tc.name, err)
		case !tc.admit && (err == nil || !strings.Contains(err.Error(), "cannot be judged")):
			t.Errorf("%s: %v, want a refusal saying the ports cannot be judged", tc.name, err)
		}
	}
}

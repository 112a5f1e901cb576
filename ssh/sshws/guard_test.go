package sshws

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// TestUpgradeOriginAndHost: the /ssh upgrade applies the Origin and Host
// rules of every work endpoint (internal/httpguard). The first case is DNS
// rebinding: a page on evil.example resolved to 127.0.0.1 sends its own
// name as both Host and Origin, which an "Origin equals Host" check admits.
func TestUpgradeOriginAndHost(t *testing.T) {
	cases := []struct {
		name   string
		token  string
		host   string // "{port}" is the server's port
		origin string
		want   int
	}{
		{"dns rebinding without a token", "", "evil.example:{port}", "http://evil.example:{port}", http.StatusForbidden},
		{"non-loopback host without a token", "", "evil.example:{port}", "", http.StatusForbidden},
		{"foreign origin", "", "", "http://evil.example", http.StatusForbidden},
		{"foreign origin with a token", "tok", "", "http://evil.example", http.StatusForbidden},
		{"loopback origin on another port", "", "", "http://localhost:5173", http.StatusSwitchingProtocols},
		{"no origin", "", "", "", http.StatusSwitchingProtocols},
		{"reverse proxy host with a token", "tok", "api.example.com", "", http.StatusSwitchingProtocols},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []envOpt
			if tc.token != "" {
				opts = append(opts, withToken(tc.token))
			}
			e := newEnv(t, opts...)
			u, _ := url.Parse(e.hts.URL)
			h := http.Header{}
			if tc.host != "" {
				h.Set("Host", strings.ReplaceAll(tc.host, "{port}", u.Port()))
			}
			if tc.origin != "" {
				h.Set("Origin", strings.ReplaceAll(tc.origin, "{port}", u.Port()))
			}
			if tc.token != "" {
				h.Set("Authorization", "Bearer "+tc.token)
			}
			ws, resp, err := websocket.DefaultDialer.Dial(e.url, h)
			if ws != nil {
				ws.Close()
			}
			if resp == nil {
				t.Fatalf("no response: %v", err)
			}
			if resp.StatusCode != tc.want {
				t.Fatalf("upgrade answered %d (err %v), want %d", resp.StatusCode, err, tc.want)
			}
		})
	}
}

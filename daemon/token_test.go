package daemon

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestTokenOnBothFaces runs the one bearer-token rule (internal/httpguard
// Token) against /mcp and /ssh: every case is sent to both, and the two
// must agree except where the rule says /ssh also reads ?token=.
func TestTokenOnBothFaces(t *testing.T) {
	const token = "s3cret"
	cases := []struct {
		name  string
		auth  string // Authorization header; "" = none
		query string // raw query of the URL; "" = none
		mcp   bool   // admitted by /mcp (header only)
		ssh   bool   // admitted by /ssh (header or ?token=)
	}{
		{name: "no credentials"},
		{name: "Bearer", auth: "Bearer s3cret", mcp: true, ssh: true},
		{name: "scheme in lower case", auth: "bearer s3cret", mcp: true, ssh: true},
		{name: "scheme in upper case", auth: "BEARER s3cret", mcp: true, ssh: true},
		{name: "two spaces after the scheme", auth: "Bearer  s3cret", mcp: true, ssh: true},
		{name: "tab after the scheme", auth: "Bearer\ts3cret", mcp: true, ssh: true},
		{name: "spaces around the value", auth: "  Bearer s3cret \t", mcp: true, ssh: true},
		{name: "token with a suffix", auth: "Bearer s3cretX"},
		{name: "prefix of the token", auth: "Bearer s3cre"},
		{name: "token in another case", auth: "Bearer S3CRET"},
		{name: "token twice", auth: "Bearer s3cret s3cret"},
		{name: "no separator", auth: "Bearers3cret"},
		{name: "scheme alone", auth: "Bearer"},
		{name: "scheme and a space", auth: "Bearer "},
		{name: "basic scheme", auth: "Basic s3cret"},
		{name: "bare token", auth: "s3cret"},
		{name: "query token", query: "token=s3cret", ssh: true},
		{name: "query token url-encoded", query: "token=" + url.QueryEscape(token), ssh: true},
		{name: "empty query token", query: "token="},
		{name: "wrong query token", query: "token=nope"},
		{name: "wrong header, right query", auth: "Bearer nope", query: "token=s3cret", ssh: true},
		{name: "right header, wrong query", auth: "Bearer s3cret", query: "token=nope", mcp: true, ssh: true},
	}
	c := testConfig(t)
	c.AuthToken = token
	r := start(t, c, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := r.url + "/mcp"
			if tc.query != "" {
				u += "?" + tc.query
			}
			header := map[string]string{"Content-Type": "application/json", "Accept": "application/json"}
			if tc.auth != "" {
				header["Authorization"] = tc.auth
			}
			code, body := guardRequest(t, u, "", http.MethodPost, mcpList, header, "", "")
			want := http.StatusUnauthorized
			if tc.mcp {
				want = http.StatusOK
			}
			if code != want {
				t.Errorf("/mcp: %d %.200q, want %d", code, body, want)
			}
			if got := sshAdmits(t, r.url, tc.auth, tc.query); got != tc.ssh {
				t.Errorf("/ssh admitted = %v, want %v", got, tc.ssh)
			}
			// The REST face takes the token as /mcp does, /gateway as /ssh.
			u = r.url + "/tools"
			if tc.query != "" {
				u += "?" + tc.query
			}
			if code, body := guardRequest(t, u, "", http.MethodGet, "", header, "", ""); code != want {
				t.Errorf("/tools: %d %.200q, want %d", code, body, want)
			}
			if got := gatewayAdmits(t, r.url, tc.auth, tc.query); got != tc.ssh {
				t.Errorf("/gateway admitted = %v, want %v", got, tc.ssh)
			}
		})
	}
}

// sshAdmits opens /ssh with the given Authorization header and query and
// reports whether the daemon let the connection through: it then speaks
// SSH (its version line), where a refused one is closed with 4001.
func sshAdmits(t *testing.T, base, auth, query string) bool {
	t.Helper()
	u := "ws" + strings.TrimPrefix(base, "http") + "/ssh"
	if query != "" {
		u += "?" + query
	}
	h := http.Header{}
	if auth != "" {
		h.Set("Authorization", auth)
	}
	conn, resp, err := websocket.DefaultDialer.Dial(u, h)
	if err != nil {
		t.Fatalf("/ssh upgrade: %v", err)
	}
	resp.Body.Close()
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, msg, err := conn.ReadMessage()
	var ce *websocket.CloseError
	switch {
	case err == nil && bytes.HasPrefix(msg, []byte("SSH-2.0-")):
		return true
	case errors.As(err, &ce) && ce.Code == 4001 && ce.Text == "Unauthorized":
		return false
	default:
		t.Fatalf("/ssh: neither SSH nor 4001 Unauthorized: %q %v", msg, err)
		return false
	}
}

// gatewayAdmits opens /gateway as sshAdmits opens /ssh and reports whether
// a tools.list is answered (true) or the connection closed with 4001.
func gatewayAdmits(t *testing.T, base, auth, query string) bool {
	t.Helper()
	u := "ws" + strings.TrimPrefix(base, "http") + "/gateway"
	if query != "" {
		u += "?" + query
	}
	h := http.Header{}
	if auth != "" {
		h.Set("Authorization", auth)
	}
	conn, resp, err := websocket.DefaultDialer.Dial(u, h)
	if err != nil {
		t.Fatalf("/gateway upgrade: %v", err)
	}
	resp.Body.Close()
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_ = conn.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools.list"}`))
	_, msg, err := conn.ReadMessage()
	var ce *websocket.CloseError
	switch {
	case err == nil && bytes.Contains(msg, []byte(`"result":{"tools":`)):
		return true
	case errors.As(err, &ce) && ce.Code == 4001 && ce.Text == "Unauthorized":
		return false
	default:
		t.Fatalf("/gateway: neither a tools.list answer nor 4001 Unauthorized: %q %v", msg, err)
		return false
	}
}

package sites

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
)

// TestHandlerAdmission: the site's handler admits every request through
// the admission it is given (internal/admit), and cannot be built without
// the Origin and Host rules. A page in a browser is refused by its Origin
// (403); a POST whose body is not declared JSON is 415, so a cross-site
// "simple request" (text/plain, a form) cannot run a command; a rebinding
// Host on a loopback address is 403 without a token; without the token a
// request is 401; a token that may not run commands reads pages but runs
// nothing (403); and the site's own body bound holds, not the faces'.
func TestHandlerAdmission(t *testing.T) {
	s, _ := exampleSite(t, nil)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Handler without a Guard did not panic")
			}
		}()
		s.Handler(admit.Rules{})
	}()

	open := s.Handler(admit.Rules{Guard: httpguard.New(httpguard.Options{AllowedOrigins: []string{"https://app.example"}}), MaxBody: 8})
	set, err := httpguard.ParseTokens("tokens.json", []byte(`{"tokens":[{"name":"reader","sha256":"`+sum("reader-token")+`","readOnly":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tokens := new(atomic.Pointer[httpguard.TokenSet])
	tokens.Store(set)
	locked := s.Handler(admit.Rules{Guard: httpguard.New(httpguard.Options{AuthToken: "s3cret"}), Token: httpguard.NewTokens("s3cret", tokens)})
	const cmd = `{"command":["ls"]}`
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8000}
	for _, tc := range []struct {
		name         string
		h            http.Handler
		method, body string
		hdr          map[string]string
		rebind       bool // Host: evil.example on a loopback address
		status       int
		want         string
	}{
		{"cross-site text/plain POST", open, "POST", cmd, map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example"}, false, 403, "Forbidden origin"},
		{"cross-site GET", open, "GET", "", map[string]string{"Origin": "http://evil.example"}, false, 403, "Forbidden origin"},
		{"text/plain POST from an allowed origin", open, "POST", cmd, map[string]string{"Content-Type": "text/plain", "Origin": "https://app.example"}, false, 415, "Unsupported Media Type"},
		{"form POST", open, "POST", "command=ls", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, false, 415, "must be JSON"},
		{"POST without a Content-Type", open, "POST", cmd, nil, false, 415, `declares \"\"`},
		{"rebinding GET", open, "GET", "", nil, true, 403, "Forbidden host"},
		{"JSON POST from an allowed origin", open, "POST", cmd, map[string]string{"Content-Type": "application/json", "Origin": "https://app.example"}, false, 200, "guide.md"},
		{"a body over the faces' limit, within the site's", open, "POST", cmd, map[string]string{"Content-Type": "application/json; charset=utf-8"}, false, 200, "guide.md"},
		{"no token", locked, "GET", "", nil, false, 401, "Unauthorized"},
		{"no token, rebinding", locked, "GET", "", nil, true, 401, "Unauthorized"},
		{"the token, rebinding (a proxy)", locked, "GET", "", map[string]string{"Authorization": "Bearer s3cret"}, true, 200, "# Example tool site"},
		{"the token, text/plain POST", locked, "POST", cmd, map[string]string{"Authorization": "Bearer s3cret", "Content-Type": "text/plain"}, false, 415, "Unsupported Media Type"},
		{"the token, JSON POST", locked, "POST", cmd, map[string]string{"Authorization": "Bearer s3cret", "Content-Type": "application/json"}, false, 200, "guide.md"},
		{"a read-only token reads", locked, "GET", "", map[string]string{"Authorization": "Bearer reader-token"}, false, 200, "# Example tool site"},
		{"a read-only token runs nothing", locked, "POST", cmd, map[string]string{"Authorization": "Bearer reader-token", "Content-Type": "application/json"}, false, 403, `token \"reader\" may not run commands`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "http://127.0.0.1:8000/", strings.NewReader(tc.body))
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			if tc.rebind {
				req.Host = "evil.example"
				req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, net.Addr(loopback)))
			}
			rec := httptest.NewRecorder()
			tc.h.ServeHTTP(rec, req)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("%d %s; want %d containing %q", rec.Code, rec.Body, tc.status, tc.want)
			}
			if tc.status >= 400 {
				var refusal struct{ Error, Message string }
				if err := json.Unmarshal(rec.Body.Bytes(), &refusal); err != nil || refusal.Error == "" {
					t.Errorf("a refusal not in the daemon's shape: %s", rec.Body)
				}
			}
		})
	}
}

func sum(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

package admit

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/httpguard"
)

func TestNormalizeScope(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"", "", true}, {"/a/b", "a/b", true}, {"a", "a", true},
		{"..", "", false}, {"a/../b", "", false}, {"/../x", "", false},
	} {
		if got, ok := NormalizeScope(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("NormalizeScope(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestUnauthorizedSaysBearer: a refused token gets 401 with
// WWW-Authenticate: Bearer, so clients know how to authenticate.
func TestUnauthorizedSaysBearer(t *testing.T) {
	ru := Rules{Token: httpguard.NewToken("s3cret")}
	r := httptest.NewRequest("POST", "/mcp", nil)
	ref := ru.Check(r)
	if ref == nil || ref.Status != http.StatusUnauthorized {
		t.Fatalf("no token: %+v", ref)
	}
	w := httptest.NewRecorder()
	ref.Write(w)
	if got := w.Header().Get("WWW-Authenticate"); got != `Bearer realm="agent-backend"` {
		t.Errorf("WWW-Authenticate %q", got)
	}
	r.Header.Set("Authorization", "Bearer s3cret")
	if ref := ru.Check(r); ref != nil {
		t.Errorf("with the token: %+v", ref)
	}
}

// TestExecCaller: a request that acts as the workspace's commands is
// refused, with what it may do instead, for a token that may not run them;
// a bad token is 401 and a scope with ".." is 400, and a token that may
// run commands passes with its identity.
func TestExecCaller(t *testing.T) {
	sum := func(tok string) string { s := sha256.Sum256([]byte(tok)); return hex.EncodeToString(s[:]) }
	set, err := httpguard.ParseTokens("t.json", []byte(`{"tokens":[{"name":"ro","sha256":"`+sum("ro-token")+`","readOnly":true},
		{"name":"runner","sha256":"`+sum("run-token")+`"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var p atomic.Pointer[httpguard.TokenSet]
	p.Store(set)
	ru := Rules{Token: httpguard.NewTokens("", &p)}
	for _, tc := range []struct {
		token, scope string
		status       int
		want         string
	}{
		{"nope", "", http.StatusUnauthorized, "invalid or missing authentication token"},
		{"ro-token", "", http.StatusForbidden, `token \"ro\" may not run commands; reading is allowed`},
		{"run-token", "../up", http.StatusBadRequest, "scope path must not contain .."},
		{"run-token", "sub", 0, ""},
	} {
		r := httptest.NewRequest("POST", "/x", nil)
		r.Header.Set("Authorization", "Bearer "+tc.token)
		r.Header.Set(HeaderScopePath, tc.scope)
		w := httptest.NewRecorder()
		c, ok := ru.ExecCaller(w, r, "reading is allowed")
		if tc.status == 0 {
			if !ok || c.Name != "runner" || c.Scope != "sub" || w.Body.Len() != 0 {
				t.Errorf("%s: %+v %v %s", tc.token, c, ok, w.Body)
			}
			continue
		}
		if ok || w.Code != tc.status || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%s %q: %v %d %s; want %d %q", tc.token, tc.scope, ok, w.Code, w.Body, tc.status, tc.want)
		}
	}
}

// TestJSONOnly: with JSONOnly a POST must declare a JSON body (a charset
// or other parameter allowed), after the token: the types of a browser's
// cross-site "simple request" (text/plain, a form, multipart), a missing
// Content-Type, a malformed one and a look-alike are 415. GET and other
// methods are not judged; without JSONOnly nothing is.
func TestJSONOnly(t *testing.T) {
	ru := Rules{Token: httpguard.NewToken("s3cret"), JSONOnly: true}
	for _, tc := range []struct {
		method, ctype, token string
		status               int
	}{
		{"POST", "application/json", "s3cret", 0},
		{"POST", "application/json; charset=utf-8", "s3cret", 0},
		{"POST", "Application/JSON", "s3cret", 0},
		{"POST", "text/plain", "", http.StatusUnauthorized}, // the token first
		{"POST", "text/plain", "s3cret", http.StatusUnsupportedMediaType},
		{"POST", "text/plain;charset=UTF-8", "s3cret", http.StatusUnsupportedMediaType},
		{"POST", "application/x-www-form-urlencoded", "s3cret", http.StatusUnsupportedMediaType},
		{"POST", "multipart/form-data; boundary=x", "s3cret", http.StatusUnsupportedMediaType},
		{"POST", "", "s3cret", http.StatusUnsupportedMediaType},
		{"POST", "application/json-seq", "s3cret", http.StatusUnsupportedMediaType},
		{"POST", "application/json; charset", "s3cret", http.StatusUnsupportedMediaType},
		{"GET", "text/plain", "s3cret", 0},
		{"PUT", "text/plain", "s3cret", 0},
	} {
		r := httptest.NewRequest(tc.method, "/site/", strings.NewReader(`{"command":["ls"]}`))
		if tc.ctype != "" {
			r.Header.Set("Content-Type", tc.ctype)
		}
		if tc.token != "" {
			r.Header.Set("Authorization", "Bearer "+tc.token)
		}
		got := 0
		if ref := ru.Check(r); ref != nil {
			got = ref.Status
		}
		if got != tc.status {
			t.Errorf("%s %q: %d; want %d", tc.method, tc.ctype, got, tc.status)
		}
		off := ru
		off.JSONOnly = false
		if tc.token != "" {
			if ref := off.Check(r); ref != nil {
				t.Errorf("without JSONOnly, %s %q: %+v", tc.method, tc.ctype, ref)
			}
		}
	}
}

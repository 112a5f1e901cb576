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

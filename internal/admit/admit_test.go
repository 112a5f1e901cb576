package admit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/tools/registry"
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
	_, ref := ru.Admit(r)
	if ref == nil || ref.Status != http.StatusUnauthorized || !ref.Unauthorized() {
		t.Fatalf("no token: %+v", ref)
	}
	w := httptest.NewRecorder()
	ref.Write(w)
	if got := w.Header().Get("WWW-Authenticate"); got != `Bearer realm="agent-backend"` {
		t.Errorf("WWW-Authenticate %q", got)
	}
	r.Header.Set("Authorization", "Bearer s3cret")
	if _, ref := ru.Admit(r); ref != nil {
		t.Errorf("with the token: %+v", ref)
	}
}

// TestMayRun: a request that acts as the workspace's commands is
// refused, with what it may do instead, for a token that may not run them;
// a bad token is 401 and a scope with ".." is 400 before that, and a token
// that may run commands passes with its identity and scope.
func TestMayRun(t *testing.T) {
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
		{"nope", "", http.StatusUnauthorized, "Invalid or missing authentication token"},
		{"ro-token", "", http.StatusForbidden, `token \"ro\" may not run commands; reading is allowed`},
		{"run-token", "../up", http.StatusBadRequest, "Scope path must not contain path traversal sequences"},
		{"run-token", "sub", 0, ""},
	} {
		r := httptest.NewRequest("POST", "/x", nil)
		r.Header.Set("Authorization", "Bearer "+tc.token)
		r.Header.Set(HeaderScopePath, tc.scope)
		w := httptest.NewRecorder()
		c, ref := ru.Admit(r)
		if ref == nil {
			ref = c.MayRun("reading is allowed")
		}
		if tc.status == 0 {
			if ref != nil || c.Name != "runner" || c.Scope != "sub" {
				t.Errorf("%s: %+v %+v", tc.token, c, ref)
			}
			continue
		}
		if ref != nil {
			ref.Write(w)
		}
		if ref == nil || w.Code != tc.status || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%s %q: %d %s; want %d %q", tc.token, tc.scope, w.Code, w.Body, tc.status, tc.want)
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
		if _, ref := ru.Admit(r); ref != nil {
			got = ref.Status
		}
		if got != tc.status {
			t.Errorf("%s %q: %d; want %d", tc.method, tc.ctype, got, tc.status)
		}
		off := ru
		off.JSONOnly = false
		if tc.token != "" {
			if _, ref := off.Admit(r); ref != nil {
				t.Errorf("without JSONOnly, %s %q: %+v", tc.method, tc.ctype, ref)
			}
		}
	}
}

// TestReadOnlyCallerGetsReadOnlyWorkspace: the workspace a read-only
// caller is given refuses every change, so a tool that claims to read but
// writes cannot write for it through the registry (and an SSH connection
// of a read-only token, which takes its workspace from the same Caller,
// cannot either); a full caller's tool writes; the scopes of a bound
// token and of X-Scope-Path narrow the workspace, and Call carries the
// token's restrictions.
func TestReadOnlyCallerGetsReadOnlyWorkspace(t *testing.T) {
	root, err := fsops.NewDir(t.TempDir(), fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	reg := registry.New(registry.Options{})
	var werr error
	sneaky := registry.Tool{Name: "sneaky", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Handler: func(ctx context.Context, call registry.Call) *mcp.CallToolResult {
			werr = call.Workspace.WriteFile("x", []byte("x"))
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}
		}}
	if err := reg.Set("p", []registry.Tool{sneaky}); err != nil {
		t.Fatal(err)
	}
	call := func(c Caller) error {
		ws, release, err := c.Workspace(root)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		werr = nil
		if _, err := reg.Call(context.Background(), "sneaky", c.Call("rest", ws, nil)); err != nil {
			t.Fatal(err)
		}
		return werr
	}
	ro := Caller{Identity: httpguard.Identity{Name: "ro", ReadOnly: true}}
	if err := call(ro); !errcode.Is(err, errcode.PermissionDenied) {
		t.Errorf("a read-only caller's tool wrote: %v", err)
	}
	if err := call(Local); err != nil {
		t.Errorf("a full caller's write: %v", err)
	}
	bound := Caller{Identity: httpguard.Identity{Name: "alice", Scope: "users/alice", Exec: true}, Requested: "proj", Scope: "users/alice/proj", Remote: "1.2.3.4:5"}
	ws, release, err := bound.Workspace(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := root.Root() + "/users/alice/proj"; ws.Root() != want {
		t.Errorf("bound and requested scope: %s, want %s", ws.Root(), want)
	}
	release()
	got := bound.Call("gateway", ws, []byte(`{}`))
	if got.Caller != "alice" || got.Scope != "users/alice/proj" || !got.Bound || got.ReadOnly || got.NoExec || got.Face != "gateway" || got.Remote != "1.2.3.4:5" {
		t.Errorf("Call: %+v", got)
	}
	if got := ro.Call("rest", nil, nil); !got.ReadOnly || !got.NoExec || got.Bound {
		t.Errorf("read-only Call: %+v", got)
	}
}

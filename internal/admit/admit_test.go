package admit

import (
	"net/http"
	"net/http/httptest"
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

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

	"github.com/agentbe/agentbe-daemon/internal/httpguard"
)

// TestHoldsRejudge: a hold ends, with a *Revoked cause, when a reload
// removes its token (Removed) or changes its scope, readOnly or exec, and
// only then; the daemon's own token and the operator's are ended only
// when a reload rotates them (Token.Rotate), each with a cause naming
// which; a caller admitted before a reload and held after it is judged
// with the set in force at once; release forgets a hold.
func TestHoldsRejudge(t *testing.T) {
	line := func(name, rest string) string {
		s := sha256.Sum256([]byte(name + "-token"))
		return `{"name":"` + name + `","sha256":"` + hex.EncodeToString(s[:]) + `"` + rest + `}`
	}
	set := func(lines ...string) *httpguard.TokenSet {
		ts, err := httpguard.ParseTokens("tokens.json", []byte(`{"tokens":[`+strings.Join(lines, ",")+`]}`))
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	var ptr atomic.Pointer[httpguard.TokenSet]
	ptr.Store(set(line("alice", `,"scope":"a"`), line("bob", `,"scope":"b"`), line("carol", ""), line("dave", ""), line("erin", "")))
	ru := Rules{Token: httpguard.NewTokens("master-token", &ptr), Operator: httpguard.NewToken("op-token"), Holds: NewHolds()}
	admitted := func(tok string) Caller {
		r := httptest.NewRequest("GET", "/gateway", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		c, ref := ru.Admit(r)
		if ref != nil {
			t.Fatalf("%s: %+v", tok, ref)
		}
		return c
	}
	ctxs := map[string]context.Context{}
	for _, n := range []string{"alice", "bob", "carol", "dave", "master", "op"} {
		ctx, release := ru.Hold(context.Background(), admitted(n+"-token"))
		t.Cleanup(release)
		ctxs[n] = ctx
	}
	// Admitted before the reload, held after it: erin's token is gone.
	late := admitted("erin-token")
	ptr.Store(set(line("bob", `,"scope":"b","readOnly":true`), line("carol", `,"scope":"c"`), line("dave", `,"exec":false`)))
	if n := ru.Rejudge(); n != 4 {
		t.Errorf("Rejudge ended %d holds, want 4 (alice, bob, carol, dave)", n)
	}
	ctxs["erin"], _ = ru.Hold(context.Background(), late)
	for n, removed := range map[string]bool{"alice": true, "bob": false, "carol": false, "dave": false, "erin": true} {
		rv := RevokedBy(ctxs[n])
		if rv == nil || rv.Name != n || rv.Removed != removed || rv.Unauthorized() != removed {
			t.Errorf("%s: cause %v, want Revoked{%q, removed %v}", n, context.Cause(ctxs[n]), n, removed)
		}
	}
	for _, n := range []string{"master", "op"} {
		if err := ctxs[n].Err(); err != nil {
			t.Errorf("%s's hold ended on a reload: %v", n, context.Cause(ctxs[n]))
		}
	}
	ru.Holds.mu.Lock()
	held := len(ru.Holds.m)
	ru.Holds.mu.Unlock()
	// erin's release was dropped.
	if held != 7 {
		t.Errorf("%d holds registered, want 7", held)
	}
	// A second reload ends none: the holds it would end have ended.
	if n := ru.Rejudge(); n != 0 {
		t.Errorf("a second Rejudge ended %d holds, want 0", n)
	}
	// The operator's token rotated: the operator's hold ends, the
	// daemon's token's stays; then the daemon's token rotated.
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ru.Operator.Rotate("op-token-2"))
	if n := ru.Rejudge(); n != 1 {
		t.Errorf("Rejudge after the operator's token rotated ended %d holds, want 1", n)
	}
	if rv := RevokedBy(ctxs["op"]); rv == nil || !rv.Operator || !rv.Removed || !strings.Contains(rv.Error(), "--operator-token-file") {
		t.Errorf("the operator's hold: cause %v, want Revoked naming --operator-token-file", context.Cause(ctxs["op"]))
	}
	if err := ctxs["master"].Err(); err != nil {
		t.Errorf("the daemon's token's hold ended when the operator's rotated: %v", context.Cause(ctxs["master"]))
	}
	must(ru.Token.Rotate("master-token-2"))
	if n := ru.Rejudge(); n != 1 {
		t.Errorf("Rejudge after the daemon's token rotated ended %d holds, want 1", n)
	}
	if rv := RevokedBy(ctxs["master"]); rv == nil || rv.Operator || rv.Name != "" || !rv.Unauthorized() || !strings.Contains(rv.Error(), "--auth-token-file") {
		t.Errorf("the daemon's token's hold: cause %v, want Revoked naming --auth-token-file", context.Cause(ctxs["master"]))
	}
	if _, ref := ru.Admit(func() *http.Request {
		r := httptest.NewRequest("GET", "/gateway", nil)
		r.Header.Set("Authorization", "Bearer master-token")
		return r
	}()); ref == nil || !ref.Unauthorized() {
		t.Errorf("the daemon's old token after Rotate: %+v, want 401", ref)
	}
	admitted("master-token-2")
	if err := (httpguard.Token{}).Rotate("x"); err == nil {
		t.Error("Rotate of a Token that requires no token succeeded")
	}
	if err := ru.Token.Rotate(""); err == nil {
		t.Error("Rotate to an empty token succeeded")
	}
	// Without Holds, a hold ends with its parent or release alone.
	bare := Rules{Token: ru.Token}
	ctx, release := bare.Hold(context.Background(), admitted("bob-token"))
	if bare.Rejudge() != 0 || ctx.Err() != nil {
		t.Error("a hold without Holds ended on Rejudge")
	}
	release()
	if ctx.Err() == nil || RevokedBy(ctx) != nil {
		t.Errorf("release: %v", context.Cause(ctx))
	}
}

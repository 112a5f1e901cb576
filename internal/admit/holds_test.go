package admit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/httpguard"
)

// TestHoldsRejudge: a hold ends, with a *Revoked cause, when a reload
// removes its token (Removed) or changes its scope, readOnly or exec, and
// only then; the daemon's own token and the operator are never ended by
// a reload; a caller admitted before a reload and held after it is judged
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
	// The operator is never registered; erin's release was dropped.
	if held != 6 {
		t.Errorf("%d holds registered, want 6", held)
	}
	// A second reload ends none: the holds it would end have ended.
	if n := ru.Rejudge(); n != 0 {
		t.Errorf("a second Rejudge ended %d holds, want 0", n)
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

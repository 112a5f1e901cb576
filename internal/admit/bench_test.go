package admit

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/httpguard"
)

// BenchmarkAdmit is one request's admission as the daemon's faces admit
// it: the Origin and Host rules, the token (the daemon's, or one of the
// token file), X-Root-Dir and X-Scope-Path, the declared body size, and
// the caller that names who calls.
func BenchmarkAdmit(b *testing.B) {
	sum := sha256.Sum256([]byte("file-token"))
	set, err := httpguard.ParseTokens("tokens.json", []byte(`{"tokens":[{"name":"bench","sha256":"`+hex.EncodeToString(sum[:])+`","scope":"users/bench"}]}`))
	if err != nil {
		b.Fatal(err)
	}
	tokens := new(atomic.Pointer[httpguard.TokenSet])
	tokens.Store(set)
	ru := Rules{Guard: httpguard.New(httpguard.Options{AuthToken: "bench-token", AllowedOrigins: []string{"https://app.example"}}),
		Token: httpguard.NewTokens("bench-token", tokens), RootDir: "/srv/ws", MaxBody: 4 << 20}
	for _, tc := range []struct{ name, token string }{{"token", "bench-token"}, {"tokenfile", "file-token"}} {
		b.Run(tc.name, func(b *testing.B) {
			r := httptest.NewRequest("POST", "/mcp", nil)
			r.Header.Set("Authorization", "Bearer "+tc.token)
			r.Header.Set("Origin", "https://app.example")
			r.Header.Set(HeaderRootDir, "/srv/ws")
			r.Header.Set(HeaderScopePath, "/proj")
			b.ReportAllocs()
			for b.Loop() {
				c, ref := ru.Admit(r)
				if ref != nil || c.Scope == "" {
					b.Fatal(ref, c)
				}
			}
		})
	}
}

package admit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
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

// BenchmarkReplyDeadline is one keep-alive request whose handler writes
// a 4 KiB reply (an MCP read's size), over loopback, with the reply's
// stall bound (ReplyDeadline: a write deadline set and cleared around the
// write and the final flush) and without it: what the bound costs each
// request of every route.
func BenchmarkReplyDeadline(b *testing.B) {
	reply := bytes.Repeat([]byte("r"), 4<<10)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reply)
	})
	for _, tc := range []struct {
		name string
		h    http.Handler
	}{{"bare", h}, {"reply-deadline", ReplyDeadline(h, ReplyStallTimeout)}} {
		b.Run(tc.name, func(b *testing.B) {
			srv := httptest.NewServer(tc.h)
			defer srv.Close()
			client := srv.Client()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				if n, _ := io.Copy(io.Discard, resp.Body); n != int64(len(reply)) {
					b.Fatal(n)
				}
				resp.Body.Close()
			}
		})
	}
}

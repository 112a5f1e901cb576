package admit

import (
	"net/http"
	"time"

	"golang.org/x/net/http/httpguts"
)

// The read deadlines of every HTTP server of the project (the daemon's
// listener and `site serve`), so that a client can hold a connection only
// while it sends: a header must arrive within HeaderTimeout (the server's
// ReadHeaderTimeout), and a body within BodyTimeout of its handling's
// start (BodyDeadline).
const (
	HeaderTimeout = 10 * time.Second
	// BodyTimeout bounds the reading of a request's body: a client that
	// declares a body and never sends it must not hold its connection,
	// and the slot that counts it, for ever. net/http reads a body a
	// handler left unread before it answers, so without it even a refusal
	// (401, 403) would wait for the body.
	BodyTimeout = 30 * time.Second
)

// BodyDeadline returns next with the body deadline: each request's body
// must arrive within d, or its read fails with a timeout (net/http resets
// the deadline for the connection's next request). The one request spared
// is a WebSocket handshake (BodilessUpgrade), whose connection is handed
// over to /ssh, /gateway or a preview, which keep it alive their own way.
// The deadline does not cut a handler that has read its body and runs on:
// net/http's read in the background after the body ignores it.
func BodyDeadline(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !BodilessUpgrade(r) {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		next.ServeHTTP(w, r)
	})
}

// BodilessUpgrade reports whether r is a WebSocket handshake as RFC 6455
// has it, a GET without a body asking to switch protocols: the one request
// the body deadline spares, since it would stay on the connection once it
// is handed over (httputil.ReverseProxy, which /preview/ upgrades with,
// does not clear it). Whatever else says "Connection: Upgrade" is held to
// the deadline: the header is the client's say-so, and a route that never
// upgrades (/mcp), or a workspace server that answers without switching,
// would otherwise wait for a declared body without end.
func BodilessUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && r.ContentLength == 0 && IsUpgrade(r)
}

// IsUpgrade reports whether r asks to switch protocols (a WebSocket): its
// Connection header names "upgrade", as net/http's server and reverse
// proxy read the header's tokens (httpguts: only spaces and tabs around a
// token; a no-break space before "upgrade" does not make one).
func IsUpgrade(r *http.Request) bool {
	return httpguts.HeaderValuesContainsToken(r.Header["Connection"], "upgrade")
}

// Package httpguard holds the HTTP checks that every endpoint doing work on
// the workspace applies before anything else: the browser Origin rule and the
// DNS-rebinding Host rule (Guard), and the bearer-token rule (Token, with the
// token file of tokens.go). There is one implementation of each, and one
// caller: internal/admit applies them, once per request, for every face and
// server (TestAdmissionHasOneHome in internal/admit keeps it so).
//
// The rules:
//
//   - Origin: a request carrying an Origin header (every browser request
//     that could do harm) is refused unless the origin is a loopback one
//     (http or https, host localhost or a loopback IP) or is listed in
//     AllowedOrigins ("*" admits any). Non-browser clients send no Origin.
//   - Host: when no token is configured, a request that arrived on a
//     loopback address but names a non-loopback Host is refused: a browser
//     tricked into resolving evil.example to 127.0.0.1 sends
//     "Host: evil.example". With a token the rule is off: a rebinding page
//     cannot know the token, and a reverse proxy on the same machine
//     (nginx → 127.0.0.1 with Host: api.example.com) must keep working.
//   - Token: "Authorization: Bearer <token>", the scheme in any case and
//     separated by spaces or tabs, or, on the WebSocket endpoints (/ssh,
//     /gateway), "?token=<token>"; compared in constant time (see Token).
package httpguard

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/internal/ratelog"
)

// Options configure a Guard.
type Options struct {
	// AuthToken is the daemon's token ("" = none); only whether it is set
	// matters here (the Host rule applies without one).
	AuthToken string
	// AllowedOrigins are browser origins (scheme://host[:port], compared
	// case-insensitively, a trailing "/" ignored) allowed besides loopback
	// ones; "*" allows any.
	AllowedOrigins []string
	// Logger receives refusals at Warn; nil discards them.
	Logger *slog.Logger
}

// Guard applies the Origin and Host rules. It is safe for concurrent use.
type Guard struct {
	hostRule bool
	anyOrig  bool
	origins  []string // lower case, without a trailing "/"
	log      *slog.Logger
	warns    ratelog.Every // a page can send refused requests at any rate
	checks   atomic.Uint64
}

// New builds a Guard from opts.
func New(opts Options) *Guard {
	g := &Guard{hostRule: opts.AuthToken == "", log: opts.Logger}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	for _, o := range opts.AllowedOrigins {
		if o == "*" {
			g.anyOrig = true
			continue
		}
		g.origins = append(g.origins, strings.ToLower(strings.TrimRight(o, "/")))
	}
	return g
}

// Refusal is why a request was refused: the HTTP status, a short title
// and a message saying what was wrong and what to do.
type Refusal struct {
	Status  int
	Title   string
	Message string

	logMsg string // the warning Check logs
}

// Check applies the rules to r and returns nil if it may proceed. A refusal
// is logged at Warn with the client's address, rate-limited per rule
// (ratelog), with the client's Origin or Host cut to logCut bytes.
func (g *Guard) Check(r *http.Request) *Refusal {
	g.checks.Add(1)
	ref, kind, attrs := g.judge(r)
	if ref != nil {
		g.warns.Warn(g.log, kind, ref.logMsg, attrs...)
	}
	return ref
}

// Passes reports whether r passes the rules, refusing nothing and logging
// nothing: for an answer that every caller gets and that says more to a
// caller the rules admit (/health's details, internal/admit Rules.Trusted).
func (g *Guard) Passes(r *http.Request) bool {
	ref, _, _ := g.judge(r)
	return ref == nil
}

// judge is the rules themselves: the refusal (nil if none), and the kind
// and attributes of its warning.
func (g *Guard) judge(r *http.Request) (*Refusal, string, []any) {
	if origin := r.Header.Get("Origin"); origin != "" && !g.OriginAllowed(origin) {
		return &Refusal{Status: http.StatusForbidden, Title: "Forbidden origin",
				Message: fmt.Sprintf("Origin %s is not allowed to use %s; add it to the server's --allowed-origins", origin, r.URL.Path),
				logMsg:  "http: refused a browser origin"},
			"origin", []any{"path", cut(r.URL.Path), "origin", cut(origin), "remote", r.RemoteAddr}
	}
	if g.hostRule {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil &&
			IsLoopbackAddr(la.String()) && !IsLoopbackAddr(r.Host) {
			return &Refusal{Status: http.StatusForbidden, Title: "Forbidden host",
					Message: fmt.Sprintf("Host %q is not a loopback name, but the request arrived on a loopback address (DNS rebinding?); use 127.0.0.1 or localhost, or set an auth token", r.Host),
					logMsg:  "http: refused a non-loopback Host on a loopback address"},
				"host", []any{"path", cut(r.URL.Path), "host", cut(r.Host), "remote", r.RemoteAddr}
		}
	}
	return nil, "", nil
}

// Checks is how many requests Check has judged: what a test reads to see
// that every request is judged once.
func (g *Guard) Checks() uint64 { return g.checks.Load() }

// Wrap returns h behind the rules: a refused request is answered with the
// daemon's JSON error shape ({"error": title, "message": ...}) and never
// reaches h.
func (g *Guard) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ref := g.Check(r); ref != nil {
			ref.Write(w)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Write answers the refusal as {"error": Title, "message": Message}.
func (ref *Refusal) Write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(ref.Status)
	_ = json.NewEncoder(w).Encode(struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}{ref.Title, ref.Message})
}

// OriginAllowed reports whether a browser Origin may call a work endpoint:
// a configured origin, or a loopback one.
func (g *Guard) OriginAllowed(origin string) bool {
	if g.anyOrig {
		return true
	}
	for _, o := range g.origins {
		if strings.EqualFold(o, origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return IsLoopbackHost(u.Hostname())
}

// IsLoopbackHost reports whether h (a host name or IP, no port) names the
// loopback: "localhost" or a loopback IP.
func IsLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// IsLoopbackAddr reports whether a host or host:port names the loopback.
func IsLoopbackAddr(hostport string) bool {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	return IsLoopbackHost(strings.Trim(h, "[]"))
}

// logCut is how much of a client's Origin, Host or path a refusal's log
// line keeps: a header may be up to 1 MiB.
const logCut = 256

func cut(v string) string { return clip.String(v, logCut) }

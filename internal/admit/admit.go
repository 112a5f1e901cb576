// Package admit is the one admission of every HTTP face and server: /mcp,
// /execute, /tools, /gateway, /ssh, /preview/, a tool site on the daemon's
// /site/ and under `site serve`, and the Origin and Host rules of /metrics
// and /approvals. It applies, once per request and in the order
// docs/protocol.md gives, Origin and Host (internal/httpguard), the bearer
// token, X-Root-Dir, X-Scope-Path, a declared body size and, where a POST
// runs something, a JSON body (JSONOnly). The token is looked up once, and
// that lookup says who calls: the Caller, which gives the workspace the
// request works in (its scope, read-only for a read-only token) and builds
// its registry call. So no face can drift from another on any of these,
// and TestAdmissionHasOneHome fails on a file that does any of it again.
//
// The servers' deadlines live here too, for the daemon's listener and
// `site serve` alike (TestEveryServerAdmits): a header within
// HeaderTimeout, a body within BodyTimeout (BodyDeadline, deadline.go), and
// each piece of a reply taken by the client within ReplyStallTimeout
// (ReplyDeadline, stall.go).
//
// A newcomer adding an HTTP face builds one Rules value from the daemon's
// options and calls Rules.Admit first thing in its handler (or Rules.Begin
// and then Admission.Admit, when the face answers something of its own
// between the Origin and Host rules and the token: shutting down, a wrong
// method, the WebSocket upgrade); a refusal is written with Refusal.Write.
// The Caller then gives the workspace (Caller.Workspace) and the registry
// call (Caller.Call).
package admit

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// Header names of the agent-backend clients.
const (
	HeaderRootDir   = "X-Root-Dir"
	HeaderScopePath = "X-Scope-Path"
)

// Rules are the admission rules of one endpoint. The zero value admits
// everything; each field adds its rule.
type Rules struct {
	Guard *httpguard.Guard // Origin and Host; nil skips
	Token httpguard.Token  // bearer token
	// Operator is the operator's token (--operator-token-file) on an
	// endpoint where the operator may act (/gateway): a request carrying
	// it is admitted as the operator (Caller.Operator: everything) before
	// Token is looked at. The zero Token names no operator.
	Operator httpguard.Token
	// Scrape is the token /metrics requires (--metrics-token-file), which
	// opens nothing else; a Trusted caller's token opens /metrics too. The
	// zero Token leaves /metrics to the Origin and Host rules (Scraped).
	Scrape httpguard.Token
	// QueryToken takes the token from the "token" query parameter too,
	// when the Authorization header carries none that matches: the
	// WebSocket endpoints (/ssh, /gateway), which a browser's WebSocket
	// API and the 0.11 clients open without headers.
	QueryToken bool
	// IgnoreRootAndScope leaves X-Root-Dir and X-Scope-Path unread: /ssh,
	// whose clients name the directories they work in in their commands
	// (docs/protocol.md lists no header rule for it).
	IgnoreRootAndScope bool
	RootDir            string // the daemon's root exactly as configured
	StaticScope        string // --scope-path, "" if none
	MaxBody            int64  // declared body limit; 0 none
	// JSONOnly refuses a POST whose body is not declared JSON (JSONBody):
	// on an endpoint that runs something on a POST, so that a page in a
	// browser cannot call it with a cross-site "simple request".
	JSONOnly bool
	// Holds are the connections and streams admitted callers keep open
	// (Rules.Hold), judged again on a reload (Rules.Rejudge); nil: none
	// are tracked.
	Holds *Holds
}

// Refusal is why a request was not admitted: an HTTP status and the
// reference's {"error","message"} body.
type Refusal struct {
	Status  int
	Title   string
	Message string
	// Hint, when set, says what to change; the JSON body's message is
	// Message, ": " and Hint. A WebSocket close reason (at most 123 bytes)
	// carries Title and Message alone.
	Hint string
	// RetryAfter, when set, is the answer's Retry-After header.
	RetryAfter string
}

// Unauthorized reports whether the token refused the request (401): a
// WebSocket endpoint answers it with close code 4001, anything else of
// Admission.Admit with 1008.
func (ref *Refusal) Unauthorized() bool { return ref.Status == http.StatusUnauthorized }

// Write sends the refusal as JSON. A 401 says which scheme to use
// (WWW-Authenticate: Bearer, RFC 6750): the daemon's auth is one static
// bearer token, which clients pass as "Authorization: Bearer <token>".
func (ref *Refusal) Write(w http.ResponseWriter) {
	if ref.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agent-backend"`)
	}
	if ref.RetryAfter != "" {
		w.Header().Set("Retry-After", ref.RetryAfter)
	}
	msg := ref.Message
	if ref.Hint != "" {
		msg += ": " + ref.Hint
	}
	WriteJSONError(w, ref.Status, ref.Title, msg)
}

// WriteJSONError writes the reference's error body ({"error": short title,
// "message": what to do}), which clients log verbatim, with its headers:
// the one writer of the daemon's HTTP error answers, httpguard's
// Refusal.Write (which the Origin and Host rules answer with below
// internal/admit). TestJSONErrorHasOneHome fails on a file that writes the
// shape itself.
func WriteJSONError(w http.ResponseWriter, status int, title, msg string) {
	(&httpguard.Refusal{Status: status, Title: title, Message: msg}).Write(w)
}

// Admission is a request that has passed the Origin and Host rules
// (Rules.Begin) on its way to the rest (Admission.Admit). Only Begin makes
// one, so no face can reach the token without the Origin and Host rules.
type Admission struct {
	ru *Rules
	r  *http.Request
}

// Begin applies the Origin and Host rules to r: the first step, which
// every endpoint takes before it answers anything of its own.
func (ru *Rules) Begin(r *http.Request) (Admission, *Refusal) {
	if ru.Guard != nil {
		if ref := ru.Guard.Check(r); ref != nil {
			return Admission{}, &Refusal{Status: ref.Status, Title: ref.Title, Message: ref.Message}
		}
	}
	return Admission{ru: ru, r: r}, nil
}

// Admit is Begin and then Admission.Admit, for a face that answers
// nothing of its own between the two.
func (ru *Rules) Admit(r *http.Request) (Caller, *Refusal) {
	a, ref := ru.Begin(r)
	if ref != nil {
		return Caller{}, ref
	}
	return a.Admit()
}

// Admit applies the rest of the rules in order and returns who calls. The
// order matters to clients: an unauthenticated request learns nothing
// about the root or the scopes, and a wrong root is reported before any
// scope problem. The token is looked up once: the identity it names is
// the Caller's, so a reload of the token file between admission and the
// call cannot leave a request admitted as one token and run as another.
func (a Admission) Admit() (Caller, *Refusal) {
	ru, r := a.ru, a.r
	if ru == nil {
		panic("admit: Admission.Admit without Rules.Begin")
	}
	c := Caller{Remote: r.RemoteAddr}
	if ru.Operator.Required() {
		c.Identity, c.cred, c.Operator = ru.Operator.IdentifyCredential(r, ru.QueryToken)
	}
	if !c.Operator {
		var ok bool
		if c.Identity, c.cred, ok = ru.Token.IdentifyCredential(r, ru.QueryToken); !ok {
			return Caller{}, &Refusal{Status: http.StatusUnauthorized, Title: "Unauthorized", Message: "Invalid or missing authentication token"}
		}
	}
	if !ru.IgnoreRootAndScope {
		// Old clients send the string "undefined" when they have no root
		// configured; the reference ignores it.
		if rd := r.Header.Get(HeaderRootDir); rd != "" && rd != "undefined" && rd != ru.RootDir {
			return Caller{}, &Refusal{Status: http.StatusForbidden, Title: "Root directory mismatch",
				Message: rootFact(ru.RootDir, rd), Hint: rootHint(ru.RootDir, rd)}
		}
		if sp := r.Header.Get(HeaderScopePath); sp != "" {
			if ru.StaticScope != "" {
				return Caller{}, &Refusal{Status: http.StatusBadRequest, Title: "Scope conflict",
					Message: fmt.Sprintf("Server was started with static scope '%s', but request also specified scope '%s'. Use one or the other, not both.", ru.StaticScope, sp)}
			}
			n, ok := NormalizeScope(sp)
			if !ok {
				return Caller{}, &Refusal{Status: http.StatusBadRequest, Title: "Invalid scope path",
					Message: "Scope path must not contain path traversal sequences"}
			}
			c.Requested = n
		}
	}
	c.Scope = httpguard.JoinScope(c.Identity, c.Requested)
	if ru.MaxBody > 0 && r.ContentLength > ru.MaxBody {
		return Caller{}, &Refusal{Status: http.StatusRequestEntityTooLarge, Title: "Request too large",
			Message: fmt.Sprintf("request body is %d bytes; the limit is %d bytes (write large files in parts, or raise the daemon's body limit)", r.ContentLength, ru.MaxBody)}
	}
	if ru.JSONOnly {
		if ref := JSONBody(r); ref != nil {
			return Caller{}, ref
		}
	}
	return c, nil
}

// Scraped returns h (/metrics) behind the Origin and Host rules and, when
// the rules name a Scrape token, behind that token: a request whose
// Authorization header carries neither it nor a Trusted caller's token is
// answered 401. A refused request never reaches h.
func (ru *Rules) Scraped(h http.Handler) http.Handler {
	return ru.Guarded(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ru.Scrape.Required() {
			if _, ok := ru.Scrape.IdentifyRequest(r, false); !ok && !ru.Trusted(r) {
				(&Refusal{Status: http.StatusUnauthorized, Title: "Unauthorized",
					Message: "Invalid or missing authentication token: /metrics asks for the scraper's token (--metrics-token-file)"}).Write(w)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
}

// Guarded returns h behind the Origin and Host rules alone, for a route
// that takes no token (/metrics without --metrics-token-file) or checks
// its own (/approvals: the operator's, IsOperator). A refused request
// never reaches h.
func (ru *Rules) Guarded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ref := ru.Begin(r); ref != nil {
			ref.Write(w)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// IsOperator reports whether r's Authorization header carries the
// operator's token; false when there is none.
func (ru *Rules) IsOperator(r *http.Request) bool {
	if !ru.Operator.Required() {
		return false
	}
	_, ok := ru.Operator.IdentifyRequest(r, false)
	return ok
}

// Trusted reports whether r comes from a caller with every right: it
// passes the Origin and Host rules and its Authorization header carries
// the operator's token or a token of the whole root, read-write, that may
// run commands (any request, when the daemon has no token). It refuses
// nothing and logs nothing: an answer that every caller gets, /health,
// says more than liveness only to such a caller, so a probe needs no
// token while a stranger, a DNS-rebinding page or a token bound to a
// scope learns nothing of the host but what the protocol makes public.
func (ru *Rules) Trusted(r *http.Request) bool {
	if ru.Guard != nil && !ru.Guard.Passes(r) {
		return false
	}
	if ru.IsOperator(r) {
		return true
	}
	id, ok := ru.Token.IdentifyRequest(r, false)
	return ok && id.Scope == "" && !id.ReadOnly && id.Exec
}

// JSONBody is the JSON-only body rule: a POST must declare its body
// "Content-Type: application/json" (parameters such as charset allowed),
// else 415. A browser page may send a cross-site POST without a CORS
// preflight only as a "simple request", whose body is text/plain,
// application/x-www-form-urlencoded or multipart/form-data; a JSON body
// needs the preflight, which no endpoint here answers. (GET and HEAD
// carry no body, and PUT, PATCH and DELETE are always preflighted.)
func JSONBody(r *http.Request) *Refusal {
	if r.Method != http.MethodPost {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return nil
	}
	return &Refusal{Status: http.StatusUnsupportedMediaType, Title: "Unsupported Media Type",
		Message: fmt.Sprintf("a POST body must be JSON, sent with Content-Type: application/json (this one declares %q)", ct)}
}

// Caller is who made a request and where it works: the identity of its
// credential, the scope its X-Scope-Path asked for, the two joined (what
// logs and the audit log call its scope), and its address.
type Caller struct {
	httpguard.Identity
	Requested string // X-Scope-Path, normalized
	Scope     string // httpguard.JoinScope(Identity, Requested)
	Remote    string // the client's address; "" for stdio
	// Operator says the request came with the operator's token
	// (Rules.Operator): everything, and it may decide approvals.
	Operator bool
	// cred is the digest of the token the caller was admitted with, for
	// Rules.Hold to judge it again after a reload.
	cred httpguard.Credential
}

// Local is the caller of a request that carries no HTTP credential
// (stdio): everything, at the root.
var Local = Caller{Identity: httpguard.Full}

// MayRun is nil when c may run commands, else the 403 that says so,
// naming c's token and what it may do instead (instead): for a request
// that acts as the workspace's commands do (a site's command, a
// connection to a workspace process's server).
func (c Caller) MayRun(instead string) *Refusal {
	if c.Exec {
		return nil
	}
	return &Refusal{Status: http.StatusForbidden, Title: "Forbidden", Message: fmt.Sprintf("token %q may not run commands; %s", c.Name, instead)}
}

// Workspace opens the caller's workspace below root, the one place scope
// and read-only are applied, for every face and /ssh: its token's scope,
// then the requested scope beneath that one's own handle, so a link in
// the requested path is followed only while it stays inside the token's
// scope (a link that leads elsewhere in the root is an escape); and, for
// a read-only token, a workspace that refuses every change
// (fsops.ReadOnly), whatever a tool or SSH request tries. release closes
// what was opened.
func (c Caller) Workspace(root fsops.Workspace) (ws fsops.Workspace, release func(), err error) {
	if ws, release, err = scoped(root, c.Identity.Scope, c.Requested); err != nil {
		return nil, nil, err
	}
	if c.ReadOnly {
		ws = fsops.ReadOnly(ws)
	}
	return ws, release, nil
}

// scoped is root's scope base, then requested beneath it.
func scoped(root fsops.Workspace, base, requested string) (fsops.Workspace, func(), error) {
	if base == "" && requested == "" {
		return root, func() {}, nil
	}
	if base == "" || requested == "" {
		ws, err := root.Scope(base + requested)
		if err != nil {
			return nil, nil, err
		}
		return ws, func() { _ = ws.Close() }, nil
	}
	b, err := root.Scope(base)
	if err != nil {
		return nil, nil, err
	}
	ws, err := b.Scope(requested)
	if err != nil {
		_ = b.Close()
		return nil, nil, err
	}
	return ws, func() { _ = ws.Close(); _ = b.Close() }, nil
}

// Call is the registry call c makes on face (named for the audit log and
// the metrics: "mcp-http", "mcp-stdio", "rest", "gateway") in ws with
// args: who calls, and what its token may not do (ReadOnly, NoExec,
// Bound), come from c alone.
func (c Caller) Call(face string, ws fsops.Workspace, args json.RawMessage) registry.Call {
	return registry.Call{Args: args, Workspace: ws, Face: face, Remote: c.Remote, Scope: c.Scope,
		Caller: c.Name, ReadOnly: c.ReadOnly, NoExec: !c.Exec, Bound: c.Identity.Scope != ""}
}

// NormalizeScope applies the reference's rule to X-Scope-Path: leading
// slashes are stripped, and any ".." is refused outright (not resolved), so
// "a/../b" is as invalid as "../b". "" means no scope.
func NormalizeScope(sp string) (string, bool) {
	if strings.Contains(sp, "..") {
		return "", false
	}
	return strings.TrimLeft(sp, "/"), true
}

// Package admit holds the steps every HTTP face and server (/mcp, /execute,
// /tools, /gateway, /preview/, a tool site on the daemon's /site/ and under
// `site serve`) applies to a request before it does any work, in the order
// docs/protocol.md gives them: Origin and Host (internal/httpguard), the
// bearer token, X-Root-Dir, X-Scope-Path, a declared body size and, where
// a POST runs something, a JSON body (JSONOnly). It also turns an admitted
// scope into the workspace a call works in, so the faces cannot drift apart
// on either rule.
//
// A newcomer adding an HTTP face builds one Rules value from the daemon's
// options and calls Check first thing in its handler, then Workspace for the
// call's workspace; a refusal is written with Refusal.Write.
package admit

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
)

// Header names of the agent-backend clients.
const (
	HeaderRootDir   = "X-Root-Dir"
	HeaderScopePath = "X-Scope-Path"
)

// Rules are the admission rules of one daemon.
type Rules struct {
	Guard       *httpguard.Guard // Origin and Host; nil skips
	Token       httpguard.Token  // bearer token (header only)
	RootDir     string           // the daemon's root exactly as configured
	StaticScope string           // --scopePath, "" if none
	MaxBody     int64            // declared body limit; 0 none
	// JSONOnly refuses a POST whose body is not declared JSON (JSONBody):
	// on an endpoint that runs something on a POST, so that a page in a
	// browser cannot call it with a cross-site "simple request".
	JSONOnly bool
}

// Refusal is why a request was not admitted: an HTTP status and the
// reference's {"error","message"} body.
type Refusal struct {
	Status  int
	Title   string
	Message string
}

// Write sends the refusal as JSON. A 401 says which scheme to use
// (WWW-Authenticate: Bearer, RFC 6750): the daemon's auth is one static
// bearer token, which clients pass as "Authorization: Bearer <token>".
func (ref *Refusal) Write(w http.ResponseWriter) {
	if ref.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agent-backend"`)
	}
	WriteJSONError(w, ref.Status, ref.Title, ref.Message)
}

// WriteJSONError writes the reference's error body ({"error": short title,
// "message": what to do}), which clients log verbatim.
func WriteJSONError(w http.ResponseWriter, status int, title, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}{title, msg})
}

// Check applies the rules in order. The order matters to clients: an
// unauthenticated request learns nothing about the root or the scopes, and
// a wrong root is reported before any scope problem.
func (ru *Rules) Check(r *http.Request) *Refusal {
	if ru.Guard != nil {
		if ref := ru.Guard.Check(r); ref != nil {
			return &Refusal{ref.Status, ref.Title, ref.Message}
		}
	}
	if !ru.Token.AllowsHeader(r) {
		return &Refusal{http.StatusUnauthorized, "Unauthorized", "Invalid or missing authentication token"}
	}
	// Old clients send the string "undefined" when they have no root
	// configured; the reference ignores it.
	if rd := r.Header.Get(HeaderRootDir); rd != "" && rd != "undefined" && rd != ru.RootDir {
		return &Refusal{http.StatusForbidden, "Root directory mismatch",
			fmt.Sprintf("Server is configured for %s, not %s", ru.RootDir, rd)}
	}
	if sp := r.Header.Get(HeaderScopePath); sp != "" {
		if ru.StaticScope != "" {
			return &Refusal{http.StatusBadRequest, "Scope conflict",
				fmt.Sprintf("Server was started with static scope '%s', but request also specified scope '%s'. Use one or the other, not both.", ru.StaticScope, sp)}
		}
		if _, ok := NormalizeScope(sp); !ok {
			return &Refusal{http.StatusBadRequest, "Invalid scope path",
				"Scope path must not contain path traversal sequences"}
		}
	}
	if ru.MaxBody > 0 && r.ContentLength > ru.MaxBody {
		return &Refusal{http.StatusRequestEntityTooLarge, "Request too large",
			fmt.Sprintf("request body is %d bytes; the limit is %d bytes (write large files in parts, or raise the daemon's body limit)", r.ContentLength, ru.MaxBody)}
	}
	if ru.JSONOnly {
		return JSONBody(r)
	}
	return nil
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
	return &Refusal{http.StatusUnsupportedMediaType, "Unsupported Media Type",
		fmt.Sprintf("a POST body must be JSON, sent with Content-Type: application/json (this one declares %q)", ct)}
}

// Caller is who made a request and where it works: the identity of its
// credential, the scope its X-Scope-Path asked for, and the two joined
// (what logs and the audit log call its scope).
type Caller struct {
	httpguard.Identity
	Requested string // X-Scope-Path, normalized
	Scope     string // JoinScope(Identity, Requested)
}

// Full is the caller of a request that carries no HTTP credential
// (stdio): everything, at the root.
var Full = Caller{Identity: httpguard.Full}

// Caller is who a request that Check admitted is, from its own credential
// (the Authorization header, and the "token" query parameter when q is
// given), and the scope it works in: its token's, narrowed by
// X-Scope-Path. Every face asks it, so a token bound to a scope cannot
// reach outside it through any of them.
func (ru *Rules) Caller(h http.Header, q url.Values) (Caller, error) {
	id, ok := ru.Token.Identify(h, q)
	if !ok {
		return Caller{}, errcode.New(errcode.PermissionDenied, "auth", "", "invalid or missing authentication token")
	}
	sp, ok := NormalizeScope(h.Get(HeaderScopePath))
	if !ok {
		return Caller{}, errcode.New(errcode.PathEscapeAttempt, "scope", sp, "scope path must not contain ..")
	}
	return Caller{Identity: id, Requested: sp, Scope: httpguard.JoinScope(id, sp)}, nil
}

// ExecCaller is Caller for a request that acts as the workspace's commands
// do (a site's command, a connection to a workspace process's server): a
// token that may not run commands (read-only, "exec": false) is refused
// with 403, naming the token and what it may do instead (instead). A
// refusal is written to w, and ok is false.
func (ru *Rules) ExecCaller(w http.ResponseWriter, r *http.Request, instead string) (c Caller, ok bool) {
	c, err := ru.Caller(r.Header, nil)
	if err != nil {
		status, title := http.StatusUnauthorized, "Unauthorized"
		if errcode.Of(err) == errcode.PathEscapeAttempt {
			status, title = http.StatusBadRequest, "Invalid scope"
		}
		WriteJSONError(w, status, title, err.Error())
		return Caller{}, false
	}
	if !c.Exec {
		WriteJSONError(w, http.StatusForbidden, "Forbidden", fmt.Sprintf("token %q may not run commands; %s", c.Name, instead))
		return Caller{}, false
	}
	return c, true
}

// Workspace opens the caller's workspace below root: its token's scope,
// then the requested scope beneath that one's own handle, so a link in
// the requested path is followed only while it stays inside the token's
// scope (a link that leads elsewhere in the root is an escape). release
// closes what was opened.
func (c Caller) Workspace(root fsops.Workspace) (fsops.Workspace, func(), error) {
	if c.Identity.Scope == "" {
		return Workspace(root, c.Requested)
	}
	base, err := root.Scope(c.Identity.Scope)
	if err != nil {
		return nil, nil, err
	}
	if c.Requested == "" {
		return base, func() { _ = base.Close() }, nil
	}
	ws, err := base.Scope(c.Requested)
	if err != nil {
		base.Close()
		return nil, nil, err
	}
	return ws, func() { _ = ws.Close(); _ = base.Close() }, nil
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

// Workspace returns the workspace a call with scope sp (as the client sent
// it) works in: root itself, or the scope below it, which release closes.
func Workspace(root fsops.Workspace, sp string) (ws fsops.Workspace, release func(), err error) {
	n, ok := NormalizeScope(sp)
	if !ok {
		return nil, nil, errcode.New(errcode.PathEscapeAttempt, "scope", n, "scope path must not contain ..")
	}
	if n == "" {
		return root, func() {}, nil
	}
	ws, err = root.Scope(n)
	if err != nil {
		return nil, nil, err
	}
	return ws, func() { _ = ws.Close() }, nil
}

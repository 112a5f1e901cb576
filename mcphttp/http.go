package mcphttp

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Header names of the agent-backend clients.
const (
	headerRootDir   = "X-Root-Dir"
	headerScopePath = "X-Scope-Path"
)

// httpError is the JSON body of every refusal: the reference's shape
// ({"error": short title, "message": what to do}), which clients log verbatim.
type httpError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func writeJSONError(w http.ResponseWriter, status int, title, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(httpError{Error: title, Message: msg})
}

func hashToken(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// serveHTTP applies the checks of PROTOCOL.md in their order, then hands the
// request to the SDK's stateless streamable handler. The order matters to
// clients: an unauthenticated request learns nothing about the root or the
// scopes, and a wrong root is reported before any scope problem.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if s.isClosed() {
		writeJSONError(w, http.StatusServiceUnavailable, "Shutting down", "the daemon is shutting down; retry against the restarted daemon")
		return
	}
	// Stateless: no SSE stream to GET and no session to DELETE. 405 (not the
	// reference's 404) is what the SDK clients read as "no standalone SSE
	// stream" without logging an error.
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeJSONError(w, http.StatusMethodNotAllowed, "Method not allowed",
			"this MCP endpoint is stateless: send JSON-RPC messages with POST")
		return
	}
	// DNS rebinding (Origin and Host): the rules every work endpoint
	// applies, in internal/httpguard.
	if ref := s.guard.Check(r); ref != nil {
		writeJSONError(w, ref.Status, ref.Title, ref.Message)
		return
	}
	// 1. Bearer token, compared in constant time on fixed-length digests so
	// neither content nor length leaks.
	if s.opts.AuthToken != "" {
		got := hashToken(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got[:], s.tokenSum[:]) != 1 {
			writeJSONError(w, http.StatusUnauthorized, "Unauthorized", "Invalid or missing authentication token")
			return
		}
	}
	// 2. X-Root-Dir must name our root exactly. Old clients send the string
	// "undefined" when they have no root configured; the reference ignores it.
	if rd := r.Header.Get(headerRootDir); rd != "" && rd != "undefined" && rd != s.opts.RootDir {
		writeJSONError(w, http.StatusForbidden, "Root directory mismatch",
			fmt.Sprintf("Server is configured for %s, not %s", s.opts.RootDir, rd))
		return
	}
	// 3. and 4. Scope headers.
	if sp := r.Header.Get(headerScopePath); sp != "" {
		if s.opts.StaticScope != "" {
			writeJSONError(w, http.StatusBadRequest, "Scope conflict",
				fmt.Sprintf("Server was started with static scope '%s', but request also specified scope '%s'. Use one or the other, not both.", s.opts.StaticScope, sp))
			return
		}
		if _, ok := normalizeScope(sp); !ok {
			writeJSONError(w, http.StatusBadRequest, "Invalid scope path",
				"Scope path must not contain path traversal sequences")
			return
		}
	}
	// Body size: refuse a declared oversize body before reading a byte; the
	// SDK enforces the same limit while reading chunked bodies.
	if s.maxBody > 0 && r.ContentLength > s.maxBody {
		writeJSONError(w, http.StatusRequestEntityTooLarge, "Request too large",
			fmt.Sprintf("request body is %d bytes; the limit is %d bytes (write large files in parts, or raise the daemon's body limit)", r.ContentLength, s.maxBody))
		return
	}

	// Reply format. The SDK insists that Accept lists both JSON and SSE; we
	// are more lenient (curl, simple clients) and pick the format from what
	// the client accepts, preferring JSON: one write, no SSE framing.
	jsonOK, sseOK, anyOK := accepts(r.Header.Values("Accept"))
	switch {
	case jsonOK || anyOK:
		if s.serveFast(w, r, false) {
			return
		}
		r.Header.Set("Accept", "application/json, text/event-stream")
		s.jsonH.ServeHTTP(w, r)
	case sseOK:
		if s.serveFast(w, r, true) {
			return
		}
		r.Header.Set("Accept", "application/json, text/event-stream")
		s.sseH.ServeHTTP(w, r)
	default:
		writeJSONError(w, http.StatusNotAcceptable, "Not acceptable",
			"Accept must include application/json or text/event-stream")
	}
}

// accepts reads Accept headers. A missing header accepts anything.
func accepts(values []string) (jsonOK, sseOK, anyOK bool) {
	if len(values) == 0 {
		return false, false, true
	}
	for _, v := range values {
		for _, raw := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				sseOK = true
			case "*/*", "":
				anyOK = true
			}
		}
	}
	return
}

// normalizeScope applies the reference's rule to X-Scope-Path: leading
// slashes are stripped, and any ".." is refused outright (not resolved), so
// "a/../b" is as invalid as "../b". "" means no scope.
func normalizeScope(sp string) (string, bool) {
	if strings.Contains(sp, "..") {
		return "", false
	}
	return strings.TrimLeft(sp, "/"), true
}

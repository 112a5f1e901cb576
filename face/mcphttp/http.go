package mcphttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/internal/admit"
)

const (
	// headerCaller carries, from serveSDK to the SDK's tool handlers, the
	// key under which the request's admitted caller waits (Server.callers):
	// the SDK hands a handler the request's headers only. Never a client's
	// value: serveSDK replaces it, and the stream branch drops it.
	headerCaller = "X-Agentbe-Caller"
)

func writeJSONError(w http.ResponseWriter, status int, title, msg string) {
	admit.WriteJSONError(w, status, title, msg)
}

// serveHTTP applies the checks of docs/protocol.md in their order, then hands the
// request to the SDK's stateless streamable handler. The order matters to
// clients: an unauthenticated request learns nothing about the root or the
// scopes, and a wrong root is reported before any scope problem.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	// Origin and Host first, then this endpoint's own answers, then the
	// token, X-Root-Dir, X-Scope-Path and the declared body size: the
	// steps every HTTP face applies, each once, in internal/admit.
	admission, ref := s.admit.Begin(r)
	if ref != nil {
		ref.Write(w)
		return
	}
	if s.isClosed() {
		writeJSONError(w, http.StatusServiceUnavailable, "Shutting down", "the daemon is shutting down; retry against the restarted daemon")
		return
	}
	// Stateless: no SSE stream to GET and no session to DELETE. 405 (not the
	// reference's 404) is what the SDK clients read as "no standalone SSE
	// stream" without logging an error.
	stream := s.sessH != nil && (r.Method == http.MethodGet || r.Method == http.MethodDelete)
	if r.Method != http.MethodPost && !stream {
		w.Header().Set("Allow", "POST")
		writeJSONError(w, http.StatusMethodNotAllowed, "Method not allowed",
			"this MCP endpoint is stateless: send JSON-RPC messages with POST")
		return
	}
	caller, ref := admission.Admit()
	if ref != nil {
		ref.Write(w)
		return
	}

	if s.sessH != nil {
		// The session's owner (sessionUser): with a token, only requests
		// that bring the token that opened a session reach it.
		r = r.WithContext(context.WithValue(r.Context(), sessionUserKey{}, sessionUser(caller)))
		// A session closed by a reload (holdSession) is closed from the
		// moment the reload is in force, even while the SDK is still
		// closing it.
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			s.sessMu.Lock()
			held := s.sessHeld[id]
			s.sessMu.Unlock()
			if held != nil {
				if rv := admit.RevokedBy(held); rv != nil {
					writeJSONError(w, http.StatusNotFound, "Session closed", rv.Error()+", which closed this session; open a new one")
					return
				}
			}
		}
	}
	if stream {
		// A session's SSE stream (GET) or its end (DELETE): the SDK's. It
		// carries no tool call, so no caller.
		r.Header.Del(headerCaller)
		s.sessH.ServeHTTP(w, r)
		return
	}
	// In-flight requests per client address.
	if s.inflight != nil {
		held, ok := s.inflight.Acquire(r.Context(), r.RemoteAddr)
		if !ok {
			s.warns.Warn(s.log, "inflight", "too many requests in flight; answered 429", "remote", r.RemoteAddr, "limit", s.inflight.Limit())
			s.inflight.Busy().Write(w)
			return
		}
		defer s.inflight.Release(held)
	}
	// The body, read once (within the limit) for the batch check and the
	// fast path; the SDK reads it again from memory.
	var body []byte
	var err error
	if s.maxBody > 0 {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	} else {
		body, err = io.ReadAll(r.Body)
	}
	r.Body.Close()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSONError(w, http.StatusRequestEntityTooLarge, "Request too large",
				fmt.Sprintf("request body exceeds %d bytes (write large files in parts, or raise the daemon's body limit)", mbe.Limit))
		} else {
			writeJSONError(w, http.StatusBadRequest, "Unreadable body", "failed to read the request body: "+err.Error())
		}
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	// Batches: refused whole beyond MaxBatch, before any message runs.
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		if n, ok := batchLen(t, s.maxBatch); ok && n > s.maxBatch {
			s.warns.Warn(s.log, "batch", "batch too large; answered 400", "remote", r.RemoteAddr, "limit", s.maxBatch)
			writeRPCError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("the batch has more than %d messages, the daemon's limit (--max-batch); send at most %d per request", s.maxBatch, s.maxBatch))
			return
		}
	}

	if s.sessH != nil {
		if r.Header.Get("Mcp-Session-Id") != "" {
			s.serveSDK(s.sessH, uninitResponseWriter{w}, r, caller)
			return
		}
		// A request that may open a session (initialize): within the
		// daemon's limit and its token's share of it.
		s.sessMu.Lock()
		total, held := s.sessionCount(caller.Name)
		if total >= s.maxSess {
			s.sessMu.Unlock()
			s.warns.Warn(s.log, "sessions", "too many MCP sessions; answered 503", "remote", r.RemoteAddr, "limit", s.maxSess)
			writeJSONError(w, http.StatusServiceUnavailable, "Too many sessions",
				fmt.Sprintf("the daemon has %d open MCP sessions, its limit (--mcp-max-sessions); end one (DELETE /mcp) or retry after idle sessions expire", s.maxSess))
			return
		}
		if held >= s.sessShare {
			s.sessMu.Unlock()
			s.warns.Warn(s.log, "session-share", "a token holds its share of the MCP sessions; answered 503", "remote", r.RemoteAddr, "token", caller.Name, "share", s.sessShare)
			writeJSONError(w, http.StatusServiceUnavailable, "Too many sessions",
				admit.ShareRefusal(caller.Name, held, s.maxSess, "MCP sessions", "--mcp-max-sessions")+" (DELETE /mcp), or retry after idle sessions expire")
			return
		}
		// An initialize being answered counts in its token's share; the
		// other requests without a session id (the go-sdk client's
		// server/discover) open none.
		opens := false
		classify(body, false, func(m message) { opens = opens || m.Method == "initialize" })
		if opens {
			s.sessOpening[caller.Name]++
		}
		s.sessMu.Unlock()
		s.serveSDK(s.sessH, uninitResponseWriter{w}, r, caller)
		s.sessMu.Lock()
		if opens {
			if s.sessOpening[caller.Name]--; s.sessOpening[caller.Name] == 0 {
				delete(s.sessOpening, caller.Name)
			}
		}
		id := w.Header().Get("Mcp-Session-Id")
		if id != "" {
			s.sessOwner[id] = caller.Name
		}
		s.sessMu.Unlock()
		if id != "" && opens {
			s.holdSession(id, caller)
		}
		return
	}
	// Reply format. The SDK insists that Accept lists both JSON and SSE; we
	// are more lenient (curl, simple clients) and pick the format from what
	// the client accepts, preferring JSON: one write, no SSE framing. A
	// request asking for progress notifications gets SSE when the client
	// takes it: only a stream can carry them before the result.
	jsonOK, sseOK, anyOK := accepts(r.Header.Values("Accept"))
	switch {
	case sseOK && bytes.Contains(body, []byte(`"progressToken"`)) && bytes.Contains(body, []byte(`"tools/call"`)):
		s.serveSDK(s.sseH, w, r, caller)
	case jsonOK || anyOK:
		if s.serveFast(w, r, body, false, caller) {
			return
		}
		s.serveSDK(s.jsonH, w, r, caller)
	case sseOK:
		if s.serveFast(w, r, body, true, caller) {
			return
		}
		s.serveSDK(s.sseH, w, r, caller)
	default:
		writeJSONError(w, http.StatusNotAcceptable, "Not acceptable",
			"Accept must include application/json or text/event-stream")
	}
}

// sessionCount is the number of initialized sessions of the SDK's server,
// and how many of them, with those being opened, are token's (the share
// CallerShare bounds). Sessions that never saw an initialize are left out:
// the SDK also opens one for the length of a request that carries no
// session id (the go-sdk client's listen stream is one), which the
// in-flight cap bounds, and counting those refused a client below the cap
// now and then. Owners of sessions that have ended are forgotten here.
// s.sessMu is held.
func (s *Server) sessionCount(token string) (total, held int) {
	held = s.sessOpening[token]
	live := make(map[string]bool, len(s.sessOwner))
	for ss := range s.mcp.Sessions() {
		if ss.InitializeParams() == nil {
			continue
		}
		total++
		live[ss.ID()] = true
		if owner, ok := s.sessOwner[ss.ID()]; ok && owner == token {
			held++
		}
	}
	for id := range s.sessOwner {
		if !live[id] {
			delete(s.sessOwner, id)
		}
	}
	return total, held
}

// sdkRequest is what serveSDK keeps for one HTTP request handed to the
// SDK: the caller admission named, and what is left of the reply limit
// for its results (limitReplies).
type sdkRequest struct {
	caller admit.Caller
	budget *replyBudget
}

// serveSDK hands r, whose caller admission has named, to one of the SDK's
// handlers, with a reply budget of its own for limitReplies.
func (s *Server) serveSDK(h http.Handler, w http.ResponseWriter, r *http.Request, caller admit.Caller) {
	r.Header.Set("Accept", "application/json, text/event-stream")
	// The SDK hands a handler the request's headers, not its context (a
	// session's calls run in the context of the request that opened it,
	// its values included): the caller and the budget wait under a key
	// the request carries as a header set here, replacing any value the
	// client sent, until the request is answered.
	s.callersMu.Lock()
	s.callerSeq++
	key := s.callerSeq
	s.callers[key] = sdkRequest{caller: caller, budget: newReplyBudget(s.maxReply)}
	s.callersMu.Unlock()
	defer func() {
		s.callersMu.Lock()
		delete(s.callers, key)
		s.callersMu.Unlock()
	}()
	r.Header.Set(headerCaller, strconv.FormatUint(key, 36))
	h.ServeHTTP(w, r)
}

// sdkRequestOf is what serveSDK keeps for the request whose headers are
// hdr; ok is false when hdr names none (not a request of serveSDK, or one
// already answered).
func (s *Server) sdkRequestOf(hdr http.Header) (sdkRequest, bool) {
	key, err := strconv.ParseUint(hdr.Get(headerCaller), 36, 64)
	if err != nil {
		return sdkRequest{}, false
	}
	s.callersMu.Lock()
	defer s.callersMu.Unlock()
	r, ok := s.callers[key]
	return r, ok
}

// callerOf is the caller of a request that serveSDK handed to the SDK,
// from its headers; stdio's requests carry none and are Local's.
func (s *Server) callerOf(hdr http.Header) (admit.Caller, bool) {
	if hdr == nil {
		return admit.Local, true
	}
	r, ok := s.sdkRequestOf(hdr)
	return r.caller, ok
}

// sessionUserKey carries a request's sessionUser to bindSessions.
type sessionUserKey struct{}

// sessionUser names who may use the sessions a request opens and reach:
// the token it was admitted with (a file token by its name, which a reload
// keeps; the daemon's token; the operator's). Never "": the SDK binds a
// session only to a name that is not empty.
func sessionUser(c admit.Caller) string {
	switch {
	case c.Operator:
		return "operator"
	case c.Name != "":
		return "token " + c.Name
	default:
		return "daemon token"
	}
}

// holdSession holds the session id that caller opened (admit.Rules.Hold):
// each request to it is admitted anew, with the token set in force, but
// the session itself, and its GET stream, stay open; a reload that
// removes the token or changes its scope, readOnly or exec closes it, as
// it closes a /gateway or /ssh connection, and the client opens a new
// one (with the token's new rights, if it still has one).
func (s *Server) holdSession(id string, caller admit.Caller) {
	var ss *mcp.ServerSession
	for x := range s.mcp.Sessions() {
		if x.ID() == id {
			ss = x
			break
		}
	}
	if ss == nil {
		return
	}
	held, unhold := s.admit.Hold(context.Background(), caller)
	s.sessMu.Lock()
	s.sessHeld[id] = held
	s.sessMu.Unlock()
	closed := make(chan struct{})
	stop := context.AfterFunc(held, func() {
		defer close(closed)
		if rv := admit.RevokedBy(held); rv != nil {
			s.log.Info("MCP session closed: its token was revoked or changed", "token", caller.Name, "why", rv.Error())
			_ = ss.Close()
		}
	})
	go func() {
		_ = ss.Wait()
		// Wait returns once the connection is closed, before Close has
		// taken the session out of the SDK's table: until then a request
		// to it would reach the closed session (200, no answer) rather
		// than be told it was closed, so the mark stays until Close
		// returns.
		if !stop() {
			<-closed
		}
		s.sessMu.Lock()
		delete(s.sessHeld, id)
		s.sessMu.Unlock()
		unhold()
	}()
}

// bindSessions binds each session of sessH to the token that opened it,
// with the SDK's own rule against session hijacking: a request for a
// session that brings another token is answered 403 "session user
// mismatch", whatever its method, and the session goes on. The SDK reads
// the owner from auth.TokenInfo.UserID, which only its bearer-token
// middleware puts in a request's context; the token was checked by
// admission already, so the verifier only names the caller's sessionUser.
// Without a token every client is the same user, and nothing is bound.
func bindSessions(sessH http.Handler) http.Handler {
	verify := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		user, _ := r.Context().Value(sessionUserKey{}).(string)
		if user == "" {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: user}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(sessH)
}

// accepts reads Accept headers. A missing or empty header accepts
// anything; an empty element of the list (a trailing comma) is ignored, as
// RFC 9110 (5.6.1) has it, rather than taken as "anything".
func accepts(values []string) (jsonOK, sseOK, anyOK bool) {
	ranges := 0
	for _, v := range values {
		for _, raw := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "":
				continue
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				sseOK = true
			case "*/*":
				anyOK = true
			}
			ranges++
		}
	}
	return jsonOK, sseOK, anyOK || ranges == 0
}

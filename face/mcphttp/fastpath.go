package mcphttp

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"sync"

	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/mcpjson"
)

// The fast path answers a single tools/call directly (as JSON, or as one SSE
// event for clients that accept only SSE), without the SDK's per-request
// session. It exists for cost, not features:
// in stateless mode the SDK (v1.8) builds a session per request and decodes
// the message several times with a decoder that allocates a 32 KiB buffer
// per decode, so a small call allocates many times what this path does
// (BenchmarkReadTextFile, sdk-path against json; figures in
// docs/performance.md, "Figures behind comments in the code"). Here it is
// one decode of the envelope, one of the arguments, and one encode.
//
// It also answers tools/list (the SDK's own result, captured once) and the
// notifications/initialized every client sends after initialize, so that a
// client connecting costs one SDK request (initialize) instead of three.
//
// Everything else goes to the SDK: initialize, other notifications, paged
// tools/list, batches, unknown tools (the SDK words that error), and
// protocol versions after 2025-11-25, whose semantics the SDK implements.
// Both paths call the registry through callTool, and
// TestFastPathMatchesSDK checks that they answer byte for byte the same.

// fastProtocols are the versions whose tools/call the fast path answers;
// "" is a client that sends no MCP-Protocol-Version header (the SDK assumes
// 2025-03-26 then).
var fastProtocols = map[string]bool{"": true, "2024-11-05": true, "2025-03-26": true, "2025-06-18": true, "2025-11-25": true}

// rpcRequest is the part of a JSON-RPC tools/call the fast path reads.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Cursor    *string         `json:"cursor"`
		// Meta is the request's _meta: a progress token there asks for
		// notifications, which only the SDK's path sends.
		Meta json.RawMessage `json:"_meta"`
	} `json:"params"`
}

// respBufs recycles response buffers; one that grew past 1 MiB (a big
// read) is dropped rather than kept alive.
var respBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// serveFast answers r, whose body serveHTTP has read and whose caller
// admission has named, if it is a fast-path call and reports whether it
// did; sse frames the reply as one SSE event, as the SDK does for clients
// that accept only text/event-stream.
func (s *Server) serveFast(w http.ResponseWriter, r *http.Request, body []byte, sse bool, caller admit.Caller) bool {
	if s.noFastPath || !fastProtocols[r.Header.Get("MCP-Protocol-Version")] {
		return false
	}
	// A body that does not declare JSON is the SDK's to refuse (415).
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}

	// Cheap filters before decoding: a single object naming a method we
	// answer here.
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return false
	}
	isCall := bytes.Contains(body, []byte(`"tools/call"`))
	if !isCall && !bytes.Contains(body, []byte(`"tools/list"`)) && !bytes.Contains(body, []byte(`"notifications/initialized"`)) {
		return false
	}
	var req rpcRequest
	if err := json.Unmarshal(body, &req); err != nil || req.JSONRPC != "2.0" || !sdkDecodesAlike(trimmed) {
		return false
	}
	if req.Method == "notifications/initialized" && len(req.ID) == 0 {
		// Nothing to record in a stateless server: accept, as the SDK does.
		s.fastCalls.Add(1)
		w.WriteHeader(http.StatusAccepted)
		return true
	}
	if len(req.ID) == 0 || (req.ID[0] != '"' && (req.ID[0] < '0' || req.ID[0] > '9') && req.ID[0] != '-') {
		return false // a notification, or an id the SDK should judge
	}
	if req.Method == "tools/list" && req.Params.Cursor == nil {
		list := s.toolsListResult()
		if list == nil {
			return false
		}
		s.fastCalls.Add(1)
		s.writeFast(w, sse, req.ID, func(buf []byte) ([]byte, error) {
			buf = append(buf, `{"jsonrpc":"2.0","id":`...)
			buf = append(buf, req.ID...)
			buf = append(buf, `,"result":`...)
			buf = append(buf, list...)
			return append(buf, '}'), nil
		})
		return true
	}
	if req.Method != "tools/call" || len(req.Params.Meta) > 0 {
		return false
	}
	if _, err := s.reg.Resolve(req.Params.Name); err != nil {
		return false // the SDK's to answer (auditUnknownTools)
	}
	s.fastCalls.Add(1)
	res := s.callTool(r.Context(), req.Params.Name, req.Params.Arguments, "mcp-http", caller, nil, nil)
	s.writeFast(w, sse, req.ID, func(buf []byte) ([]byte, error) { return appendResponse(buf, req.ID, res) })
	return true
}

// writeFast writes one JSON-RPC response built by build, as JSON or as one
// SSE event, with the SDK's headers. A response larger than the reply limit
// is replaced by a JSON-RPC error for id.
func (s *Server) writeFast(w http.ResponseWriter, sse bool, id json.RawMessage, build func([]byte) ([]byte, error)) {
	bp := respBufs.Get().(*[]byte)
	out := (*bp)[:0]
	if sse {
		out = append(out, "event: message\ndata: "...)
	}
	start := len(out)
	out, err := build(out)
	if err != nil {
		http.Error(w, "encoding result: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if n := int64(len(out) - start); n > s.maxReply {
		b := newReplyBudget(s.maxReply)
		out = append(out[:start], `{"jsonrpc":"2.0","id":`...)
		out = append(out, id...)
		out = append(out, `,"error":{"code":`+strconv.Itoa(codeReplyTooLarge)+`,"message":`...)
		out = mcpjson.AppendString(out, b.tooLarge(n))
		out = append(out, "}}"...)
	}
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	if sse {
		out = append(out, "\n\n"...)
		w.Header().Set("Connection", "keep-alive")
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(http.StatusOK)
	w.Write(out)
	if cap(out) <= 1<<20 {
		*bp = out[:0]
		respBufs.Put(bp)
	}
}

// toolsListResult is the SDK's own tools/list result, captured by sending it
// a tools/list (so the fast path's answer cannot drift from the SDK's) and
// kept until the registry's tools change (syncTools), or nil if that failed.
func (s *Server) toolsListResult() json.RawMessage {
	s.listMu.Lock()
	if s.listResult != nil {
		defer s.listMu.Unlock()
		return s.listResult
	}
	gen := s.listGen
	s.listMu.Unlock()

	req, err := http.NewRequest(http.MethodPost, "/mcp", bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":0,"method":"tools/list"}`)))
	if err != nil {
		return nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	rec := &recorder{header: http.Header{}}
	s.jsonH.ServeHTTP(rec, req)
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	if rec.status != http.StatusOK || json.Unmarshal(rec.body.Bytes(), &env) != nil || len(env.Result) == 0 {
		return nil
	}
	s.listMu.Lock()
	defer s.listMu.Unlock()
	if s.listGen == gen { // a change since would make this list stale
		s.listResult = env.Result
	}
	return env.Result
}

// recorder is a minimal http.ResponseWriter that keeps what is written.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

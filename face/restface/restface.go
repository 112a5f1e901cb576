// Package restface serves the registry's tools as plain REST: GET /tools
// lists them and POST /execute runs one. A request is admitted by the rules
// /mcp applies (internal/admit: Origin and Host, bearer token, X-Root-Dir,
// X-Scope-Path, body limit), and a call is the admitted caller's
// (admit.Caller.Call) through registry.Call, so the limits and results are
// those of every face.
//
// Status codes: an unknown tool is 404; a bare name (an upstream tool's
// name on its server, registry.Tool.Bare) that several tools claim is 409
// listing their names; a failed result whose errcode
// (registry.Code) is INVALID_ARGUMENT or PATH_ESCAPE_ATTEMPT is 400; a busy
// registry is 429 with Retry-After, and so is an /execute past the client
// address's requests in flight (Options.Inflight, counted with /mcp's);
// every other result, a timeout
// included, is 200 with status "success" or "error" and execution_time_ms.
package restface

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/jsonscan"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// Options configures a Handler.
type Options struct {
	Registry  *registry.Registry
	Workspace fsops.Workspace // the daemon's workspace (scopes are below it)
	Admit     admit.Rules     // the same rules as /mcp; Admit.MaxBody bounds the body
	// MaxReply bounds one /execute answer, as --max-reply-bytes bounds an
	// /mcp reply (0: no bound): an answer that would pass it is replaced
	// by a failed call naming the limit (admit.ReplyTooLarge).
	MaxReply int64
	// Inflight bounds the /execute requests of one client address (nil: no
	// bound); the daemon's is the one /mcp counts with too.
	Inflight *admit.Inflight
}

// Handler serves /tools and /execute.
type Handler struct{ opts Options }

// New returns the handler.
func New(opts Options) *Handler { return &Handler{opts: opts} }

// Register mounts GET /tools and POST /execute on mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle("/tools", h.ToolsHandler())
	mux.Handle("/execute", h.ExecuteHandler())
}

// ToolsHandler serves GET /tools.
func (h *Handler) ToolsHandler() http.Handler { return http.HandlerFunc(h.ServeTools) }

// ExecuteHandler serves POST /execute.
func (h *Handler) ExecuteHandler() http.Handler { return http.HandlerFunc(h.ServeExecute) }

// ToolInfo is one entry of GET /tools.
type ToolInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	InputSchema any    `json:"input_schema"`
}

// ExecuteRequest is the body of POST /execute. Timeout is in seconds; it
// lowers the tool's deadline, never raises it.
type ExecuteRequest struct {
	ToolName  string          `json:"tool_name"`
	Arguments json.RawMessage `json:"arguments"`
	Timeout   *float64        `json:"timeout,omitempty"`
}

// ExecuteResponse is the answer of POST /execute. Output is the text of the
// result's text blocks, joined by newlines.
type ExecuteResponse struct {
	Status          string  `json:"status"`
	Output          string  `json:"output"`
	Error           string  `json:"error,omitempty"`
	ExecutionTimeMs float64 `json:"execution_time_ms"`
}

// AmbiguousResponse is the 409 of POST /execute for a bare tool name
// (read_file) that several upstream servers serve: the admission errors'
// {error, message}, and the qualified names that do (fs__read_file, …).
type AmbiguousResponse struct {
	Error   string   `json:"error"`
	Message string   `json:"message"`
	Tools   []string `json:"tools"`
}

// RetryAfter is the Retry-After of a 429: the registry refuses a call after
// waiting its QueueWait for a slot, so a second later is a fair retry.
const RetryAfter = "1"

// ServeTools answers GET /tools.
func (h *Handler) ServeTools(w http.ResponseWriter, r *http.Request) {
	admission, ref := h.opts.Admit.Begin(r)
	if ref != nil {
		ref.Write(w)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		admit.WriteJSONError(w, http.StatusMethodNotAllowed, "Method not allowed", "use GET /tools")
		return
	}
	if _, ref := admission.Admit(); ref != nil {
		ref.Write(w)
		return
	}
	list := h.opts.Registry.List()
	out := struct {
		Tools []ToolInfo `json:"tools"`
	}{make([]ToolInfo, 0, len(list))}
	for _, t := range list {
		out.Tools = append(out.Tools, ToolInfo{t.Name, t.Description, t.InputSchema})
	}
	writeJSON(w, http.StatusOK, out)
}

// ServeExecute answers POST /execute.
func (h *Handler) ServeExecute(w http.ResponseWriter, r *http.Request) {
	admission, ref := h.opts.Admit.Begin(r)
	if ref != nil {
		ref.Write(w)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		admit.WriteJSONError(w, http.StatusMethodNotAllowed, "Method not allowed", "use POST /execute")
		return
	}
	caller, ref := admission.Admit()
	if ref != nil {
		ref.Write(w)
		return
	}
	if f := h.opts.Inflight; f != nil {
		held, ok := f.Acquire(r.Context(), r.RemoteAddr)
		if !ok {
			f.Busy().Write(w)
			return
		}
		defer f.Release(held)
	}
	var body io.Reader = r.Body
	if h.opts.Admit.MaxBody > 0 {
		body = http.MaxBytesReader(w, r.Body, h.opts.Admit.MaxBody)
	}
	raw, err := io.ReadAll(body)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		admit.WriteJSONError(w, http.StatusRequestEntityTooLarge, "Request too large",
			fmt.Sprintf("request body exceeds %d bytes (raise the daemon's body limit)", mbe.Limit))
		return
	}
	var req ExecuteRequest
	if err == nil {
		err = decodeRequest(raw, &req)
	}
	if err != nil {
		admit.WriteJSONError(w, http.StatusBadRequest, "Invalid request", "the body must be {\"tool_name\":...,\"arguments\":{...},\"timeout\":seconds}: "+err.Error())
		return
	}
	if req.ToolName == "" {
		admit.WriteJSONError(w, http.StatusBadRequest, "Invalid request", "tool_name is missing")
		return
	}
	ctx := r.Context()
	if req.Timeout != nil {
		if *req.Timeout <= 0 || math.IsNaN(*req.Timeout) || *req.Timeout > 1e6 {
			admit.WriteJSONError(w, http.StatusBadRequest, "Invalid request",
				fmt.Sprintf("timeout must be a positive number of seconds up to 1000000, not %v", *req.Timeout))
			return
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, time.Duration(*req.Timeout*float64(time.Second)),
			fmt.Errorf("the request's timeout of %gs passed", *req.Timeout))
		defer cancel()
	}
	ws, release, err := caller.Workspace(h.opts.Workspace)
	if err != nil {
		admit.WriteJSONError(w, http.StatusBadRequest, "Invalid scope", err.Error())
		return
	}
	defer release()
	start := time.Now()
	res, err := h.opts.Registry.Call(ctx, req.ToolName, caller.Call("rest", ws, req.Arguments))
	ms := float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		writeCallError(w, err)
		return
	}
	status, resp := Response(res, ms)
	b, err := json.Marshal(resp)
	if err == nil && h.opts.MaxReply > 0 && int64(len(b)) > h.opts.MaxReply {
		msg := admit.ReplyTooLarge(int64(len(b)), h.opts.MaxReply, h.opts.MaxReply)
		status = http.StatusOK
		b, err = json.Marshal(ExecuteResponse{Status: "error", Output: msg, Error: msg, ExecutionTimeMs: ms})
	}
	if err != nil {
		admit.WriteJSONError(w, http.StatusInternalServerError, "Call failed", err.Error())
		return
	}
	writeBody(w, status, b)
}

// decodeRequest decodes one body as MCP's tools/call reads its params:
// one JSON value and nothing after it, and keys matched exactly. Go's
// json.Unmarshal takes "Tool_Name" for tool_name where the MCP SDK takes no
// key but the exact one (face/mcphttp/sdkdecode.go), so a key that differs
// from a field's name only in case is refused rather than read as another
// face would not read it (TestAttackRESTBodies). A key repeated exactly is
// the last one's, on every face.
func decodeRequest(raw []byte, req *ExecuteRequest) error {
	if err := json.Unmarshal(raw, req); err != nil {
		return err
	}
	var err error
	jsonscan.Keys(raw, func(k string, _ []byte) bool {
		for _, f := range [...]string{"tool_name", "arguments", "timeout"} {
			if k != f && strings.EqualFold(k, f) {
				err = fmt.Errorf("key %q is not %q (keys are matched exactly)", k, f)
				return false
			}
		}
		return true
	})
	return err
}

// writeCallError answers a call the registry did not run (a function of
// its own, so that a call that ran allocates none of its targets).
func writeCallError(w http.ResponseWriter, err error) {
	var unknown *registry.UnknownToolError
	var ambiguous *registry.AmbiguousToolError
	switch {
	case errors.As(err, &unknown):
		admit.WriteJSONError(w, http.StatusNotFound, "Unknown tool", unknown.Error()+"; GET /tools lists the tools")
	case errors.As(err, &ambiguous):
		writeJSON(w, http.StatusConflict, AmbiguousResponse{Error: "Ambiguous tool", Message: ambiguous.Error(), Tools: ambiguous.Tools})
	case errors.Is(err, registry.ErrBusy):
		w.Header().Set("Retry-After", RetryAfter)
		admit.WriteJSONError(w, http.StatusTooManyRequests, "Too many requests", err.Error())
	default:
		admit.WriteJSONError(w, http.StatusInternalServerError, "Call failed", err.Error())
	}
}

// Response turns a result into the REST answer and its status.
func Response(res *mcp.CallToolResult, ms float64) (int, ExecuteResponse) {
	text := Text(res)
	if !res.IsError {
		return http.StatusOK, ExecuteResponse{Status: "success", Output: text, ExecutionTimeMs: ms}
	}
	status := http.StatusOK
	switch registry.Code(res) {
	case errcode.InvalidArgument, errcode.PathEscapeAttempt:
		status = http.StatusBadRequest
	}
	return status, ExecuteResponse{Status: "error", Output: text, Error: text, ExecutionTimeMs: ms}
}

// Text joins a result's text blocks with newlines.
func Text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		admit.WriteJSONError(w, http.StatusInternalServerError, "Call failed", err.Error())
		return
	}
	writeBody(w, status, b)
}

// writeBody writes b, a marshalled answer, and a newline after it (as
// json.Encoder ends a value).
func writeBody(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

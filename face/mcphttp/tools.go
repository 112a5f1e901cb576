package mcphttp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/tooltext"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// syncTools makes the SDK's tool set the registry's: it adds (or replaces)
// every tool the registry lists and removes the ones it no longer lists. The
// SDK then sends notifications/tools/list_changed to its sessions. It runs
// once in New and again whenever the registry changes (Subscribe), and it
// invalidates the fast path's cached tools/list result.
func (s *Server) syncTools() {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	list := s.reg.List()
	now := make(map[string]bool, len(list))
	for _, t := range list {
		now[t.Name] = true
		name := t.Name
		s.mcp.AddTool(&mcp.Tool{Name: name, Title: t.Title, Description: t.Description,
			Annotations: t.Annotations, InputSchema: t.InputSchema},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var hdr http.Header
				if req.Extra != nil {
					hdr = req.Extra.Header
				}
				return s.callTool(ctx, name, req.Params.Arguments, hdr, hdr.Get(headerRemoteAddr), askerFor(req.Session), progressFor(req)), nil
			})
	}
	var gone []string
	for name := range s.served {
		if !now[name] {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		s.mcp.RemoveTools(gone...)
	}
	s.served = now
	s.listMu.Lock()
	s.listGen++
	s.listResult = nil
	s.listMu.Unlock()
}

// auditUnknownTools is the SDK's receiving middleware that records a
// tools/call of a name the registry does not serve: the SDK answers it
// ("unknown tool") without calling a handler, so without this it would
// leave no audit line or metric, where /execute and /gateway leave both.
func (s *Server) auditUnknownTools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ctr, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && ctr.Params != nil {
			if _, known := s.reg.Lookup(ctr.Params.Name); !known {
				var hdr http.Header
				if ctr.Extra != nil {
					hdr = ctr.Extra.Header
				}
				call := registry.Call{Face: "mcp-stdio", Args: ctr.Params.Arguments}
				if hdr != nil {
					call.Face, call.Remote = "mcp-http", hdr.Get(headerRemoteAddr)
					// Admission accepted the request's credential; a
					// scope it cannot give is the caller's own problem,
					// recorded as asked.
					if caller, err := s.admit.Caller(hdr, nil); err == nil {
						call.Caller, call.Scope = caller.Identity.Name, caller.Scope
					} else {
						call.Scope = hdr.Get(headerScopePath)
					}
				}
				s.reg.Unknown(ctr.Params.Name, call)
			}
		}
		return next(ctx, method, req)
	}
}

// callTool runs the registry's tool name in the workspace the request is
// scoped to. Both the SDK and the fast path call tools through it, so they
// answer byte for byte the same.
func (s *Server) callTool(ctx context.Context, name string, raw json.RawMessage, hdr http.Header, remote string,
	ask func(context.Context, string, map[string]any) (string, map[string]any, error),
	progress func(context.Context, float64, string)) *mcp.CallToolResult {
	// Who calls: from the request's own credential, which admission has
	// already accepted (stdio has none: the local user, everything).
	caller := admit.Full
	if hdr != nil {
		var err error
		if caller, err = s.admit.Caller(hdr, nil); err != nil {
			return toolError(tooltext.ErrorText("Invalid scope", hdr.Get(headerScopePath), err))
		}
	}
	id, scope := caller.Identity, caller.Scope
	ws, release, err := caller.Workspace(s.opts.Workspace)
	if err != nil {
		return toolError(tooltext.ErrorText("Invalid scope", hdr.Get(headerScopePath), err))
	}
	defer release()
	face := "mcp-http"
	if hdr == nil {
		face = "mcp-stdio" // stdio calls carry no HTTP header
	}
	res, err := s.reg.Call(ctx, name, registry.Call{Args: raw, Workspace: ws, Face: face, Remote: remote, Scope: scope, Ask: ask, Progress: progress,
		Caller: id.Name, ReadOnly: id.ReadOnly, NoExec: !id.Exec, Bound: id.Scope != ""})
	res = registry.WithoutCode(res)
	switch {
	case errors.Is(err, registry.ErrBusy):
		res = toolError("Server busy, retry: " + err.Error() + " (the daemon's cap on concurrent tool calls)")
	case err != nil:
		res = toolError(err.Error())
	}
	if res.IsError && s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("mcp tool failed", "tool", name, "error", res.Content[0].(*mcp.TextContent).Text)
	}
	return res
}

// toolError is an isError result with one text block.
func toolError(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// progressFor is registry.Call's Progress for a request that carries a
// progress token, nil otherwise. The notifications go where the SDK sends
// what belongs to the request: over stdio, and over HTTP into the
// request's own SSE response (a client that accepts only JSON gets none).
func progressFor(req *mcp.CallToolRequest) func(context.Context, float64, string) {
	if req == nil || req.Params == nil || req.Session == nil {
		return nil
	}
	tok := req.Params.GetProgressToken()
	if tok == nil {
		return nil
	}
	ss := req.Session
	return func(ctx context.Context, progress float64, message string) {
		_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: progress, Message: message})
	}
}

// askerFor is registry.Call's Ask for a session whose client declared the
// elicitation capability (stdio, or HTTP with --mcp-sessions; a stateless
// request has no way back to its client), nil otherwise.
func askerFor(ss *mcp.ServerSession) func(context.Context, string, map[string]any) (string, map[string]any, error) {
	if ss == nil {
		return nil
	}
	if ip := ss.InitializeParams(); ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return nil
	}
	return func(ctx context.Context, message string, schema map[string]any) (string, map[string]any, error) {
		res, err := ss.Elicit(ctx, &mcp.ElicitParams{Message: message, RequestedSchema: schema})
		if err != nil {
			return "", nil, err
		}
		return res.Action, res.Content, nil
	}
}

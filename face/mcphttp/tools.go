package mcphttp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
				face, caller, ok := s.sdkCaller(req.Extra)
				if !ok {
					return toolError("Unauthorized: this call's request was not admitted"), nil
				}
				if face == "mcp-stdio" && req.Session != nil {
					var done func()
					ctx, done = s.stdioCallContext(ctx, req.Session)
					defer done()
				}
				return s.callTool(ctx, name, req.Params.Arguments, face, caller, askerFor(req.Session), progressFor(req)), nil
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
// It also resolves a bare name (registry.Tool.Bare: read_file for
// fs__read_file) to the tool the SDK serves, and answers one that several
// tools claim as the SDK answers an unknown tool (invalid params, -32602),
// naming them in the message and in data.tools.
func (s *Server) auditUnknownTools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ctr, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && ctr.Params != nil {
			if _, known := s.reg.Lookup(ctr.Params.Name); !known {
				t, err := s.reg.Resolve(ctr.Params.Name)
				var ambiguous *registry.AmbiguousToolError
				switch {
				case err == nil:
					ctr.Params.Name = t.Name
				case errors.As(err, &ambiguous):
					face, caller, _ := s.sdkCaller(ctr.Extra)
					s.reg.Unknown(ctr.Params.Name, caller.Call(face, nil, ctr.Params.Arguments))
					data, _ := json.Marshal(map[string]any{"tools": ambiguous.Tools})
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error(), Data: data}
				default:
					face, caller, _ := s.sdkCaller(ctr.Extra)
					s.reg.Unknown(ctr.Params.Name, caller.Call(face, nil, ctr.Params.Arguments))
				}
			}
		}
		return next(ctx, method, req)
	}
}

// sdkCaller is the face and the caller of a request the SDK hands a
// handler: over HTTP, the caller admission named for it (serveSDK);
// over stdio, which carries no HTTP header, the local user.
func (s *Server) sdkCaller(extra *mcp.RequestExtra) (face string, c admit.Caller, ok bool) {
	var hdr http.Header
	if extra != nil {
		hdr = extra.Header
	}
	if hdr == nil {
		return "mcp-stdio", admit.Local, true
	}
	c, ok = s.callerOf(hdr)
	return "mcp-http", c, ok
}

// callTool runs the registry's tool name for caller, in the workspace
// its credential and X-Scope-Path give. Both the SDK and the fast path
// call tools through it, so they answer byte for byte the same.
func (s *Server) callTool(ctx context.Context, name string, raw json.RawMessage, face string, caller admit.Caller,
	ask func(context.Context, string, map[string]any) (string, map[string]any, error),
	progress func(context.Context, float64, string)) *mcp.CallToolResult {
	ws, release, err := caller.Workspace(s.opts.Workspace)
	if err != nil {
		return toolError(tooltext.ErrorText("Invalid scope", caller.Requested, err))
	}
	defer release()
	call := caller.Call(face, ws, raw)
	call.Ask, call.Progress = ask, progress
	res, err := s.reg.Call(ctx, name, call)
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

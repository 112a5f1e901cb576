package mcphttp

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
)

// The tools. Names, argument names, descriptions and result texts are those
// of agent-backend 0.13.2 (src/server/tools.ts), because clients and prompts
// depend on them; where we add something (titles, annotations, head/tail for
// 0.9 clients, exec timeouts, grep without ripgrep) the description says so.
//
// Each tool is one value (a tool[Args]) declared next to its arguments type
// and handler, by group: tools_read.go, tools_write.go, tools_dirs.go and
// tools_exec.go. toolList says which of them a configuration offers, and
// Server.registerTools registers that list.

// tool is one MCP tool: what tools/list advertises (name, title,
// description, input schema, annotations), the type its arguments decode
// into (In), and the handler. A handler gets the workspace of the call (the
// Server's, or a scope below it) and never returns a Go error: a failure is
// an isError result whose text names the path or limit (errors.go). A tool
// that needs more than the workspace gets it when it is built (execTool), so
// no tool needs a *Server. The values and their schemas are shared by every
// Server and only read once built: def copies the annotations before it sets
// their title.
type tool[In any] struct {
	Name        string
	Title       string
	Description string
	// Annotations are the hints of readOnly, writes(...) or a literal; their
	// title is always Title (def fills it in).
	Annotations *mcp.ToolAnnotations
	// Schema is the input schema: an obj(...) of the helpers below. The SDK
	// advertises it and validateArgs checks arguments against it.
	Schema  schema
	Handler func(ctx context.Context, ws fsops.Workspace, args In) *mcp.CallToolResult
}

// toolEntry is a tool of any argument type, as toolList lists them.
type toolEntry interface {
	def() *toolDef
}

// toolDef is one registered tool: its advertised definition and the call
// that validates raw arguments, decodes them and runs the handler. Both the
// SDK (through mcp.Server.AddTool) and the HTTP fast path (fastpath.go) call
// tools through it, so they answer byte for byte the same.
type toolDef struct {
	tool *mcp.Tool
	call func(ctx context.Context, ws fsops.Workspace, raw json.RawMessage) *mcp.CallToolResult
}

// def builds t's toolDef.
func (t tool[In]) def() *toolDef {
	ann := *t.Annotations
	ann.Title = t.Title
	name, in, h := t.Name, t.Schema, t.Handler
	return &toolDef{
		tool: &mcp.Tool{Name: name, Title: t.Title, Description: t.Description, Annotations: &ann, InputSchema: in},
		call: func(ctx context.Context, ws fsops.Workspace, raw json.RawMessage) *mcp.CallToolResult {
			if msg := validateArgs(raw, in); msg != "" {
				return toolError("Input validation error: Invalid arguments for tool " + name + ": " + msg)
			}
			var args In
			if len(raw) > 0 && string(raw) != "null" {
				if err := json.Unmarshal(raw, &args); err != nil {
					return toolError("Input validation error: Invalid arguments for tool " + name + ": " + err.Error())
				}
			}
			return h(ctx, ws, args)
		},
	}
}

// toolList returns the tools offered over ws, in registration order, as
// the reference offers them: the file tools for every workspace; for one
// that can execute (a directory, not the memory workspace) also grep, and
// exec when env has an executor.
func toolList(ws fsops.Workspace, env execEnv) []toolEntry {
	list := []toolEntry{
		readTextFileTool,
		readMediaFileTool,
		readMultipleFilesTool,
		writeFileTool,
		editFileTool,
		createDirectoryTool,
		listDirectoryTool,
		listDirectoryWithSizesTool,
		directoryTreeTool,
		moveFileTool,
		searchFilesTool,
		getFileInfoTool,
		listAllowedDirectoriesTool,
	}
	if !fsops.CanExec(ws) {
		return list // memory workspace: file tools only
	}
	if env.executor != nil {
		list = append(list, execTool(env))
	}
	return append(list, grepTool)
}

// registerTools registers the tools of toolList with the SDK and in s.tools
// (the fast path's table).
func (s *Server) registerTools() {
	env := execEnv{executor: s.opts.Executor, timeout: s.opts.ExecTimeout, base: s.opts.Workspace}
	for _, t := range toolList(s.opts.Workspace, env) {
		def := t.def()
		s.tools[def.tool.Name] = def
		s.mcp.AddTool(def.tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var hdr http.Header
			if req.Extra != nil {
				hdr = req.Extra.Header
			}
			return s.callTool(ctx, def, req.Params.Arguments, hdr), nil
		})
	}
}

// callTool runs def in the workspace the request is scoped to.
func (s *Server) callTool(ctx context.Context, def *toolDef, raw json.RawMessage, hdr http.Header) *mcp.CallToolResult {
	ws, release, err := s.workspaceFor(hdr)
	if err != nil {
		return toolError(errorText("Invalid scope", hdr.Get(headerScopePath), err))
	}
	defer release()
	res := def.call(ctx, ws, raw)
	if res.IsError && s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("mcp tool failed", "tool", def.tool.Name, "error", res.Content[0].(*mcp.TextContent).Text)
	}
	return res
}

// workspaceFor returns the workspace a call works in: ours, or for an HTTP
// request with X-Scope-Path (already validated by serveHTTP) the scope below
// it, which is released after the call. Stdio calls have no header.
func (s *Server) workspaceFor(hdr http.Header) (fsops.Workspace, func(), error) {
	return admit.Workspace(s.opts.Workspace, hdr.Get(headerScopePath))
}

// Arguments shared by several tools. Optional numbers in an arguments type
// are pointers: "absent" and 0 differ.
type (
	pathArgs struct {
		Path string `json:"path"`
	}
	noArgs struct{}
)

// Schema helpers. Schemas are plain maps (JSON Schema 2020-12 as the SDK
// validates it, and the subset validate.go knows); the SDK compiles each
// once, at registration. A helper builds one node; options add the keywords
// a node needs beyond its type and description.
type schema = map[string]any

// schemaOpt adds a keyword to a schema node.
type schemaOpt func(schema)

// required lists an object's required properties.
func required(names ...string) schemaOpt { return func(s schema) { s["required"] = names } }

// minItems is an array's minimum length.
func minItems(n int) schemaOpt { return func(s schema) { s["minItems"] = n } }

// defaultValue documents the value an absent property means.
func defaultValue(v any) schemaOpt { return func(s schema) { s["default"] = v } }

func with(s schema, opts []schemaOpt) schema {
	for _, o := range opts {
		o(s)
	}
	return s
}

// obj is an object with the given properties.
func obj(props schema, opts ...schemaOpt) schema {
	return with(schema{"type": "object", "properties": props}, opts)
}
func str(desc string, opts ...schemaOpt) schema {
	return with(schema{"type": "string", "description": desc}, opts)
}
func boolean(desc string, opts ...schemaOpt) schema {
	return with(schema{"type": "boolean", "description": desc}, opts)
}
func posInt(desc string, opts ...schemaOpt) schema {
	return with(schema{"type": "integer", "exclusiveMinimum": 0, "description": desc}, opts)
}
func nonNegInt(desc string, opts ...schemaOpt) schema {
	return with(schema{"type": "integer", "minimum": 0, "description": desc}, opts)
}

// arrayOf is an array whose elements match items.
func arrayOf(desc string, items schema, opts ...schemaOpt) schema {
	return with(schema{"type": "array", "items": items, "description": desc}, opts)
}
func strArray(desc string, opts ...schemaOpt) schema {
	return arrayOf(desc, schema{"type": "string"}, opts...)
}

// strMap is an object of string values under any names.
func strMap(desc string, opts ...schemaOpt) schema {
	return with(schema{"type": "object", "description": desc, "additionalProperties": schema{"type": "string"}}, opts)
}
func enum(desc string, values ...string) schema {
	return schema{"type": "string", "enum": values, "description": desc}
}

func ptr[T any](v T) *T { return &v }

// Annotations. Every file tool is closed-world (only the workspace); def
// sets the title.
var readOnly = &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}

// writeHint is a hint of a tool that changes the workspace.
type writeHint int

const (
	destructive writeHint = iota // may overwrite or delete what is there
	idempotent                   // calling it twice does what calling it once does
)

// writes annotates a closed-world tool that changes the workspace.
func writes(hints ...writeHint) *mcp.ToolAnnotations {
	a := &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}
	for _, h := range hints {
		switch h {
		case destructive:
			a.DestructiveHint = ptr(true)
		case idempotent:
			a.IdempotentHint = true
		}
	}
	return a
}

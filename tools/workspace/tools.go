package workspace

import (
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// The tools. Names, argument names, descriptions and result texts are those
// of agent-backend 0.13.2 (src/server/tools.ts), because clients and prompts
// depend on them; where we add something (titles, annotations, head/tail for
// 0.9 clients, exec timeouts, grep without ripgrep) the description says so.
//
// Each tool is one value (a tool[Args]) declared next to its arguments type
// and handler, by group: tools_read.go, tools_write.go, tools_dirs.go and
// tools_exec.go. Tools says which of them a configuration offers, as
// registry.Tools.

// tool is one MCP tool: what tools/list advertises (name, title,
// description, input schema, annotations), the type its arguments decode
// into (In), and the handler. A handler gets the workspace of the call (the
// root, or the scope the face resolved) and never returns a Go error: a
// failure is an isError result whose text names the path or limit
// (errors.go). A tool that needs more than the workspace gets it when it is
// built (execTool). The values and their schemas are shared and only read
// once built: def copies the annotations before it sets their title.
type tool[In any] struct {
	Name        string
	Title       string
	Description string
	// Annotations are the hints of readOnly, writes(...) or a literal; their
	// title is always Title (def fills it in).
	Annotations *mcp.ToolAnnotations
	// Schema is the input schema: an obj(...) of the helpers below. Faces
	// advertise it and validateArgs checks arguments against it.
	Schema schema
	// Timeout is the registry's deadline for one call; 0 is its default.
	Timeout time.Duration
	// RunsCommands: registry.Tool.RunsCommands (exec).
	RunsCommands bool
	Handler      func(ctx context.Context, ws fsops.Workspace, args In) *mcp.CallToolResult
}

// toolEntry is a tool of any argument type, as Tools lists them.
type toolEntry interface {
	def() registry.Tool
}

// def builds t's registry.Tool, whose handler validates the raw arguments
// against the schema, decodes them into In and runs t's handler in the
// call's workspace.
func (t tool[In]) def() registry.Tool {
	ann := *t.Annotations
	ann.Title = t.Title
	name, in, h := t.Name, t.Schema, t.Handler
	return registry.Tool{
		Name: name, Title: t.Title, Description: t.Description, Annotations: &ann, InputSchema: in,
		Timeout: t.Timeout, RunsCommands: t.RunsCommands,
		Handler: func(ctx context.Context, call registry.Call) *mcp.CallToolResult {
			raw := call.Args
			if msg := validateArgs(raw, in); msg != "" {
				return registry.WithCode(toolError("Input validation error: Invalid arguments for tool "+name+": "+msg), errcode.InvalidArgument)
			}
			var args In
			if len(raw) > 0 && string(raw) != "null" {
				if err := json.Unmarshal(raw, &args); err != nil {
					return registry.WithCode(toolError("Input validation error: Invalid arguments for tool "+name+": "+err.Error()), errcode.InvalidArgument)
				}
			}
			if call.Progress != nil {
				ctx = context.WithValue(ctx, progressKey{}, call.Progress)
			}
			return h(ctx, call.Workspace, args)
		},
	}
}

// ExecEnv is what exec needs besides the call's workspace: the executor
// (nil leaves exec out), the time limit of one command (0: the executor's
// default), and NoNetwork, set when the executor's commands run without
// network: the line (why, and which setting gives them network) that a
// failed command's result ends with when its output shows a network
// failure, so the agent learns the cause rather than retrying.
type ExecEnv struct {
	Executor  sandbox.Executor
	Timeout   time.Duration
	NoNetwork string
	// Transact runs exec's `transaction: true` (tools/transactions'
	// Manager.Exec, which the daemon wires in); nil refuses it.
	Transact func(ctx context.Context, ws fsops.Workspace, req sandbox.Request) *mcp.CallToolResult
}

// Tools returns the tools offered over ws, in the order the reference
// registers them: the file tools for every workspace; for one that can
// execute (a directory, not the memory workspace) also grep, and exec when
// env has an executor. The daemon sets them as the registry's "workspace"
// provider.
func Tools(ws fsops.Workspace, env ExecEnv) []registry.Tool {
	list := toolList(ws, execEnv{executor: env.Executor, timeout: env.Timeout, base: ws, noNetwork: env.NoNetwork, transact: env.Transact})
	out := make([]registry.Tool, len(list))
	for i, t := range list {
		out[i] = t.def()
	}
	return out
}

// toolList is Tools before def.
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

// progressKey carries registry.Call.Progress to a tool's handler.
type progressKey struct{}

func progressFrom(ctx context.Context) func(context.Context, float64, string) {
	p, _ := ctx.Value(progressKey{}).(func(context.Context, float64, string))
	return p
}

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

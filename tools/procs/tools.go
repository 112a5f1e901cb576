package procs

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/toolkit"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// Tools are the MCP tools over the manager; fallback is the workspace of a
// call that names none.
func (m *Manager) Tools() []registry.Tool {
	str := map[string]any{"type": "string"}
	id := map[string]any{"type": "string", "description": "the id process_start returned"}
	return []registry.Tool{
		{
			Name: "process_start", RunsCommands: true,
			Description: "Start a command in the background (a dev server, a long build) and return its id at once. " +
				"Same policy and isolation as exec. Follow it with process_output, end it with process_kill.",
			InputSchema: toolkit.Schema(map[string]any{
				"command": map[string]any{"type": "string", "description": "the shell command"},
				"cwd":     map[string]any{"type": "string", "description": "directory inside the workspace (default: its root)"},
				"env":     map[string]any{"type": "object", "additionalProperties": str},
				"name":    map[string]any{"type": "string", "description": "a label for process_list"},
			}, "command"),
			Handler: m.start,
		},
		{
			Name:        "process_list",
			Description: "List this scope's background processes: id, name, command, state, exit code, start time, CPU seconds and memory.",
			InputSchema: toolkit.Schema(map[string]any{}),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
			Handler: func(_ context.Context, call registry.Call) *mcp.CallToolResult {
				return toolkit.OK(map[string]any{"processes": m.List(call.Scope)})
			},
		},
		{
			Name: "process_output",
			Description: "Read a background process's stdout and stderr from a cursor (the one the last call returned; none for the start), " +
				"or its last `tail` bytes. The last 1 MiB of each stream is kept (an exited process's may be dropped to bound memory); " +
				"truncated says bytes were dropped.",
			InputSchema: toolkit.Schema(map[string]any{
				"id":    id,
				"since": map[string]any{"type": "object", "properties": map[string]any{"stdout": map[string]any{"type": "integer"}, "stderr": map[string]any{"type": "integer"}}},
				"tail":  map[string]any{"type": "integer", "minimum": 0},
			}, "id"),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
			Handler:     m.output,
		},
		{
			Name:        "process_wait",
			Description: "Wait for a background process to exit (at most timeoutMs, up to 60 s) and describe it.",
			InputSchema: toolkit.Schema(map[string]any{"id": id, "timeoutMs": map[string]any{"type": "integer", "minimum": 0}}, "id"),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
			Timeout:     DefaultMaxWait + 5*time.Second,
			Handler:     m.wait,
		},
		{
			Name: "process_signal", RunsCommands: true,
			Description: "Send a signal (TERM, INT, HUP, KILL, QUIT, USR1, USR2) to a background process.",
			InputSchema: toolkit.Schema(map[string]any{"id": id, "signal": map[string]any{"type": "string"}}, "id", "signal"),
			Handler:     m.signal,
		},
		{
			Name: "process_kill", RunsCommands: true,
			Description: "Kill a background process and everything it started, and describe it once it has exited " +
				"(state, exit code, signal), as process_wait does.",
			InputSchema: toolkit.Schema(map[string]any{"id": id}, "id"),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)},
			Timeout:     KillWait + 5*time.Second,
			Handler: func(ctx context.Context, call registry.Call) *mcp.CallToolResult {
				var a struct {
					ID string `json:"id"`
				}
				if err := toolkit.Decode(call.Args, &a); err != nil {
					return toolkit.Fail(err)
				}
				in, err := m.Kill(ctx, a.ID, call.Scope)
				if err != nil {
					return toolkit.Fail(err)
				}
				return toolkit.OK(in)
			},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func (m *Manager) start(_ context.Context, call registry.Call) *mcp.CallToolResult {
	var a struct {
		Command string            `json:"command"`
		Cwd     string            `json:"cwd"`
		Env     map[string]string `json:"env"`
		Name    string            `json:"name"`
	}
	if err := toolkit.Decode(call.Args, &a); err != nil {
		return toolkit.Fail(err)
	}
	ws := call.Workspace
	if ws == nil {
		return toolkit.Failf(errcode.InvalidConfiguration, "process_start", "no workspace")
	}
	// A scope's directory may not exist yet (it is made by the first
	// write); a command needs it, as exec does.
	if err := ws.Mkdir(".", true); err != nil {
		return toolkit.Fail(err)
	}
	// The process outlives the call; its directory handle is the
	// sandbox's from here (bound by descriptor at start).
	dir, release, err := fsops.WorkDir(ws, a.Cwd)
	if err != nil {
		return toolkit.Fail(err)
	}
	defer release()
	ws = dir
	in, err := m.Start(StartRequest{Command: a.Command, Name: a.Name, Env: a.Env, Workspace: ws, Scope: call.Scope, Caller: call.Caller})
	if err != nil {
		return toolkit.Fail(err)
	}
	return toolkit.OK(in)
}

func (m *Manager) output(_ context.Context, call registry.Call) *mcp.CallToolResult {
	var a struct {
		ID    string  `json:"id"`
		Since *Cursor `json:"since"`
		Tail  int     `json:"tail"`
	}
	if err := toolkit.Decode(call.Args, &a); err != nil {
		return toolkit.Fail(err)
	}
	out, err := m.Output(a.ID, call.Scope, a.Since, a.Tail)
	if err != nil {
		return toolkit.Fail(err)
	}
	return toolkit.OK(out)
}

func (m *Manager) wait(ctx context.Context, call registry.Call) *mcp.CallToolResult {
	var a struct {
		ID        string `json:"id"`
		TimeoutMs int64  `json:"timeoutMs"`
	}
	if err := toolkit.Decode(call.Args, &a); err != nil {
		return toolkit.Fail(err)
	}
	in, err := m.Wait(ctx, a.ID, call.Scope, time.Duration(a.TimeoutMs)*time.Millisecond)
	if err != nil {
		return toolkit.Fail(err)
	}
	return toolkit.OK(in)
}

func (m *Manager) signal(_ context.Context, call registry.Call) *mcp.CallToolResult {
	var a struct {
		ID     string `json:"id"`
		Signal string `json:"signal"`
	}
	if err := toolkit.Decode(call.Args, &a); err != nil {
		return toolkit.Fail(err)
	}
	in, err := m.Signal(a.ID, call.Scope, a.Signal)
	if err != nil {
		return toolkit.Fail(err)
	}
	return toolkit.OK(in)
}

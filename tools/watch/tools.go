package watch

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/internal/toolkit"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

type pollArgs struct {
	Path      string `json:"path"`
	Cursor    *int64 `json:"cursor"`
	TimeoutMs *int64 `json:"timeoutMs"`
}

// defaultWait is a poll's wait without timeoutMs.
const defaultWait = 20 * time.Second

// Tools is watch_changes.
func (m *Manager) Tools() []registry.Tool {
	return []registry.Tool{{
		Name: "watch_changes",
		Description: "Follow changes under a directory of the workspace (created, written, removed, renamed files and directories, the whole tree below it). " +
			"Call without cursor to start: it returns the cursor of now. Call again with that cursor: it returns the changes after it, " +
			"waiting up to timeoutMs (default 20000, at most 60000) for the first one, and the cursor to pass next. " +
			"truncated says some changes were dropped (more than 1024 since your cursor). A watch nobody polls for 2 minutes ends.",
		InputSchema: toolkit.Schema(map[string]any{
			"path":      map[string]any{"type": "string", "description": "a directory of the workspace (default: its root)"},
			"cursor":    map[string]any{"type": "integer", "description": "the cursor the last call returned; none to start"},
			"timeoutMs": map[string]any{"type": "integer", "minimum": 0, "maximum": 60000},
		}),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Timeout:     DefaultMaxWait + 5*time.Second,
		Handler: func(ctx context.Context, call registry.Call) *mcp.CallToolResult {
			var a pollArgs
			if err := toolkit.Decode(call.Args, &a); err != nil {
				return toolkit.Fail(err)
			}
			if call.Workspace == nil {
				return toolkit.Failf(errcode.NotImplemented, "watch_changes", "this call has no workspace")
			}
			cursor := int64(-1)
			if a.Cursor != nil {
				if *a.Cursor < 0 {
					return toolkit.Failf(errcode.InvalidArgument, "watch_changes", "cursor %d: use the one the last call returned", *a.Cursor)
				}
				cursor = *a.Cursor
			}
			wait := defaultWait
			if a.TimeoutMs != nil {
				if *a.TimeoutMs < 0 || *a.TimeoutMs > DefaultMaxWait.Milliseconds() {
					return toolkit.Failf(errcode.InvalidArgument, "watch_changes", "timeoutMs %d: from 0 to %d", *a.TimeoutMs, DefaultMaxWait.Milliseconds())
				}
				wait = time.Duration(*a.TimeoutMs) * time.Millisecond
			}
			path := a.Path
			if path == "" {
				path = "."
			}
			ch, err := m.Poll(ctx, call.Caller, call.Workspace, path, cursor, wait)
			if err != nil {
				return toolkit.Fail(err)
			}
			return toolkit.OK(ch)
		},
	}}
}

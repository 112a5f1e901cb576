// Package checkpoints is the provider of the checkpoint tools
// (--checkpoints manual|auto): checkpoint_create, checkpoint_list,
// checkpoint_diff and checkpoint_restore, over the store of fsops/checkpoint.
// With --checkpoints auto, BeforeChange (installed as the registry's hook)
// takes a checkpoint before every call of a tool that can change the
// workspace. docs/checkpoints.md describes the tools and the store.
package checkpoints

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops/checkpoint"
	"github.com/agentbe/agentbe-daemon/internal/toolkit"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// Options configures a Provider.
type Options struct {
	Store  *checkpoint.Store
	Logger *slog.Logger
}

// Provider serves the checkpoint tools over one store.
type Provider struct {
	st  *checkpoint.Store
	log *slog.Logger
}

// New returns the provider of the tools over o.Store (which the caller
// closes).
func New(o Options) *Provider {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{st: o.Store, log: log}
}

// Tool names.
const (
	Create  = "checkpoint_create"
	List    = "checkpoint_list"
	Diff    = "checkpoint_diff"
	Restore = "checkpoint_restore"
)

type createArgs struct {
	Label string `json:"label"`
}

type diffArgs struct {
	From  string   `json:"from"`
	To    string   `json:"to"`
	Paths []string `json:"paths"`
}

type restoreArgs struct {
	ID    string   `json:"id"`
	Paths []string `json:"paths"`
}

// maxLabel bounds a label, which every list answer repeats.
const maxLabel = 200

func ptr[T any](v T) *T { return &v }

// Tools are the four checkpoint tools. list and diff are read-only (a
// read-only token may call them); create and restore are not.
func (p *Provider) Tools() []registry.Tool {
	paths := map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "maxItems": checkpoint.MaxPaths,
		"description": "restrict to these paths of the workspace (files or directories); default: all of it"}
	return []registry.Tool{
		{
			Name:  Create,
			Title: "Create a checkpoint",
			Description: "Take a checkpoint of the workspace (its files, directories, symlinks and modes), to diff against or restore later. " +
				"Only files changed since the previous checkpoint are read. Returns {id, files, bytes, took_ms}; skipped names entries not captured (FIFOs, sockets, devices, links leading out).",
			InputSchema: toolkit.Schema(map[string]any{
				"label": map[string]any{"type": "string", "maxLength": maxLabel, "description": "a note to recognise it by in checkpoint_list"},
			}),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: false},
			Handler:     p.create,
		},
		{
			Name:        List,
			Title:       "List checkpoints",
			Description: "List this workspace's checkpoints, oldest first: id, label, created, auto (taken before a tool call by --checkpoints auto), files, bytes.",
			InputSchema: toolkit.Schema(map[string]any{}),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
			Handler: func(_ context.Context, call registry.Call) *mcp.CallToolResult {
				if call.Workspace == nil {
					return noWorkspace(List)
				}
				list := p.st.List(call.Workspace)
				if list == nil {
					list = []checkpoint.Info{}
				}
				return toolkit.OK(map[string]any{"checkpoints": list})
			},
		},
		{
			Name:  Diff,
			Title: "Diff a checkpoint",
			Description: "What changed from checkpoint `from` to checkpoint `to` (default: the workspace now): added, modified and deleted paths, " +
				"with unified diffs for text files and sizes for binary ones (and files over 1 MiB). Diffs are cut past 256 KiB in all, with a notice; pass paths to narrow.",
			InputSchema: toolkit.Schema(map[string]any{
				"from":  map[string]any{"type": "string", "description": "a checkpoint id"},
				"to":    map[string]any{"type": "string", "description": "a later checkpoint id; default: the workspace now"},
				"paths": paths,
			}, "from"),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
			Handler:     p.diff,
		},
		{
			Name:  Restore,
			Title: "Restore a checkpoint",
			Description: "Bring the workspace (or only paths) back to a checkpoint: each changed file replaced atomically, symlinks and modes restored, " +
				"files created since removed. Returns what it changed: added (recreated), modified (rewritten), deleted (created since the checkpoint).",
			InputSchema: toolkit.Schema(map[string]any{
				"id":    map[string]any{"type": "string", "description": "the checkpoint id"},
				"paths": paths,
			}, "id"),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
			Handler:     p.restore,
		},
	}
}

func noWorkspace(tool string) *mcp.CallToolResult {
	return toolkit.Failf(errcode.NotImplemented, tool, "this call has no workspace")
}

func (p *Provider) create(ctx context.Context, call registry.Call) *mcp.CallToolResult {
	var a createArgs
	if err := toolkit.Decode(call.Args, &a); err != nil {
		return toolkit.Fail(err)
	}
	if call.Workspace == nil {
		return noWorkspace(Create)
	}
	if len(a.Label) > maxLabel {
		return toolkit.Failf(errcode.InvalidArgument, Create, "label is %d bytes; the limit is %d", len(a.Label), maxLabel)
	}
	info, err := p.st.Create(ctx, call.Workspace, checkpoint.CreateOptions{Label: a.Label})
	if err != nil {
		return toolkit.Fail(err)
	}
	return toolkit.OK(info)
}

func (p *Provider) diff(ctx context.Context, call registry.Call) *mcp.CallToolResult {
	var a diffArgs
	if err := toolkit.Decode(call.Args, &a); err != nil {
		return toolkit.Fail(err)
	}
	if call.Workspace == nil {
		return noWorkspace(Diff)
	}
	if a.From == "" {
		return toolkit.Failf(errcode.InvalidArgument, Diff, "from is required: a checkpoint id (checkpoint_list shows them)")
	}
	cs, err := p.st.Diff(ctx, call.Workspace, a.From, a.To, a.Paths)
	if err != nil {
		return toolkit.Fail(err)
	}
	return changeSet(cs, "")
}

func (p *Provider) restore(ctx context.Context, call registry.Call) *mcp.CallToolResult {
	var a restoreArgs
	if err := toolkit.Decode(call.Args, &a); err != nil {
		return toolkit.Fail(err)
	}
	if call.Workspace == nil {
		return noWorkspace(Restore)
	}
	if a.ID == "" {
		return toolkit.Failf(errcode.InvalidArgument, Restore, "id is required: a checkpoint id (checkpoint_list shows them)")
	}
	cs, err := p.st.Restore(ctx, call.Workspace, a.ID, a.Paths)
	if err != nil {
		res := toolkit.Fail(err)
		if len(cs.Changes) > 0 {
			tc := res.Content[0].(*mcp.TextContent)
			tc.Text += "\nRestored before the error:\n" + checkpoint.Text(cs)
		}
		return res
	}
	return changeSet(cs, "Restored checkpoint "+a.ID+": ")
}

// changeSet is a result carrying the change set as text (checkpoint.Text)
// and as structured content.
func changeSet(cs checkpoint.ChangeSet, prefix string) *mcp.CallToolResult {
	b, err := json.Marshal(cs)
	if err != nil {
		return toolkit.Fail(err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: prefix + checkpoint.Text(cs)}}, StructuredContent: json.RawMessage(b)}
}

// BeforeChange is the registry's hook with --checkpoints auto: a
// checkpoint of the call's workspace before a tool that can change it runs
// (an unchanged workspace reuses the newest checkpoint). checkpoint_create
// needs none before it. A checkpoint that fails stops the call, so an
// undo is never silently missing. Before checkpoint_restore, the
// checkpoint being restored is kept from the prune this one may cause:
// undoing "all the way back" with a full store must not lose its target.
func (p *Provider) BeforeChange(ctx context.Context, tool registry.Tool, call registry.Call) error {
	if tool.Name == Create || call.Workspace == nil || call.ReadOnly {
		return nil
	}
	o := checkpoint.CreateOptions{Label: "before " + tool.Name, Auto: true}
	if tool.Name == Restore {
		var a restoreArgs
		if toolkit.Decode(call.Args, &a) == nil && a.ID != "" {
			o.Keep = []string{a.ID}
		}
	}
	if _, err := p.st.Create(ctx, call.Workspace, o); err != nil {
		return fmt.Errorf("the automatic checkpoint before it failed (--checkpoints auto): %s", errcode.Sentence(err))
	}
	return nil
}

// Health is the store's state for /health.
type Health struct {
	Mode string `json:"mode"`
	checkpoint.Stats
}

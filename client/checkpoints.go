package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/fsops/checkpoint"
)

// Checkpoints calls a daemon's checkpoint tools (--checkpoints manual or
// auto; docs/checkpoints.md) over an MCP session, such as one from
// Backend.MCPClient. The session's workspace (its scope) is the one
// checkpointed, listed and restored.
type Checkpoints struct {
	cs *mcp.ClientSession
}

// NewCheckpoints returns the checkpoint calls over cs.
func NewCheckpoints(cs *mcp.ClientSession) *Checkpoints { return &Checkpoints{cs: cs} }

// CheckpointInfo describes one checkpoint, as checkpoint_create and
// checkpoint_list answer.
type CheckpointInfo = checkpoint.Info

// ChangeSet is what checkpoint_diff and checkpoint_restore answer: the
// added, modified and deleted paths, with diffs for text files.
type ChangeSet = checkpoint.ChangeSet

// ToolError is a tool's error result: its text, which names the error.
type ToolError struct {
	Tool, Text string
}

func (e *ToolError) Error() string { return e.Tool + ": " + e.Text }

// callTool calls tool with args and decodes its structured content into
// out; an error result is a *ToolError.
func callTool(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any, out any) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return err
	}
	if res.IsError {
		text := ""
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		return &ToolError{Tool: tool, Text: text}
	}
	if res.StructuredContent == nil {
		return fmt.Errorf("%s: the answer has no structured content", tool)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	return nil
}

// Create takes a checkpoint of the workspace, with an optional label.
func (c *Checkpoints) Create(ctx context.Context, label string) (CheckpointInfo, error) {
	var info CheckpointInfo
	args := map[string]any{}
	if label != "" {
		args["label"] = label
	}
	err := callTool(ctx, c.cs, "checkpoint_create", args, &info)
	return info, err
}

// List returns the workspace's checkpoints, oldest first.
func (c *Checkpoints) List(ctx context.Context) ([]CheckpointInfo, error) {
	var out struct {
		Checkpoints []CheckpointInfo `json:"checkpoints"`
	}
	err := callTool(ctx, c.cs, "checkpoint_list", map[string]any{}, &out)
	return out.Checkpoints, err
}

// Diff returns the changes from checkpoint from to checkpoint to ("": the
// workspace now), restricted to paths (none: all).
func (c *Checkpoints) Diff(ctx context.Context, from, to string, paths ...string) (ChangeSet, error) {
	var cs ChangeSet
	args := map[string]any{"from": from}
	if to != "" {
		args["to"] = to
	}
	if len(paths) > 0 {
		args["paths"] = paths
	}
	err := callTool(ctx, c.cs, "checkpoint_diff", args, &cs)
	return cs, err
}

// Restore brings the workspace (or paths of it) back to checkpoint id and
// returns what it changed.
func (c *Checkpoints) Restore(ctx context.Context, id string, paths ...string) (ChangeSet, error) {
	var cs ChangeSet
	args := map[string]any{"id": id}
	if len(paths) > 0 {
		args["paths"] = paths
	}
	err := callTool(ctx, c.cs, "checkpoint_restore", args, &cs)
	return cs, err
}

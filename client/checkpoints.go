package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
// checkpoint_list answer (docs/checkpoints.md). The client keeps its own
// copy of the daemon's types (fsops/checkpoint), so it imports nothing of
// the store and builds off Linux with few dependencies
// (TestBuildsOffLinux).
type CheckpointInfo struct {
	ID      string    `json:"id"`
	Label   string    `json:"label,omitempty"`
	Created time.Time `json:"created"`
	Auto    bool      `json:"auto,omitempty"`
	Files   int       `json:"files"`
	Bytes   int64     `json:"bytes"`
	// Read, Stored, Listed, TookMs, Skipped, Pruned and Reused are set by
	// Create (the daemon's answer always has took_ms; List's entries have
	// none). Listed is how many directories the checkpoint listed.
	Read    int      `json:"read,omitempty"`
	Stored  int64    `json:"stored,omitempty"`
	Listed  int      `json:"listed,omitempty"`
	TookMs  int64    `json:"took_ms,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
	Pruned  []string `json:"pruned,omitempty"`
	Reused  bool     `json:"reused,omitempty"`
}

// Change is one changed path of a ChangeSet.
type Change struct {
	Path      string `json:"path"`
	Kind      string `json:"kind"` // "added", "modified", "deleted"
	Type      string `json:"type"` // "file", "dir", "symlink"
	OldSize   int64  `json:"oldSize,omitempty"`
	NewSize   int64  `json:"newSize,omitempty"`
	Binary    bool   `json:"binary,omitempty"`
	Diff      string `json:"diff,omitempty"`
	Note      string `json:"note,omitempty"`
	OldTarget string `json:"oldTarget,omitempty"`
	NewTarget string `json:"newTarget,omitempty"`
}

// ChangeSet is what checkpoint_diff and checkpoint_restore (and a
// transaction) answer: the added, modified and deleted paths, with diffs
// for text files, cut with a notice past the daemon's limits.
type ChangeSet struct {
	Changes   []Change `json:"changes"`
	Added     int      `json:"added"`
	Modified  int      `json:"modified"`
	Deleted   int      `json:"deleted"`
	Truncated bool     `json:"truncated,omitempty"`
	Notice    string   `json:"notice,omitempty"`
	Skipped   []string `json:"skipped,omitempty"`
}

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

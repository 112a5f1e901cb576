package transactions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/fsops/checkpoint"
	"github.com/agentbe/agentbe-daemon/internal/toolkit"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// Tools are transaction_apply, transaction_discard and transaction_list;
// exec's `transaction: true` is the workspace provider's, which calls Exec.
func (m *Manager) Tools() []registry.Tool {
	id := map[string]any{"type": "string", "description": "the transaction id exec {transaction: true} returned"}
	return []registry.Tool{
		{
			Name:  "transaction_apply",
			Title: "Apply a transaction",
			Description: "Make the changes of a command run as a transaction (exec with transaction: true) in the workspace, each file replaced atomically. " +
				"Refused, listing the conflicts and changing nothing, when a path it changes was changed in the workspace since the command (or while it ran); the transaction then stays pending.",
			InputSchema: toolkit.Schema(map[string]any{"id": id}, "id"),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: false},
			Handler:     m.applyTool,
		},
		{
			Name:        "transaction_discard",
			Title:       "Discard a transaction",
			Description: "Drop the changes of a command run as a transaction; the workspace stays as it is.",
			InputSchema: toolkit.Schema(map[string]any{"id": id}, "id"),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true},
			Handler:     m.discardTool,
		},
		{
			Name:        "transaction_list",
			Title:       "List pending transactions",
			Description: "List this workspace's pending transactions: id, command, exit code, number of changes, when it was made and when it expires.",
			InputSchema: toolkit.Schema(map[string]any{}),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
			Handler: func(_ context.Context, call registry.Call) *mcp.CallToolResult {
				return toolkit.OK(map[string]any{"transactions": m.List(call.Workspace)})
			},
		},
	}
}

func ptr[T any](v T) *T { return &v }

type idArgs struct {
	ID string `json:"id"`
}

func (m *Manager) applyTool(ctx context.Context, call registry.Call) *mcp.CallToolResult {
	var a idArgs
	if err := toolkit.Decode(call.Args, &a); err != nil {
		return toolkit.Fail(err)
	}
	done, err := m.Apply(ctx, call.Workspace, a.ID)
	var ce *checkpoint.ConflictError
	switch {
	case errors.As(err, &ce):
		b, _ := json.Marshal(map[string]any{"transaction": a.ID, "conflicts": ce.Conflicts})
		r := registry.WithCode(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
			Text: "Transaction " + a.ID + " " + ce.Error() + "\nThe transaction stays pending: discard it (transaction_discard), or run the command again."}},
			StructuredContent: json.RawMessage(b)}, errcode.WriteFailed)
		return r
	case err != nil:
		text := errcode.Sentence(err)
		if len(done.Changes) > 0 {
			text += "\nApplied before the error:\n" + checkpoint.Text(done)
		}
		return registry.WithCode(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}, codeOf(err))
	}
	b, _ := json.Marshal(map[string]any{"transaction": a.ID, "applied": done})
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Applied transaction " + a.ID + ":\n" + checkpoint.Text(done)}},
		StructuredContent: json.RawMessage(b)}
}

func codeOf(err error) errcode.Code {
	if c := errcode.Of(err); c != "" {
		return c
	}
	return errcode.WriteFailed
}

func (m *Manager) discardTool(_ context.Context, call registry.Call) *mcp.CallToolResult {
	var a idArgs
	if err := toolkit.Decode(call.Args, &a); err != nil {
		return toolkit.Fail(err)
	}
	if err := m.Discard(call.Workspace, a.ID); err != nil {
		return toolkit.Fail(err)
	}
	b, _ := json.Marshal(map[string]any{"transaction": a.ID, "discarded": true})
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Discarded transaction " + a.ID + "; the workspace is as it was."}},
		StructuredContent: json.RawMessage(b)}
}

// Exec is exec's `transaction: true`: req (its Workspace the caller's) run
// as a transaction, answered with the command's exit code and output, the
// change set (checkpoint.Text) and the transaction id, in text and in
// structured content ({transaction, expires, exitCode, stdout, stderr,
// changes}). An error result is a refusal: nothing is pending and the
// workspace is untouched.
func (m *Manager) Exec(ctx context.Context, ws fsops.Workspace, req sandbox.Request) *mcp.CallToolResult {
	req.Workspace = ws
	res, err := m.Run(ctx, req)
	if err != nil {
		return toolkit.Fail(err)
	}
	run := res.Run
	stdout := string(sandbox.WithTruncationNotice(run.Stdout, run.StdoutSize))
	stderr := string(sandbox.WithTruncationNotice(run.Stderr, run.StderrSize))
	var b strings.Builder
	if res.ID == "" {
		b.WriteString("Transaction: the command ran on a copy of the workspace and changed nothing; nothing is pending.\n")
	} else {
		fmt.Fprintf(&b, "Transaction %s: the command ran on a copy of the workspace, which is unchanged. "+
			"Apply its changes with transaction_apply {\"id\": %q}, or drop them with transaction_discard; pending until %s.\n",
			res.ID, res.ID, res.Expires.UTC().Format(time.RFC3339))
	}
	code := strconv.Itoa(run.ExitCode)
	if run.TimedOut {
		code += " (timed out and killed)"
	}
	b.WriteString("Exit code: " + code + "\n")
	if s := strings.TrimRight(stdout, "\n"); s != "" {
		b.WriteString("[stdout]\n" + s + "\n")
	}
	if s := strings.TrimRight(stderr, "\n"); s != "" {
		b.WriteString("[stderr]\n" + s + "\n")
	}
	b.WriteString("[changes]\n" + checkpoint.Text(res.Changes))
	sc := map[string]any{"exitCode": run.ExitCode, "stdout": stdout, "stderr": stderr, "changes": res.Changes}
	if res.ID != "" {
		sc["transaction"], sc["expires"] = res.ID, res.Expires.UTC().Format(time.RFC3339)
	}
	if run.TimedOut {
		sc["timedOut"] = true
	}
	j, _ := json.Marshal(sc)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}, StructuredContent: json.RawMessage(j)}
}

package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transactions runs commands as transactions on a daemon (bwrap mode;
// docs/checkpoints.md#transactions) over an MCP session, such as one from
// Backend.MCPClient: Exec runs a command on a copy-on-write view of the
// session's workspace and returns what it changed, Apply makes those
// changes, Discard drops them.
type Transactions struct {
	cs *mcp.ClientSession
}

// NewTransactions returns the transaction calls over cs.
func NewTransactions(cs *mcp.ClientSession) *Transactions { return &Transactions{cs: cs} }

// TransactionResult is what a command run as a transaction gave: its exit
// code and output, its changes, and the transaction's id (empty when it
// changed nothing: then nothing is pending) and expiry (RFC 3339).
type TransactionResult struct {
	ID       string    `json:"transaction"`
	Expires  string    `json:"expires"`
	ExitCode int       `json:"exitCode"`
	Stdout   string    `json:"stdout"`
	Stderr   string    `json:"stderr"`
	TimedOut bool      `json:"timedOut"`
	Changes  ChangeSet `json:"changes"`
}

// TransactionOptions are exec's options for a transaction.
type TransactionOptions struct {
	Env     map[string]string
	Cwd     string
	Timeout int // seconds; 0: the daemon's limit
}

// Exec runs command as a transaction: the workspace is untouched.
func (t *Transactions) Exec(ctx context.Context, command string, opts TransactionOptions) (TransactionResult, error) {
	args := map[string]any{"command": command, "transaction": true}
	if len(opts.Env) > 0 {
		args["env"] = opts.Env
	}
	if opts.Cwd != "" {
		args["cwd"] = opts.Cwd
	}
	if opts.Timeout > 0 {
		args["timeout"] = opts.Timeout
	}
	var r TransactionResult
	err := callTool(ctx, t.cs, "exec", args, &r)
	return r, err
}

// Conflict is a path transaction_apply would not change, and why.
type Conflict struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

// ConflictError is transaction_apply's refusal: the workspace changed
// underneath the listed paths since the command, and nothing was applied;
// the transaction stays pending.
type ConflictError struct {
	ID        string
	Conflicts []Conflict
	Text      string
}

func (e *ConflictError) Error() string { return e.Text }

// Apply makes transaction id's changes and returns them; on conflicts the
// error is a *ConflictError.
func (t *Transactions) Apply(ctx context.Context, id string) (ChangeSet, error) {
	res, err := t.cs.CallTool(ctx, &mcp.CallToolParams{Name: "transaction_apply", Arguments: map[string]any{"id": id}})
	if err != nil {
		return ChangeSet{}, err
	}
	var out struct {
		Applied   ChangeSet  `json:"applied"`
		Conflicts []Conflict `json:"conflicts"`
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return ChangeSet{}, err
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return ChangeSet{}, fmt.Errorf("transaction_apply: %w", err)
		}
	}
	if res.IsError {
		text := resultText(res)
		if len(out.Conflicts) > 0 {
			return ChangeSet{}, &ConflictError{ID: id, Conflicts: out.Conflicts, Text: text}
		}
		return ChangeSet{}, &ToolError{Tool: "transaction_apply", Text: text}
	}
	if res.StructuredContent == nil {
		return ChangeSet{}, errors.New("transaction_apply: the answer has no structured content")
	}
	return out.Applied, nil
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// Discard drops transaction id; the workspace stays as it is.
func (t *Transactions) Discard(ctx context.Context, id string) error {
	var out struct{}
	return callTool(ctx, t.cs, "transaction_discard", map[string]any{"id": id}, &out)
}

// TransactionInfo describes a pending transaction.
type TransactionInfo struct {
	ID       string `json:"id"`
	Command  string `json:"command"`
	Created  string `json:"created"`
	Expires  string `json:"expires"`
	Changes  int    `json:"changes"`
	ExitCode int    `json:"exitCode"`
}

// List returns the session's workspace's pending transactions, oldest
// first.
func (t *Transactions) List(ctx context.Context) ([]TransactionInfo, error) {
	var out struct {
		Transactions []TransactionInfo `json:"transactions"`
	}
	err := callTool(ctx, t.cs, "transaction_list", map[string]any{}, &out)
	return out.Transactions, err
}

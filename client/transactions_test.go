package client

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestRemoteTransactions: the client's transaction calls against a bwrap
// daemon over its MCP session: a command as a transaction leaves the
// workspace untouched and returns its changes, Apply makes them, a
// conflicting Apply is a *ConflictError naming the path, Discard and List.
func TestRemoteTransactions(t *testing.T) {
	testenv.Bwrap(t)
	d := startDaemonWith(t, func(c *config.Config) {
		c.Isolation = "bwrap"
		c.StateDir = t.TempDir()
		c.Transactions = true
	})
	ctx := context.Background()
	r, err := NewRemote(ctx, d.options())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Destroy()
	if err := r.Write(ctx, "notes.txt", []byte("first\n")); err != nil {
		t.Fatal(err)
	}
	cs, err := r.MCPClient(ctx, MCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tx := NewTransactions(cs)
	res, err := tx.Exec(ctx, "echo second > notes.txt && echo made > new.txt", TransactionOptions{})
	if err != nil || res.ID == "" || res.Changes.Added != 1 || res.Changes.Modified != 1 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if b, _ := r.Read(ctx, "notes.txt"); string(b) != "first\n" {
		t.Fatalf("the transaction touched notes.txt: %q", b)
	}
	if list, err := tx.List(ctx); err != nil || len(list) != 1 || list[0].ID != res.ID {
		t.Fatalf("list: %+v %v", list, err)
	}
	done, err := tx.Apply(ctx, res.ID)
	if err != nil || done.Added+done.Modified != 2 {
		t.Fatalf("apply: %+v %v", done, err)
	}
	if b, _ := r.Read(ctx, "notes.txt"); string(b) != "second\n" {
		t.Fatalf("after apply: %q", b)
	}

	res, err = tx.Exec(ctx, "echo third > notes.txt", TransactionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Write(ctx, "notes.txt", []byte("someone else\n")); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Apply(ctx, res.ID)
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Conflicts) != 1 || ce.Conflicts[0].Path != "notes.txt" {
		t.Fatalf("conflicting apply: %v", err)
	}
	if err := tx.Discard(ctx, res.ID); err != nil {
		t.Fatal(err)
	}
	var te *ToolError
	if err := tx.Discard(ctx, res.ID); !errors.As(err, &te) || !strings.Contains(te.Text, "no pending transaction") {
		t.Fatalf("second discard: %v", err)
	}
}

package client

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/fsops/checkpoint"
)

// TestRemoteCheckpoints: the Go client's checkpoint calls against a daemon
// on a loopback port: create, list, diff, restore, and a tool error as a
// *ToolError naming why.
func TestRemoteCheckpoints(t *testing.T) {
	d := startDaemonWith(t, func(c *config.Config) {
		c.Checkpoints = "manual"
		c.StateDir = t.TempDir()
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
	cp := NewCheckpoints(cs)
	info, err := cp.Create(ctx, "start")
	if err != nil || info.ID == "" || info.Files != 1 {
		t.Fatalf("create: %+v %v", info, err)
	}
	if err := r.Write(ctx, "notes.txt", []byte("second\n")); err != nil {
		t.Fatal(err)
	}
	list, err := cp.List(ctx)
	if err != nil || len(list) != 1 || list[0].Label != "start" {
		t.Fatalf("list: %+v %v", list, err)
	}
	diff, err := cp.Diff(ctx, info.ID, "")
	if err != nil || diff.Modified != 1 || !strings.Contains(diff.Changes[0].Diff, "+second") {
		t.Fatalf("diff: %+v %v", diff, err)
	}
	done, err := cp.Restore(ctx, info.ID, "notes.txt")
	if err != nil || done.Modified != 1 {
		t.Fatalf("restore: %+v %v", done, err)
	}
	if b, err := r.Read(ctx, "notes.txt"); err != nil || string(b) != "first\n" {
		t.Fatalf("after restore: %q %v", b, err)
	}
	_, err = cp.Restore(ctx, "cp999-000000")
	var te *ToolError
	if !errors.As(err, &te) || te.Tool != "checkpoint_restore" || !strings.Contains(te.Text, "no checkpoint of this workspace has this id") {
		t.Fatalf("restore of an unknown id: %v", err)
	}
}

// TestCheckpointTypesMatchTheDaemon: the client's copies of the change set
// and checkpoint types read and write the daemon's JSON field for field.
func TestCheckpointTypesMatchTheDaemon(t *testing.T) {
	daemonSet := checkpoint.ChangeSet{Changes: []checkpoint.Change{{Path: "p", Kind: "modified", Type: "file", OldSize: 1, NewSize: 2,
		Binary: true, Diff: "d", Note: "n", OldTarget: "o", NewTarget: "t"}}, Added: 1, Modified: 2, Deleted: 3,
		Truncated: true, Notice: "cut", Skipped: []string{"fifo (a FIFO)"}}
	tookMs := int64(5)
	daemonInfo := checkpoint.Info{ID: "cp1-aa", Label: "l", Created: time.Unix(1, 0).UTC(), Auto: true, Files: 1, Bytes: 2,
		Read: 3, Stored: 4, TookMs: &tookMs, Skipped: []string{"s"}, Pruned: []string{"cp0-bb"}, Reused: true}
	for _, tc := range []struct {
		daemon, client any
	}{{daemonSet, &ChangeSet{}}, {daemonInfo, &CheckpointInfo{}}} {
		want, _ := json.Marshal(tc.daemon)
		if err := json.Unmarshal(want, tc.client); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(tc.client)
		if string(got) != string(want) {
			t.Errorf("client's copy:\n%s\nthe daemon's:\n%s", got, want)
		}
	}
}

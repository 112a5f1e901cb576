package client

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/errcode"
)

// TestRemoteFollowsTokenFile: a remote backend given RemoteOptions.TokenFile
// (the daemon's --auth-token-file) follows a rotation (the file replaced,
// SIGHUP). The daemon closes /ssh with 4001; the reconnection reads the
// file and is connected with the new token. An MCP session opened before
// the rotation, on a backend that has not reconnected, is refused (401),
// reads the file, and its call is sent once more with the new token: it
// runs once. A refusal the file cannot mend (it holds a token the daemon
// no longer takes) leaves the backend disconnected with AUTH_FAILED naming
// the file, and the MCP call answers the 401 naming it, the call not run.
func TestRemoteFollowsTokenFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	put := func(tok string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	put("first-token-1111111111")
	td := startDaemonWith(t, func(c *config.Config) {
		c.AuthTokenFile, c.AuthToken = file, "first-token-1111111111"
	})
	rotate := func(tok string) {
		t.Helper()
		put(tok)
		if got, err := td.d.ReloadTokens(); err != nil || strings.Join(got.Rotated, " ") != "--auth-token-file" {
			t.Fatalf("ReloadTokens = %+v, %v", got, err)
		}
	}
	ctx := context.Background()
	opts := RemoteOptions{Host: "127.0.0.1", Port: td.port, Root: td.root, TokenFile: file,
		Reconnect: ReconnectOptions{MaxAttempts: 40, InitialDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond}}
	r, err := NewRemote(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Destroy()
	changes := make(chan StatusChange, 64)
	r.OnStatusChange(func(c StatusChange) { changes <- c })
	if err := r.Write(ctx, "a.txt", []byte("before")); err != nil {
		t.Fatal(err)
	}
	// A second backend that does not reconnect keeps the first token for
	// its MCP session until the daemon refuses it.
	still := opts
	still.Reconnect = ReconnectOptions{Disabled: true}
	r2, err := NewRemote(ctx, still)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Destroy()
	cs, err := r2.MCPClient(ctx, MCPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	appendRun := func(tag string) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "echo " + tag + " >> runs.txt"}})
		if err != nil {
			return err.Error(), false
		}
		text := ""
		if len(res.Content) > 0 {
			text = res.Content[0].(*mcp.TextContent).Text
		}
		return text, !res.IsError
	}
	runs := func() string {
		b, _ := os.ReadFile(filepath.Join(td.root, "runs.txt"))
		return string(b)
	}
	if got, ok := appendRun("before"); !ok {
		t.Fatalf("an MCP call before the rotation: %s", got)
	}

	rotate("second-token-2222222222")
	waitStatus(t, changes, StatusReconnecting)
	waitStatus(t, changes, StatusConnected)
	if got, err := r.Read(ctx, "a.txt"); err != nil || string(got) != "before" {
		t.Fatalf("after the rotation: %q %v; want the backend reconnected with the new token", got, err)
	}
	if got, ok := appendRun("after"); !ok {
		t.Fatalf("an MCP call after the rotation: %s; want it sent again with the file's new token", got)
	}
	if got := runs(); got != "before\nafter\n" {
		t.Errorf("runs.txt = %q; want each call run once", got)
	}

	// The daemon takes a third token; the file is put back to the second.
	rotate("third-token-3333333333")
	put("second-token-2222222222")
	waitStatus(t, changes, StatusDisconnected) // the drop
	waitStatus(t, changes, StatusDisconnected) // the refused reconnection
	if _, err := r.Read(ctx, "a.txt"); !errcode.Is(err, errcode.ConnectionClosed) || !strings.Contains(err.Error(), "RemoteOptions.TokenFile "+file+" still holds it") {
		t.Errorf("a read after a refusal the file cannot mend: %v; want the refusal naming the file", err)
	}
	if got, ok := appendRun("refused"); ok || !strings.Contains(got, "401") || !strings.Contains(got, "RemoteOptions.TokenFile "+file+" still holds it") {
		t.Errorf("an MCP call after a refusal the file cannot mend: %q; want the 401 naming the file", got)
	}
	if got := runs(); got != "before\nafter\n" {
		t.Errorf("runs.txt = %q; a refused call ran", got)
	}
}

// TestRemoteTokenFileOptions: Token and TokenFile go separately, and a
// TokenFile that cannot be read or is empty is refused naming it.
func TestRemoteTokenFileOptions(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	ctx := context.Background()
	for _, tc := range []struct {
		opts RemoteOptions
		want string
	}{
		{RemoteOptions{Host: "127.0.0.1", Root: "/x", Token: "t", TokenFile: empty}, "go separately"},
		{RemoteOptions{Host: "127.0.0.1", Root: "/x", TokenFile: empty}, "RemoteOptions.TokenFile " + empty + " is empty"},
		{RemoteOptions{Host: "127.0.0.1", Root: "/x", TokenFile: missing}, "RemoteOptions.TokenFile cannot be read: open " + missing},
	} {
		if _, err := NewRemote(ctx, tc.opts); !errcode.Is(err, errcode.InvalidConfiguration) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want INVALID_CONFIGURATION naming %q", tc.opts, err, tc.want)
		}
	}
}

package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/daemon"
)

// startRotatingDaemon serves a workspace on a loopback port with the token
// of tokenFile (--auth-token-file, read again by ReloadTokens as on
// SIGHUP) until the test ends; it returns the daemon, its host:port and
// its root.
func startRotatingDaemon(t *testing.T, tokenFile string, sessions bool) (*daemon.Daemon, string, string) {
	t.Helper()
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	return serveDaemon(t, func(c *config.Config) {
		c.AuthTokenFile, c.AuthToken = tokenFile, strings.TrimSpace(string(tok))
		c.MCPSessions = sessions
	})
}

// rotate writes tok to file and has d read it again, as `mv` and SIGHUP.
func rotate(t *testing.T, d *daemon.Daemon, file, tok string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := d.ReloadTokens()
	if err != nil || strings.Join(got.Rotated, " ") != "--auth-token-file" {
		t.Fatalf("ReloadTokens = %+v, %v; want --auth-token-file rotated", got, err)
	}
}

// TestBridgeFollowsTokenRotation: an MCP client that spawned `agentbe-bridge
// mcp URL --token-file F` keeps working when the daemon's token is rotated
// (F replaced, SIGHUP): the first call after the rotation is refused with
// the old token, the bridge reads F again and sends it once more with the
// new one, and it runs once. A refusal that F cannot mend (it holds a
// token the daemon no longer takes) is answered with the 401 naming F, and
// the call does not run. `agentbe-bridge ssh`, a ProxyCommand started for
// each SSH connection, reads F when it starts: a connection after the
// rotation gets in with the new token.
func TestBridgeFollowsTokenRotation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("first-token-1111111111\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, addr, root := startRotatingDaemon(t, file, false)
	cs := bridged(t, "mcp", "http://"+addr+"/mcp", "--token-file", file)
	useSession(t, cs)

	ctx := context.Background()
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
		b, _ := os.ReadFile(filepath.Join(root, "runs.txt"))
		return string(b)
	}

	rotate(t, d, file, "second-token-2222222222")
	if got, ok := appendRun("after-rotation"); !ok {
		t.Fatalf("the first call after the rotation: %s; want it run with the token read again", got)
	}
	if got := runs(); got != "after-rotation\n" {
		t.Errorf("runs.txt = %q; want the call run once", got)
	}
	useSession(t, cs) // and every call after it

	// The daemon takes a third token; the file is put back to the second,
	// which the daemon no longer takes.
	rotate(t, d, file, "third-token-3333333333")
	if err := os.WriteFile(file, []byte("second-token-2222222222\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, ok := appendRun("refused")
	if ok || !strings.Contains(got, "401") || !strings.Contains(got, "--token-file "+file) {
		t.Errorf("a call whose token the file cannot mend: %q; want the 401 naming --token-file %s", got, file)
	}
	if got := runs(); got != "after-rotation\n" {
		t.Errorf("runs.txt = %q; a refused call ran", got)
	}

	// SSH through the ProxyCommand, one process per connection: started
	// after the rotation, it reads the file then.
	if err := os.WriteFile(file, []byte("third-token-3333333333\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := sshThroughBridge(t, ctx, []string{"ssh", "ws://" + addr + "/ssh", "--token-file", file}, "cat runs.txt")
	if err != nil || string(out) != "after-rotation\n" {
		t.Errorf("exec over agentbe-bridge ssh after the rotation: %v, %q", err, out)
	}
}

// TestBridgeFollowsTokenRotationInSession: with --mcp-sessions the daemon
// ends the old token's sessions at the rotation; the bridge, refused (401),
// reads the file, meets the ended session (404), opens a new one as the
// client opened the first and sends the call once more: it runs once, and
// the session goes on.
func TestBridgeFollowsTokenRotationInSession(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("first-token-1111111111\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, addr, root := startRotatingDaemon(t, file, true)
	cs := bridged(t, "mcp", "http://"+addr+"/mcp", "--token-file", file)
	useSession(t, cs)

	rotate(t, d, file, "second-token-2222222222")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "echo once >> runs.txt"}})
	if err != nil || res.IsError {
		t.Fatalf("the first call after the rotation: %v %+v; want it run in a new session", err, res)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "runs.txt")); string(b) != "once\n" {
		t.Errorf("runs.txt = %q; want the call run once", b)
	}
	useSession(t, cs)
}

// TestBridgeSSHSaysTokenRotated: an SSH connection through `agentbe-bridge
// ssh` opened with a token the daemon then rotates out is closed (4001),
// and the bridge's error carries the daemon's reason, which names the
// file, rather than only "rejected the token".
func TestBridgeSSHSaysTokenRotated(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("first-token-1111111111\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, addr, _ := startRotatingDaemon(t, file, false)
	local, remote := net.Pipe()
	code := make(chan int, 1)
	var stderr lockedBuffer
	go func() {
		code <- run(context.Background(), []string{"ssh", "ws://" + addr + "/ssh", "--token-file", file}, remote, remote, &stderr)
		remote.Close()
	}()
	conn, chans, reqs, err := ssh.NewClientConn(local, "workspace", &ssh.ClientConfig{
		User: "agent", Auth: []ssh.AuthMethod{ssh.Password("unused")}, HostKeyCallback: ssh.InsecureIgnoreHostKey(),
	})
	if err != nil {
		local.Close()
		t.Fatalf("SSH through agentbe-bridge ssh: %v (exit %d, %q)", err, <-code, stderr.String())
	}
	client := ssh.NewClient(conn, chans, reqs)
	defer client.Close()
	rotate(t, d, file, "second-token-2222222222")
	select {
	case c := <-code:
		if c != 1 || !strings.Contains(stderr.String(), "rejected the token") || !strings.Contains(stderr.String(), "--auth-token-file was reloaded") {
			t.Errorf("agentbe-bridge ssh after the rotation: exit %d, %q; want exit 1 with the daemon's reason naming --auth-token-file", c, stderr.String())
		}
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("agentbe-bridge ssh still runs 30 s after its token was rotated out")
	}
}

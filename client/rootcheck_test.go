package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// TestRemoteRootMismatch: a Remote whose Root is not the daemon's root
// fails in NewRemote, before any file or command is sent, with one line
// naming both roots and the option on each side; without the check it
// wrote into <root>/home/you/workspace/x.txt and then failed to cd.
func TestRemoteRootMismatch(t *testing.T) {
	d := startDaemon(t, "127.0.0.1:0")
	opts := d.options()
	opts.Root = "/home/you/workspace"
	b, err := NewRemote(context.Background(), opts)
	if err == nil {
		b.Destroy()
		t.Fatal("connected with another root")
	}
	if !errors.Is(err, ErrRootMismatch) || errcode.Of(err) != errcode.InvalidConfiguration {
		t.Fatalf("err %v (code %s); want ErrRootMismatch, INVALID_CONFIGURATION", err, errcode.Of(err))
	}
	want := "connect RemoteOptions.Root /home/you/workspace is not the daemon's root " + d.root +
		": the client's root and the daemon's differ; set RemoteOptions.Root to " + d.root +
		" (or a directory in it), or start the daemon with --root /home/you/workspace"
	if err.Error() != want {
		t.Errorf("got  %q\nwant %q", err.Error(), want)
	}
	if ents, _ := os.ReadDir(d.root); len(ents) != 0 {
		t.Errorf("the workspace holds %v after a refused connect", ents)
	}
}

// TestRemoteRootInsideDaemonRoot: the daemon's root spelled with a
// trailing slash, and a directory in it, connect; files, commands and MCP
// all work in that directory (MCP as a scope of the daemon's root, so the
// daemon's exact X-Root-Dir rule admits it).
func TestRemoteRootInsideDaemonRoot(t *testing.T) {
	d := startDaemon(t, "127.0.0.1:0")
	ctx := context.Background()
	for _, tc := range []struct{ root, dir string }{
		{d.root + "/", d.root},
		{d.root + "/proj", filepath.Join(d.root, "proj")},
	} {
		t.Run(tc.root, func(t *testing.T) {
			opts := d.options()
			opts.Root = tc.root
			b, err := NewRemote(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Destroy()
			if err := b.Write(ctx, "x.txt", []byte("hi")); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(filepath.Join(tc.dir, "x.txt")); err != nil || string(got) != "hi" {
				t.Fatalf("the file in %s: %q %v", tc.dir, got, err)
			}
			if out, err := b.Exec(ctx, "pwd", ExecOptions{}); err != nil || strings.TrimSpace(string(out)) != tc.dir {
				t.Errorf("pwd: %q %v; want %s", out, err, tc.dir)
			}
			cs, err := b.MCPClient(ctx, MCPOptions{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": "x.txt"}})
			if err != nil || res.IsError || len(res.Content) == 0 || res.Content[0].(*mcp.TextContent).Text != "hi" {
				t.Errorf("MCP read in %s: %v %+v", tc.dir, err, res)
			}
		})
	}
}

// TestCheckRootJudgesOnlyWhatItCan: a /health that names no absolute root
// (a proxy, an old daemon, an error, a hostile answer) leaves the judgement
// to the connection; one that names another root refuses.
func TestCheckRootJudgesOnlyWhatItCan(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		refused    bool
	}{
		{"not found", `{"error":"Not Found"}`, 404, false},
		{"no rootDir", `{"status":"ok"}`, 200, false},
		{"relative rootDir", `{"rootDir":"srv/ws"}`, 200, false},
		{"not JSON", `<html>`, 200, false},
		{"huge", `{"rootDir":"/` + strings.Repeat("a", 2<<20) + `"}`, 200, false},
		{"the root", `{"rootDir":"/srv/ws"}`, 200, false},
		{"the root, spelled with a slash", `{"rootDir":"/srv/ws/"}`, 200, false},
		{"another root", `{"rootDir":"/data"}`, 200, true},
		{"a root inside ours", `{"rootDir":"/srv/ws/a"}`, 200, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var auth string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				auth = r.Header.Get("Authorization")
				if r.URL.Path != "/health" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
			p, _ := strconv.Atoi(port)
			c := &remoteConn{opts: RemoteOptions{Host: host, Port: p, Root: "/srv/ws", Token: "tok", DialTimeout: 5e9}}
			err := c.checkRoot(context.Background())
			if (err != nil) != tc.refused {
				t.Fatalf("checkRoot: %v; refused want %v", err, tc.refused)
			}
			if err != nil && !errors.Is(err, ErrRootMismatch) {
				t.Errorf("err %v", err)
			}
			if auth != "Bearer tok" {
				t.Errorf("Authorization %q", auth)
			}
		})
	}
}

// TestMCPConnectSaysWhy: when MCP's connect is refused (here a daemon
// that /health did not describe, so the client's own root went out as
// X-Root-Dir), the error carries the daemon's answer, not only "MCP
// connect failed".
func TestMCPConnectSaysWhy(t *testing.T) {
	d := startDaemon(t, "127.0.0.1:0")
	conn := &remoteConn{opts: RemoteOptions{Host: "127.0.0.1", Port: d.port, Root: "/home/you/workspace", Token: d.token}, stop: make(chan struct{})}
	drv := &remoteDriver{conn: conn, dir: "/home/you/workspace"}
	b := &Remote{base: newBase(drv, StatusConnected, nil, LogOptions{}), drv: drv}
	_, err := b.MCPClient(context.Background(), MCPOptions{})
	if err == nil {
		t.Fatal("MCP connected with another root")
	}
	if msg := err.Error(); !strings.Contains(msg, "Root directory mismatch") || !strings.Contains(msg, "Server is configured for "+d.root+", not /home/you/workspace") {
		t.Errorf("MCP's error does not say why: %q", msg)
	}
}

// TestRemoteDestroyAtOnce: Destroy right after NewRemote, before the
// supervisor first looked at the connection, ends it cleanly (it read a
// nil client and crashed the process).
func TestRemoteDestroyAtOnce(t *testing.T) {
	d := startDaemon(t, "127.0.0.1:0")
	for range 20 {
		b, err := NewRemote(context.Background(), d.options())
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
}

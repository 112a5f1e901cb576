package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/client"
)

// A local backend: files and commands on this machine, through the
// daemon's own confinement and sandbox.
func ExampleNewLocal() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	b, err := client.NewLocal(client.LocalOptions{Root: dir, Isolation: "software"})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Destroy()
	b.Write(ctx, "notes/todo.md", []byte("- ship it\n"))
	out, _ := b.Exec(ctx, "cat notes/todo.md | wc -l", client.ExecOptions{})
	fmt.Print(strings.TrimSpace(string(out)), "\n")
	_, err = b.Read(ctx, "../outside")
	fmt.Println(err != nil)
	// Output:
	// 1
	// true
}

// A scope: a subdirectory with its own environment; paths cannot leave it.
func ExampleBackend_scope() {
	ctx := context.Background()
	m, _ := client.NewMemory(client.MemoryOptions{RootPrefix: "/ws"})
	defer m.Destroy()
	alice, _ := m.Scope("users/alice", client.ScopeOptions{Env: map[string]string{"USER_ID": "alice"}})
	alice.Write(ctx, "profile.json", []byte(`{"name":"Alice"}`))
	data, _ := m.Read(ctx, "users/alice/profile.json")
	fmt.Println(alice.RootDir(), string(data))
	// Output: /ws/users/alice {"name":"Alice"}
}

// MCP: the backend's tools through a go-sdk client session (here served in
// this process; without InProcess a local backend spawns agent-backend).
func ExampleBackend_mcp() {
	ctx := context.Background()
	m, _ := client.NewMemory(client.MemoryOptions{RootPrefix: "/ws", Data: map[string][]byte{"hello.txt": []byte("hi")}})
	defer m.Destroy()
	cs, err := m.MCPClient(ctx, client.MCPOptions{InProcess: true})
	if err != nil {
		log.Fatal(err)
	}
	res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": "hello.txt"}})
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	// Output: hi
}

// A pool: one backend per key, reused while connected.
func ExamplePool() {
	ctx := context.Background()
	pool, _ := client.NewPool(client.PoolOptions[client.MemoryOptions]{
		Defaults: client.MemoryOptions{RootPrefix: "/ws"},
		New:      func(_ context.Context, o client.MemoryOptions) (client.Backend, error) { return client.NewMemory(o) },
	})
	defer pool.Close()
	pool.With(ctx, "user-1", nil, func(b client.Backend) error { return b.Write(ctx, "a.txt", []byte("kept")) })
	pool.With(ctx, "user-1", nil, func(b client.Backend) error {
		data, err := b.Read(ctx, "a.txt")
		fmt.Println(string(data), err)
		return err
	})
	fmt.Println(pool.Stats())
	// Output:
	// kept <nil>
	// 1 backends (0 active, 1 idle)
}

// A remote backend: a daemon started with
//
//	agent-backend daemon --root /srv/ws --auth-token-file ~/.agentbe-token
//
// reached over SSH-over-WebSocket (files, exec) and HTTP (MCP).
func ExampleNewRemote() {
	ctx := context.Background()
	token, _ := os.ReadFile(os.ExpandEnv("$HOME/.agentbe-token"))
	r, err := client.NewRemote(ctx, client.RemoteOptions{
		Host: "127.0.0.1", Port: 3001, Root: "/srv/ws", Token: strings.TrimSpace(string(token)),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Destroy()
	r.OnStatusChange(func(c client.StatusChange) { log.Printf("backend %s → %s", c.From, c.To) })
	out, err := r.Exec(ctx, "git status --short", client.ExecOptions{})
	fmt.Println(string(out), err)
}

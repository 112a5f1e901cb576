package client

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/mcphttp"
	"github.com/agentbe/agentbe-daemon/registry"
	"github.com/agentbe/agentbe-daemon/wstools"
)

// localMCP returns the transport to an MCP server for a Local backend's
// workspace: the agent-backend binary spawned over stdio
// (`daemon --local-only --root ...`), or with opts.InProcess the daemon's own
// MCP server in this process.
func localMCP(ctx context.Context, d *fsDriver, opts MCPOptions) (mcp.Transport, error) {
	if opts.InProcess {
		return inProcessMCP(d, opts)
	}
	return nil, notImplemented("mcp", d.kindName) // TODO(issue 15): spawn the binary
}

// memoryMCP is localMCP for a Memory backend (`--backend memory`).
func memoryMCP(ctx context.Context, d *fsDriver, opts MCPOptions) (mcp.Transport, error) {
	if opts.InProcess {
		return inProcessMCP(d, opts)
	}
	return nil, notImplemented("mcp", d.kindName) // TODO(issue 15): spawn the binary
}

// inProcessMCP serves the driver's workspace (narrowed to opts.ScopePath)
// with the daemon's own MCP server and workspace tools, over a pair of pipes
// in this process: the same tools, texts and fast path as the binary, with no
// process to spawn. Closing the returned transport ends the session and the
// server; the workspace and executor stay the backend's.
func inProcessMCP(d *fsDriver, opts MCPOptions) (mcp.Transport, error) {
	ws := d.ws
	var scope fsops.Workspace
	if opts.ScopePath != "" {
		s, err := d.ws.Scope(opts.ScopePath)
		if err != nil {
			return nil, err
		}
		scope, ws = s, s
	}
	reg := registry.New(registry.Options{})
	if err := reg.Set("workspace", wstools.Tools(ws, wstools.ExecEnv{Executor: d.exe})); err != nil {
		return nil, err
	}
	srv, err := mcphttp.New(mcphttp.Options{Workspace: ws, Registry: reg, RootDir: ws.Root()})
	if err != nil {
		return nil, &errcode.Error{Code: errcode.InvalidConfiguration, Op: "mcp", Msg: err.Error(), Err: err}
	}
	toServerR, toServerW := io.Pipe()
	fromServerR, fromServerW := io.Pipe()
	t := &pipeTransport{IOTransport: mcp.IOTransport{Reader: fromServerR, Writer: toServerW}, served: make(chan struct{})}
	t.close = func() error {
		toServerW.Close()
		srv.Close()
		<-t.served
		fromServerR.Close()
		if scope != nil {
			scope.Close()
		}
		return nil
	}
	go func() {
		defer close(t.served)
		srv.ServeStdio(context.Background(), toServerR, fromServerW)
		fromServerW.Close()
	}()
	return t, nil
}

// pipeTransport is the client end of an in-process server; Close stops the
// server and waits for it, so nothing outlives the backend's Destroy.
type pipeTransport struct {
	mcp.IOTransport
	served chan struct{}
	once   sync.Once
	close  func() error
	err    error
}

func (t *pipeTransport) Close() error {
	t.once.Do(func() { t.err = t.close() })
	if errors.Is(t.err, io.ErrClosedPipe) {
		return nil
	}
	return t.err
}

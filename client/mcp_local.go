//go:build linux

package client

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/face/mcphttp"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/resolvepath"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
	"github.com/agentbe/agentbe-daemon/tools/workspace"
)

// localMCP returns the MCP transport maker of a Local backend: the
// agent-backend binary (bin, or "agent-backend" on PATH) spawned over stdio
// as `daemon --local-only --root DIR` with the backend's isolation, shell and
// policy, or with MCPOptions.InProcess the daemon's own MCP server in this
// process. A binary inside the workspace is refused (INVALID_CONFIGURATION).
func localMCP(bin, isolation, shell string, allowDangerous bool) func(context.Context, *fsDriver, MCPOptions) (mcp.Transport, error) {
	return func(_ context.Context, d *fsDriver, opts MCPOptions) (mcp.Transport, error) {
		if opts.InProcess {
			return inProcessMCP(d, opts)
		}
		path, err := lookDaemon(bin)
		if err != nil {
			return nil, err
		}
		// The binary runs outside the sandbox: one the agent's commands
		// can replace would run their code with this process's rights.
		if inside, err := resolvepath.Within(d.ws.Root(), path); err != nil || inside {
			return nil, &errcode.Error{Code: errcode.InvalidConfiguration, Op: "mcp", Path: path,
				Msg: "the agent-backend binary lies inside the workspace " + d.ws.Root() + ", where the agent can replace it; use one outside it (DaemonBinary, or PATH)", Err: err}
		}
		args := []string{"daemon", "--local-only", "--root", d.ws.Root(), "--isolation", isolation}
		if opts.ScopePath != "" {
			if _, err := d.ws.Resolve(opts.ScopePath); err != nil {
				return nil, err
			}
			args = append(args, "--scope-path", opts.ScopePath)
		}
		if shell != "" && shell != "auto" {
			args = append(args, "--shell", shell)
		}
		if allowDangerous {
			args = append(args, "--block-dangerous=false")
		}
		return &mcp.CommandTransport{Command: exec.Command(path, args...)}, nil
	}
}

// memoryMCP is the MCP transport maker of a Memory backend: with InProcess
// the daemon's MCP server over this backend's own tree; otherwise the
// agent-backend binary spawned as `--backend memory --rootDir PREFIX`, as
// the npm client does, which serves an in-memory tree of its own (what
// this backend holds is not in it).
func memoryMCP(bin string) func(context.Context, *fsDriver, MCPOptions) (mcp.Transport, error) {
	return func(_ context.Context, d *fsDriver, opts MCPOptions) (mcp.Transport, error) {
		if opts.InProcess {
			return inProcessMCP(d, opts)
		}
		path, err := lookDaemon(bin)
		if err != nil {
			return nil, err
		}
		args := []string{"--backend", "memory", "--rootDir", d.ws.Root()}
		if opts.ScopePath != "" {
			if _, err := d.ws.Resolve(opts.ScopePath); err != nil {
				return nil, err
			}
			args = append(args, "--scope-path", opts.ScopePath)
		}
		return &mcp.CommandTransport{Command: exec.Command(path, args...)}, nil
	}
}

// lookDaemon finds the agent-backend binary: bin, or "agent-backend" on
// PATH.
func lookDaemon(bin string) (string, error) {
	if bin == "" {
		bin = "agent-backend"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", &errcode.Error{Code: errcode.MissingUtilities, Op: "mcp", Path: bin,
			Msg: "the agent-backend binary is not on PATH (set the options' DaemonBinary, or use MCPOptions{InProcess: true})", Err: err}
	}
	return path, nil
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
	var exe sandbox.Executor // nil for Memory: its tools have no exec
	if d.exe != nil {
		exe = d.exe.Executor
	}
	if err := reg.Set("workspace", workspace.Tools(ws, workspace.ExecEnv{Executor: exe})); err != nil {
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

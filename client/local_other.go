//go:build !linux

package client

import (
	"context"
	"runtime"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// NewLocal needs the daemon's sandbox, which runs on Linux only: here it
// is NOT_IMPLEMENTED. Remote reaches a daemon from any system, and Memory
// works everywhere.
func NewLocal(opts LocalOptions) (*Local, error) {
	return nil, &errcode.Error{Code: errcode.NotImplemented, Op: "new local backend",
		Msg: "the local backend runs commands in the daemon's sandbox, which is Linux only, not " + runtime.GOOS + "; use a Remote backend"}
}

// Isolation is the effective sandbox mode; no Local exists off Linux.
func (l *Local) Isolation() (mode, reason string) { return "", "" }

// localExec is a Local backend's executor, which does not exist off Linux.
type localExec struct{}

func (*localExec) run(context.Context, fsops.Workspace, string, ExecOptions) ([]byte, error) {
	return nil, notImplemented("exec", "local")
}

// memoryMCP: off Linux there is no agent-backend binary to spawn and no
// workspace tools to serve in process (they run commands through the
// sandbox), so a Memory backend's MCPTransport is NOT_IMPLEMENTED.
func memoryMCP(string) func(context.Context, *fsDriver, MCPOptions) (mcp.Transport, error) {
	return nil
}

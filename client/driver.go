package client

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// driver is what a backend kind implements: the operations on one root
// directory (the workspace, or a scope of it), with paths exactly as the caller
// gave them. base wraps a driver with everything the kinds share (status,
// closeables, scopes, env merging, logging, the destroyed check), so a driver
// holds no lifecycle rule of its own.
//
// A driver resolves paths with fsops.ResolvePath (or through an fsops
// Workspace, which does), so the path rules have one home. Its errors are
// *errcode.Error naming the operation and the path or command as given.
type driver interface {
	kind() string
	root() string

	read(ctx context.Context, p string) ([]byte, error)
	write(ctx context.Context, p string, data []byte) error
	readdir(ctx context.Context, p string) ([]string, error)
	mkdir(ctx context.Context, p string, opts MkdirOptions) error
	exists(ctx context.Context, p string) (bool, error)
	stat(ctx context.Context, p string) (FileInfo, error)
	rm(ctx context.Context, p string, opts RmOptions) error
	rename(ctx context.Context, from, to string) error
	touch(ctx context.Context, p string) error
	// exec gets opts.Env already merged (backend, scopes, call).
	exec(ctx context.Context, command string, opts ExecOptions) ([]byte, error)

	// scope returns the driver of the subdirectory rel (a client path under
	// the rules, checked against this driver's root: an escape is
	// PATH_ESCAPE_ATTEMPT naming rel). The scope's directory is created by
	// its first write, once even under concurrent writers.
	scope(rel string) (driver, error)

	// mcpTransport returns a transport to an MCP server for this driver's
	// root, narrowed to opts.ScopePath when set; base tracks it.
	mcpTransport(ctx context.Context, opts MCPOptions) (mcp.Transport, error)

	// close releases the root driver's resources (connections, descriptors,
	// executors, pending reconnects); base calls it once, from Destroy of the
	// root backend, never for a scope's driver.
	close() error
}

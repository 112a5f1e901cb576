package client

import (
	"context"
	"io"
	"io/fs"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Status is a backend's connection state ("Connection Lifecycle" of the
// specification). Every kind has the same values and the same API, so one
// status indicator works for all of them.
type Status string

// The status values of the specification.
const (
	StatusConnected    Status = "connected"
	StatusConnecting   Status = "connecting"
	StatusDisconnected Status = "disconnected" // remote only
	StatusReconnecting Status = "reconnecting" // remote only
	StatusDestroyed    Status = "destroyed"
)

// StatusChange is one transition, as a subscriber receives it. Err is the
// cause of a transition to disconnected or reconnecting, when there is one.
type StatusChange struct {
	From, To Status
	Err      error
}

// Backend is a workspace: file operations, command execution, scopes, MCP
// access, status and cleanup. Local, Memory, Remote and Scoped implement it.
//
// Paths follow the specification's rules (docs/protocol.md, the path table):
// relative paths are under the backend's root, an absolute path inside the
// root is used as is, any other absolute path is taken as relative, and a path
// that would leave the root (or the scope) fails with PATH_ESCAPE_ATTEMPT
// naming the path as given. Every method is safe for concurrent use. After
// Destroy every operation fails with ErrDestroyed.
type Backend interface {
	// Kind is "local", "memory", "remote" or "scoped".
	Kind() string
	// RootDir is the absolute root this backend's paths are relative to: the
	// workspace, or the scope's directory inside it.
	RootDir() string

	// Read returns a file's contents (use string(b) for text).
	Read(ctx context.Context, path string) ([]byte, error)
	// Write creates or replaces a file, creating its parent directories.
	Write(ctx context.Context, path string, content []byte) error
	// Readdir returns the names (not paths) of a directory's immediate children.
	Readdir(ctx context.Context, path string) ([]string, error)
	// Mkdir creates a directory; with Recursive, its parents too (mkdir -p).
	Mkdir(ctx context.Context, path string, opts MkdirOptions) error
	// Exists reports whether the path exists; a missing path is (false, nil).
	Exists(ctx context.Context, path string) (bool, error)
	// Stat describes a file or directory.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// Rm removes a file, or a directory with Recursive; with Force a missing
	// path is not an error.
	Rm(ctx context.Context, path string, opts RmOptions) error
	// Rename moves a file or directory; both paths are checked.
	Rename(ctx context.Context, oldPath, newPath string) error
	// Touch creates an empty file if none exists; it never truncates one.
	Touch(ctx context.Context, path string) error

	// Exec runs a shell command in the backend's root (or opts.Dir inside it)
	// with HOME set to that directory, and returns its stdout. A non-zero exit
	// is an EXEC_FAILED error wrapping *ExitError (stderr, else stdout, in its
	// message); a blocked command is DANGEROUS_OPERATION; an empty one
	// EMPTY_COMMAND. ctx bounds it: when ctx is done the command is killed.
	// Memory backends return NOT_IMPLEMENTED.
	Exec(ctx context.Context, command string, opts ExecOptions) ([]byte, error)

	// Scope returns a backend restricted to the subdirectory path of this one
	// ("Scoping"): paths are translated into it and may not leave it, exec runs
	// in it, env merges over this backend's, status is this backend's.
	Scope(path string, opts ScopeOptions) (*Scoped, error)

	// MCPTransport returns a transport to an MCP server serving this backend's
	// workspace (or opts.ScopePath inside it); MCPClient connects a client
	// session over one. Both are tracked and closed by Destroy. MCP requests
	// are never retried by this package.
	MCPTransport(ctx context.Context, opts MCPOptions) (mcp.Transport, error)
	MCPClient(ctx context.Context, opts MCPOptions) (*mcp.ClientSession, error)

	// Status is the current state; OnStatusChange calls fn on every transition
	// (in order, never concurrently for one subscriber) until the returned
	// cancel func is called.
	Status() Status
	OnStatusChange(fn func(StatusChange)) (cancel func())

	// Track registers c to be closed by Destroy (a scope delegates to its
	// root backend). Tracking on a destroyed backend closes c at once.
	Track(c io.Closer)
	// Destroy closes every tracked resource and MCP client, cancels pending
	// reconnection, fails pending operations, and sets the status to
	// destroyed. It is idempotent. Scopes of a destroyed backend are orphaned,
	// not destroyed; destroying a scope releases nothing of its parent.
	Destroy() error
}

// FileInfo is what Stat returns.
type FileInfo struct {
	Name    string
	Size    int64
	Mode    fs.FileMode // includes the type bits
	ModTime time.Time
}

// IsDir reports whether the entry is a directory.
func (fi FileInfo) IsDir() bool { return fi.Mode.IsDir() }

// IsFile reports whether the entry is a regular file.
func (fi FileInfo) IsFile() bool { return fi.Mode.IsRegular() }

// MkdirOptions are Mkdir's options.
type MkdirOptions struct {
	Recursive bool
}

// RmOptions are Rm's options.
type RmOptions struct {
	Recursive bool // remove a directory and everything under it
	Force     bool // a missing path is not an error
}

// ExecOptions are Exec's options.
type ExecOptions struct {
	// Env adds variables for this command, over the scope's (which are over
	// the backend's).
	Env map[string]string
	// Dir is the working directory, a path under the rules above; empty means
	// the backend's root. HOME is set to it.
	Dir string
	// Stdin is the command's standard input; nil means empty.
	Stdin io.Reader
}

// ScopeOptions are Scope's options.
type ScopeOptions struct {
	// Env applies to every command run in the scope (merged over the
	// parent's; per-command Env merges over it).
	Env map[string]string
	// Log receives the scope's operations (default: the parent's logger).
	Log OpLogger
}

// MCPOptions are MCPTransport's and MCPClient's options.
type MCPOptions struct {
	// ScopePath restricts the server to a subdirectory of the backend's root.
	ScopePath string
	// InProcess serves a Local or Memory backend's tools from this process
	// over an in-memory transport, instead of spawning the agent-backend
	// binary. Remote backends ignore it.
	InProcess bool
	// Client is the MCP client to connect with (its name, handlers); nil
	// means a client named "agentbe-go-client".
	Client *mcp.Client
}

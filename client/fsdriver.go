package client

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// fsDriver is the driver of the in-process kinds: the operations are the
// daemon's own doors, an fsops.Workspace (a directory for Local, the
// in-memory tree for Memory) and, for Local, the sandbox's executor
// (local_linux.go). Path rules, confinement, scope creation on first write
// and isolation are theirs; this file only adapts shapes.
type fsDriver struct {
	kindName string
	ws       fsops.Workspace
	exe      *localExec // Local's executor; nil: exec is NOT_IMPLEMENTED
	// owner releases what the root driver owns (the root workspace, the
	// executor); nil on a scope's driver, whose workspace handle is closed
	// with the root's (fsops closes a workspace's scopes with it).
	owner func() error
	mcp   func(ctx context.Context, d *fsDriver, opts MCPOptions) (mcp.Transport, error)
}

func (d *fsDriver) kind() string { return d.kindName }
func (d *fsDriver) root() string { return d.ws.Root() }

func (d *fsDriver) read(_ context.Context, p string) ([]byte, error) {
	return d.ws.ReadFile(p)
}

func (d *fsDriver) write(_ context.Context, p string, data []byte) error {
	return d.ws.WriteFile(p, data)
}

func (d *fsDriver) readdir(_ context.Context, p string) ([]string, error) {
	infos, err := d.ws.ReadDirTypes(p)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(infos))
	for i, fi := range infos {
		names[i] = fi.Name
	}
	return names, nil
}

func (d *fsDriver) mkdir(_ context.Context, p string, opts MkdirOptions) error {
	return d.ws.Mkdir(p, opts.Recursive)
}

func (d *fsDriver) exists(_ context.Context, p string) (bool, error) {
	return d.ws.Exists(p)
}

func (d *fsDriver) stat(_ context.Context, p string) (FileInfo, error) {
	fi, err := d.ws.Stat(p)
	if err != nil {
		return FileInfo{}, err
	}
	return FileInfo{Name: fi.Name, Size: fi.Size, Mode: fi.Mode, ModTime: fi.ModTime}, nil
}

func (d *fsDriver) rm(_ context.Context, p string, opts RmOptions) error {
	return d.ws.Remove(p, fsops.RemoveOptions{Recursive: opts.Recursive, Force: opts.Force})
}

func (d *fsDriver) rename(_ context.Context, from, to string) error {
	return d.ws.Rename(from, to)
}

func (d *fsDriver) touch(_ context.Context, p string) error {
	return d.ws.Touch(p)
}

// exec runs the command through the sandbox in the driver's workspace (the
// root or a scope), in opts.Dir when given (resolved by the workspace, so it
// cannot leave it).
func (d *fsDriver) exec(ctx context.Context, command string, opts ExecOptions) ([]byte, error) {
	if d.exe == nil {
		return nil, notImplemented("exec", d.kindName)
	}
	if strings.TrimSpace(command) == "" {
		return nil, &errcode.Error{Code: errcode.EmptyCommand, Op: "exec", Msg: "empty command"}
	}
	// A Dir runs the command in that directory, bound to it (a scope of the
	// workspace, which the sandbox opens once and binds by descriptor).
	ws := d.ws
	if opts.Dir != "" {
		scope, err := d.ws.Scope(opts.Dir)
		if err != nil {
			return nil, err
		}
		defer scope.Close()
		ws = scope
	}
	return d.exe.run(ctx, ws, command, opts)
}

// execFailed is the EXEC_FAILED error of every kind: stderr, else stdout, as
// the message ("Command Execution": the error should include them).
func execFailed(command string, xe *ExitError) error {
	msg := strings.TrimSpace(string(xe.Stderr))
	if msg == "" {
		msg = strings.TrimSpace(string(xe.Stdout))
	}
	if msg == "" {
		msg = xe.Error()
	} else {
		msg = xe.Error() + ": " + msg
	}
	return &errcode.Error{Code: errcode.ExecFailed, Op: "exec", Command: command, Msg: msg, Err: xe}
}

func (d *fsDriver) scope(rel string) (driver, error) {
	ws, err := d.ws.Scope(rel)
	if err != nil {
		return nil, err
	}
	return &fsDriver{kindName: d.kindName, ws: ws, exe: d.exe, mcp: d.mcp}, nil
}

func (d *fsDriver) mcpTransport(ctx context.Context, opts MCPOptions) (mcp.Transport, error) {
	if d.mcp == nil {
		return nil, notImplemented("mcp", d.kindName)
	}
	return d.mcp(ctx, d, opts)
}

func (d *fsDriver) close() error {
	if d.owner == nil {
		return nil
	}
	return d.owner()
}

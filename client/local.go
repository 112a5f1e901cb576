package client

import (
	"errors"
	"path/filepath"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// LocalOptions configure a Local backend ("Filesystem Backend (Local)").
type LocalOptions struct {
	// Root is the workspace directory (required; it must exist). A relative
	// path is made absolute against the current directory.
	Root string
	// Isolation is the sandbox mode: "" or "auto" (bwrap when it works, else
	// software), "bwrap" (an error if bwrap cannot run), "software", "none".
	Isolation string
	// AllowDangerous turns the command safety policy off; it is on by default.
	AllowDangerous bool
	// MaxOutput caps each of stdout and stderr of Exec (head and tail kept,
	// with a notice giving the original length); 0 is the sandbox default.
	MaxOutput int64
	// Shell is "auto" (bash, else sh), "bash" or "sh".
	Shell string
	// Env applies to every command (per-scope and per-call Env merge over it).
	Env map[string]string
	// Log is the operations log.
	Log LogOptions
	// DaemonBinary is the agent-backend binary MCPTransport spawns; empty
	// means "agent-backend" on PATH. It runs outside the sandbox, so one
	// inside Root (where the agent could replace it) is refused.
	DaemonBinary string
}

// Local is a backend on this machine's file system: files through the
// daemon's fsops door, commands through its sandbox door, in this process.
// Its status is connected until Destroy.
type Local struct {
	*base
	opts LocalOptions
}

// NewLocal opens the workspace and builds the executor. Bad options are
// INVALID_CONFIGURATION errors naming the option.
func NewLocal(opts LocalOptions) (*Local, error) {
	if opts.Root == "" {
		return nil, &errcode.Error{Code: errcode.InvalidConfiguration, Op: "new local backend", Msg: "LocalOptions.Root is required"}
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, &errcode.Error{Code: errcode.InvalidConfiguration, Op: "new local backend", Path: opts.Root, Msg: "LocalOptions.Root: " + err.Error()}
	}
	mode, err := sandbox.ParseMode(opts.Isolation)
	if err != nil {
		return nil, &errcode.Error{Code: errcode.InvalidConfiguration, Op: "new local backend", Msg: "LocalOptions.Isolation: " + err.Error(), Err: err}
	}
	shell, err := sandbox.ParseShell(opts.Shell)
	if err != nil {
		return nil, &errcode.Error{Code: errcode.InvalidConfiguration, Op: "new local backend", Msg: "LocalOptions.Shell: " + err.Error(), Err: err}
	}
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		return nil, err
	}
	exe, err := sandbox.New(sandbox.Config{
		Mode:          mode,
		Shell:         shell,
		WorkspaceRoot: ws.Root(),
		Policy:        sandbox.PolicyConfig{Disabled: opts.AllowDangerous},
		OutputLimit:   opts.MaxOutput,
	})
	if err != nil {
		ws.Close()
		return nil, err
	}
	drv := &fsDriver{kindName: "local", ws: ws, exe: exe, mcp: localMCP(opts.DaemonBinary, string(exe.Mode()), opts.Shell, opts.AllowDangerous)}
	drv.owner = func() error { return errors.Join(exe.Close(), ws.Close()) }
	l := &Local{opts: opts}
	l.base = newBase(drv, StatusConnected, opts.Env, opts.Log)
	return l, nil
}

// Isolation is the effective sandbox mode (never "auto") and why it was chosen.
func (l *Local) Isolation() (mode, reason string) {
	exe := l.base.drv.(*fsDriver).exe
	return string(exe.Mode()), exe.Reason()
}

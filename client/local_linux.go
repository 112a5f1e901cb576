//go:build linux

package client

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

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
	drv := &fsDriver{kindName: "local", ws: ws, exe: &localExec{exe}, mcp: localMCP(opts.DaemonBinary, string(exe.Mode()), opts.Shell, opts.AllowDangerous)}
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

// localExec is a Local backend's executor: the daemon's sandbox.
type localExec struct{ sandbox.Executor }

// run runs command in ws (the backend's workspace or a scope of it) and
// maps the result to the contract's errors.
func (x *localExec) run(ctx context.Context, ws fsops.Workspace, command string, opts ExecOptions) ([]byte, error) {
	res, err := x.Run(ctx, sandbox.Request{
		Command:   command,
		Workspace: ws,
		Env:       opts.Env,
		Stdin:     opts.Stdin,
	})
	if err != nil {
		return nil, err
	}
	stdout := sandbox.WithTruncationNotice(res.Stdout, res.StdoutSize)
	stderr := sandbox.WithTruncationNotice(res.Stderr, res.StderrSize)
	if res.TimedOut || ctx.Err() != nil {
		cause := ctx.Err()
		if cause == nil {
			cause = context.DeadlineExceeded
		}
		return stdout, &errcode.Error{Code: errcode.Timeout, Op: "exec", Command: command, Msg: "command killed: " + cause.Error(),
			Err: errors.Join(cause, &ExitError{ExitCode: res.ExitCode, Stdout: stdout, Stderr: stderr})}
	}
	if res.ExitCode != 0 {
		return stdout, execFailed(command, &ExitError{ExitCode: res.ExitCode, Stdout: stdout, Stderr: stderr})
	}
	return stdout, nil
}

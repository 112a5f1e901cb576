package fsops

import "github.com/agentbe/agentbe-daemon/errcode"

// WorkDir is the one rule for the working directory a client names for a
// command (exec's, system.run's and process_start's "cwd", and the page
// directory a tool site's command runs in): "" and "." are ws itself; any
// other path is resolved as every client path is (an escape is
// PATH_ESCAPE_ATTEMPT naming it, a symlink followed only while it stays
// inside ws) and must name an existing directory of ws: else the error of
// Resolve or Stat, or NOT_A_DIRECTORY. dir is that directory as a scope of
// ws: a command bound to its cwd runs in it (sandbox.Request.Workspace,
// bound by descriptor), a command bounded by ws is given dir.Root() as its
// sandbox.Request.Dir. release closes the scope; it is ws itself, which
// release leaves open, for "" and ".".
//
// TestCwdRuleHasOneHome fails on a file that resolves a cwd without it.
func WorkDir(ws Workspace, cwd string) (dir Workspace, release func(), err error) {
	if cwd == "" || cwd == "." {
		return ws, func() {}, nil
	}
	if _, err := ws.Resolve(cwd); err != nil {
		return nil, nil, err
	}
	fi, err := ws.Stat(cwd)
	if err != nil {
		return nil, nil, err
	}
	if !fi.IsDir() {
		return nil, nil, &errcode.Error{Code: errcode.NotADirectory, Op: "cwd", Path: cwd, Msg: "not a directory"}
	}
	sc, err := ws.Scope(cwd)
	if err != nil {
		return nil, nil, err
	}
	return sc, func() { _ = sc.Close() }, nil
}

// IsCwdNotDir reports whether err is WorkDir's refusal of a cwd that
// exists but is no directory, which a tool may word its own way.
func IsCwdNotDir(err error) bool {
	e, ok := err.(*errcode.Error)
	return ok && e.Code == errcode.NotADirectory && e.Op == "cwd"
}

//go:build linux

package sandbox

import "github.com/agentbe/agentbe-daemon/sandbox/policy"

// WorkspaceProcesses returns the host pids of the processes ex runs for the
// workspace now: every command it started that has not ended (exec,
// SSH sessions, background processes) and every descendant of one, as the
// process table shows them at this moment. within, when not "", keeps only
// the commands whose boundary (Request.Boundary, or the Workspace's root)
// is within or below it: a scope's own commands. It returns nil for an
// executor of another kind, or none running.
//
// This is the one answer to "is this process the workspace's?" (previews
// reach only ports that such a process listens on). A process that left
// its command's tree (a double fork reparented to init or to the daemon as
// subreaper) is not counted: it is no longer the command's.
func WorkspaceProcesses(ex Executor, within string) []int {
	e, ok := ex.(*executor)
	if !ok {
		return nil
	}
	return e.workspaceProcesses(within)
}

func (e *executor) workspaceProcesses(scope string) []int {
	e.mu.Lock()
	var roots []int
	for c := range e.running {
		// A command not yet started has no pid; one untracked only after
		// Wait reaped it, so a tracked pid cannot have been reused.
		if pid := int(c.pid.Load()); pid > 0 && (scope == "" || policy.Within(scope, c.boundary)) {
			roots = append(roots, pid)
		}
	}
	e.mu.Unlock()
	if len(roots) == 0 {
		return nil
	}
	return append(roots, descendantsOf(scanProc(), roots)...)
}

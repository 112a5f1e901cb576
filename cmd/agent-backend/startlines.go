package main

import (
	"log/slog"

	"github.com/agentbe/agentbe-daemon/config"
)

// rootCommandsHint is the start-up warning's hint when commands would run
// as uid 0: the flag, and what it changes.
// (It names no tool: TestSecondSignalExitsAtOnce reads "exec" in the log as
// the sign that its call runs.)
const rootCommandsHint = "--run-as <user>: the agent's commands, background processes and upstream servers run with that user's uid, gid and groups, " +
	"so they reach only the files that user may; the daemon keeps root for its own files (host key, audit log)"

// warnRootCommands logs one warning when the daemon is root (euid 0), serves
// a workspace on disk (the memory backend runs no commands) and --run-as is
// not set: every command the agent runs would be root, and isolation
// confines what it sees, not who it is (docs/security.md).
func warnRootCommands(log *slog.Logger, cfg config.Config, euid int) {
	if euid != 0 || cfg.RunAs != "" || cfg.Backend != "filesystem" {
		return
	}
	log.Warn("commands will run as root (uid 0): the daemon is root and --run-as is not set", "hint", rootCommandsHint)
}

// logStateFiles logs one line listing what the daemon will write outside
// the workspace and where (config.Config.StateFiles: the SSH host key, the
// upstream caches, the audit log), with --state-dir, which holds those
// whose own flags are not given.
func logStateFiles(log *slog.Logger, cfg config.Config) {
	files := cfg.StateFiles()
	if len(files) == 0 {
		log.Info("files the daemon writes outside the workspace: none", "state_dir", cfg.StateDir)
		return
	}
	args := []any{"state_dir", cfg.StateDir}
	for _, f := range files {
		args = append(args, f.What, f.Path)
	}
	log.Info("files the daemon writes outside the workspace", args...)
}

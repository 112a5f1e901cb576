package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"slices"
	"strconv"
	"syscall"

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

// warnRunAsCannotWrite logs one warning when --run-as names a user who
// cannot write the workspace root: the root the daemon creates, or one a
// root user made, is root's (0755), and every command then fails to
// write with "Permission denied" while the file tools, which write as the
// daemon's user, succeed. The warning names the user, the root's owner
// and mode, and the chown that fixes it.
func warnRunAsCannotWrite(log *slog.Logger, cfg config.Config) {
	if cfg.RunAs == "" || cfg.Backend != "filesystem" {
		return
	}
	u, err := user.Lookup(cfg.RunAs)
	if err != nil {
		return // config.Validate and the sandbox say so
	}
	fi, err := os.Stat(cfg.Root)
	if err != nil {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || runAsMayWrite(u, st) {
		return
	}
	owner := strconv.FormatUint(uint64(st.Uid), 10)
	if o, err := user.LookupId(owner); err == nil {
		owner = o.Username
	}
	log.Warn(fmt.Sprintf("commands run as %s (--run-as) cannot write the workspace root", u.Username),
		"root", cfg.Root, "owner", owner, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()),
		"hint", fmt.Sprintf("chown %s %s (the file tools and SFTP write as the daemon's user, so their files stay %s's)", u.Username, cfg.Root, currentUser()))
}

// runAsMayWrite says whether u may write and enter a directory of st by its
// mode bits: as its owner, through its group (u's primary group or one of
// its supplementary groups), or as anyone.
func runAsMayWrite(u *user.User, st *syscall.Stat_t) bool {
	const w, x = 0o2, 0o1
	mode := st.Mode & 0o777
	may := func(bits uint32) bool { return bits&(w|x) == w|x }
	if strconv.FormatUint(uint64(st.Uid), 10) == u.Uid {
		return may(mode >> 6)
	}
	gids, _ := u.GroupIds()
	if gid := strconv.FormatUint(uint64(st.Gid), 10); gid == u.Gid || slices.Contains(gids, gid) {
		return may(mode >> 3)
	}
	return may(mode)
}

// currentUser is the daemon's user name, or its uid.
func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Geteuid())
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

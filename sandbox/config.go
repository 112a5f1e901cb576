//go:build linux

package sandbox

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/clip"
)

// Defaults applied by New to zero Config fields.
const (
	// DefaultTimeout bounds a Run whose Request and Config give no timeout.
	// Two minutes matches the reference daemon's exec timeout: long enough
	// for `npm install` or a test suite, short enough that a hung command
	// does not hold a client forever.
	DefaultTimeout = 120 * time.Second

	// DefaultOutputLimit caps each of stdout and stderr of a Run.
	DefaultOutputLimit int64 = 1 << 20

	// DefaultMaxConcurrent bounds the commands running at once (Run calls
	// and started processes until their Wait returns). Each command holds
	// a process tree, pipes and goroutines; 256 leaves room for bursts of
	// SSH clients running a command each (the SSH face takes up to 1024
	// connections; sshws tests 100 at once) and is far below what exhausts
	// a small machine.
	DefaultMaxConcurrent = 256
)

// Shell selects the interpreter that runs commands as `<shell> -c <command>`.
type Shell string

const (
	ShellAuto Shell = "auto" // bash if it is installed, else sh
	ShellBash Shell = "bash"
	ShellSh   Shell = "sh"
)

// ParseShell parses a shell name ("" means auto); the error names the bad
// value and the accepted ones.
func ParseShell(s string) (Shell, error) {
	switch sh := Shell(strings.ToLower(strings.TrimSpace(s))); sh {
	case "":
		return ShellAuto, nil
	case ShellAuto, ShellBash, ShellSh:
		return sh, nil
	}
	return "", fmt.Errorf("invalid shell %q: want auto, bash or sh", s)
}

// Rlimits are optional resource limits applied to every command (both soft
// and hard, so a command cannot raise them again). Zero leaves a limit as the
// daemon has it. They are set by the shell's own `ulimit` builtin before the
// command runs, which makes them race-free and work the same under bwrap.
type Rlimits struct {
	Processes    int64 // RLIMIT_NPROC: processes of the (run-as) user; root ignores it
	FileSize     int64 // RLIMIT_FSIZE in bytes: largest file a command may write
	CPUSeconds   int64 // RLIMIT_CPU: CPU time per process
	AddressSpace int64 // RLIMIT_AS in bytes: virtual memory per process
}

func (r Rlimits) zero() bool { return r == Rlimits{} }

// PolicyConfig configures the command safety policy.
type PolicyConfig struct {
	// Disabled turns the policy off in every mode. The policy is on by
	// default; ModeNone never applies it.
	Disabled bool
	// Allow are regular expressions (Go syntax) that exempt a single simple
	// command from the blocked categories when they match its words joined by
	// single spaces, e.g. `^rsync -a \S+ \S+$`. They never exempt a whole
	// command line, so `allowed; sudo x` is still judged part by part.
	Allow []string
}

// Config configures New. The zero value of every field except WorkspaceRoot
// is usable and documented.
type Config struct {
	// Mode is the isolation mode; "" means ModeAuto.
	Mode Mode
	// MinMode is the weakest effective mode the operator accepts
	// (--isolation-min; FloorModes, "" = ModeNone): New refuses a Mode
	// below it at once, and an auto that resolves below it with why the
	// stronger modes failed.
	MinMode Mode
	// Shell is the command interpreter; "" means ShellAuto.
	Shell Shell
	// WorkspaceRoot is the absolute, symlink-free path of the workspace.
	// Every Request's Dir and Boundary must lie inside it. Required.
	WorkspaceRoot string
	// NoNetwork cuts commands off the network under bwrap (--share-net is
	// omitted). The default, as the specification says, keeps the network.
	// It has no effect in software and none modes.
	NoNetwork bool
	// Policy configures the safety policy (on unless Policy.Disabled).
	Policy PolicyConfig
	// DefaultTimeout bounds a Run without its own timeout; 0 means
	// DefaultTimeout. Start has no default timeout: shells are interactive.
	DefaultTimeout time.Duration
	// OutputLimit caps each of stdout and stderr of a Run (head and tail are
	// kept); 0 means DefaultOutputLimit.
	OutputLimit int64
	// RunAs is a user name; when the daemon runs as root, commands run with
	// that user's uid, gid and groups. Empty runs commands as the daemon's
	// user. Note that a root daemon without RunAs gives commands root's file
	// access even inside bwrap (the namespaces confine what they see, not who
	// they are).
	RunAs string
	// Rlimits are optional per-command resource limits.
	Rlimits Rlimits
	// MaxProcesses bounds the processes (threads) one command may have at
	// once: 0 means DefaultMaxProcesses, a negative value no bound. It is
	// the pids.max of the command's own cgroup where the daemon can make
	// one (cgroup.go). Without one, a positive value is applied as
	// RLIMIT_NPROC by the shell for a command not running as root (which
	// turns the direct fast path off), and the default is not applied;
	// New logs which.
	MaxProcesses int64
	// MaxConcurrent bounds the commands running at once; 0 means
	// DefaultMaxConcurrent. A command over the bound is refused at once
	// (errcode.ExecError naming --exec-max-concurrent), never queued.
	MaxConcurrent int
	// Env is extra base environment given to every command, after the
	// minimal base and before the request's Env. Dangerous names (LD_PRELOAD,
	// BASH_ENV, ...) and values containing a secret are dropped.
	Env map[string]string
	// ReadOnlyPaths are extra host directories bound read-only at the same
	// path inside bwrap (e.g. /opt/toolchain); missing ones are ignored.
	ReadOnlyPaths []string
	// WritablePaths are extra host directories bound read-write at the same
	// path inside bwrap, after ReadOnlyPaths (a long-lived MCP server's
	// package cache, outside the workspace); missing ones are ignored.
	// Other modes see the host's file system anyway.
	WritablePaths []string
	// Secrets are values (the daemon's tokens) that must never reach a
	// child: an environment variable whose value contains one is dropped.
	// The list is read at each command, so a token a reload adds is kept
	// from the next command on. nil: none.
	Secrets *clip.Secrets
	// Logger receives the mode decision and dropped-variable notes; nil
	// discards.
	Logger *slog.Logger
	// Trampoline is the helper program started as the trampoline
	// (OpenHelper, --sandbox-helper); nil is this program, which then
	// must be one (its main calls sandboxexec.Main) for the landlock mode
	// and for transactions that cannot mount in place. The executor does
	// not close it.
	Trampoline *Trampoline
}

//go:build linux

// Package sandbox is the one door to processes. Every command any protocol runs
// (MCP exec, SSH exec and shells) goes through an Executor, which applies the
// isolation mode (bwrap, landlock, software, none), the command safety policy, the
// environment rules, timeouts and output limits. Nothing else of the daemon
// starts a process but the browser's Chromium, which chromedp must start
// itself and which is registered with this package's subreaper
// (StartOutside); the doors table of docs/architecture.md lists every file
// that starts one (TestDoorsAllowlist).
//
// Start here: New(Config) builds the Executor once at startup (it resolves the
// shell, the run-as user and the base environment, and in auto or bwrap mode
// probes bubblewrap by really running it). Run runs a command to completion
// (MCP exec); Start streams stdio, optionally on a pty (SSH).
//
// Every command runs as `<shell> -c <command>` (bash, else sh; never a login
// shell), or, when it is one program with literal arguments and bash would
// exec exactly that, as the program itself (direct.go), in its Request's
// Dir with HOME set to it, with a minimal environment
// built from scratch: nothing of the daemon's own environment (its token
// included) is inherited, and variables that take over the shell or the
// dynamic linker (LD_PRELOAD, BASH_ENV, IFS, ...) are dropped.
//
// Modes:
//   - bwrap: a bubblewrap sandbox per command: all namespaces unshared (the
//     network shared unless Config.NoNetwork), system directories read-only,
//     only the needed parts of /etc, a private /tmp, fresh /proc and /dev, the
//     Request's Boundary bound read-write at its own host path (from a
//     descriptor, never by name: workdir.go), capabilities dropped, and the
//     safety Policy.
//   - landlock: a host process in its own session and cgroup, in a Landlock
//     domain that lets it write only its boundary and a private temporary
//     directory and read the system directories (isolation_landlock.go),
//     under a seccomp filter, both entered by the trampoline
//     (sandbox/sandboxexec): the agentbe-sandbox helper given in
//     Config.Trampoline, or else this program re-executed as `sandbox-exec`,
//     so the mode works only with a helper or in a program whose main calls
//     sandboxexec.Main (trampoline.go). The Policy applies, without the
//     escape checks the domain makes moot.
//   - software: a plain process in its own session and cgroup (cgroup.go),
//     under the seccomp deny list its spawning thread holds
//     (isolation_software.go), plus the Policy with its workspace escape
//     checks (cd out, `..` past the root, ~ leading out).
//   - none: no checks (trusted use).
//
// The modes are one list (Modes, modeTable in isolation.go); each effective
// mode is a strategy (isolation_bwrap.go, isolation_landlock.go,
// isolation_software.go, isolation_none.go) that New picks once and that owns all that differs
// between modes. Run is Start and Wait in one call: both use the launch and
// finish steps of run.go.
//
// The Policy is sandbox/policy, portable Go apart from this executor: each
// command is parsed once (policy.Parse, mvdan.cc/sh), judged, and the same
// parse is what the direct path reads. Its refusals are *errcode.Error with
// Code DangerousOperation or UnsafeCommand and a Msg that starts with the
// rule (policy.RefusalText words them for clients).
//
// Limits: a timeout per Run (Config.DefaultTimeout when the Request has none)
// kills the whole process tree and returns the partial output with TimedOut;
// each output stream keeps its first and last halves up to the limit
// (WithTruncationNotice shows where it was cut); optional Rlimits; a bound
// on the processes of one command (Config.MaxProcesses, by its cgroup) and
// on the commands running at once (Config.MaxConcurrent).
package sandbox

import (
	"context"
	"io"
	"os"
	"strings"
	"time"

	"github.com/agentbe/agentbe-daemon/sandbox/policy"
)

// Mode is an isolation mode.
type Mode string

const (
	ModeAuto     Mode = "auto"     // probe bwrap, then Landlock, at startup; fall back to software
	ModeBwrap    Mode = "bwrap"    // bubblewrap namespaces + the safety policy
	ModeLandlock Mode = "landlock" // Landlock domain + seccomp via the trampoline + the safety policy
	ModeSoftware Mode = "software" // own session and cgroup + seccomp + policy + escape checks
	ModeNone     Mode = "none"     // no checks: trusted use only
)

// Executor runs commands confined to a workspace. Implementations are safe for
// concurrent use. Close kills every process still running and is idempotent.
type Executor interface {
	// Mode is the effective mode (never ModeAuto), and Reason says why it was
	// chosen (for logs and /health).
	Mode() Mode
	Reason() string
	// Gaps are what the effective mode does not confine, each a short
	// phrase (for the start-up log and /health); none for bwrap run with
	// --run-as. docs/security.md lists the same per mode.
	Gaps() []string

	// Run runs a command to completion and collects its output.
	Run(ctx context.Context, req Request) (Result, error)

	// Start runs a command with streaming stdio (SSH exec, shells).
	Start(ctx context.Context, req Request, stdio Stdio) (Process, error)

	Close() error
}

// Request is one command. Dir and Boundary are absolute host paths: Dir the
// working directory (HOME is set to it), Boundary the directory the command may
// not leave (the workspace root or the scope root); both must lie inside the
// executor's workspace root. Empty Dir means Boundary; empty Boundary means the
// workspace root (or Workspace.Root() when Workspace is set).
//
// The names are never resolved again once validated: the executor opens the
// boundary once (from Workspace, else beneath its own root handle, following
// symlinks only while they stay inside), and bwrap binds that descriptor
// (--bind-fd) while the other modes start the command in it
// (/proc/self/fd/N). A directory swapped for a symlink after the check
// changes nothing.
type Request struct {
	Command  string
	Dir      string
	Boundary string
	// Workspace, when set, is the directory the command runs in and may not
	// leave, as the file door validated it: an fsops.Workspace (the root or a
	// scope). Boundary must then be empty or equal to Workspace.Root().
	Workspace Workdir
	Env       map[string]string // scope env merged with per-call env by the caller
	Timeout   time.Duration     // 0 = the executor's default
	// OutputLimit caps each of stdout and stderr (head + tail kept); 0 = default.
	OutputLimit int64
	// MergeStderr (Run only) sends stderr into stdout's pipe, so the two
	// interleave as a terminal shows them; Result.Stderr is then empty.
	MergeStderr bool
	// OnOutput (Run only), when set, is told each chunk of output as it is
	// read ("stdout" or "stderr"), besides its being collected. It runs on
	// the reading goroutine: it must return quickly (a slow one holds the
	// command's pipe, not the daemon).
	OnOutput func(stream string, p []byte)
	Stdin    io.Reader // Run only; nil = empty stdin
	Pty      *Pty      // Start only; nil = pipes
	// Overlay (Run only, bwrap mode only) runs the command on a
	// copy-on-write view of Workspace (overlay.go); Result.Upper then
	// holds what it changed.
	Overlay *Overlay
}

// CommandLine quotes argv into the one command string a Request takes, each
// word single-quoted so the shell sees exactly argv; being one program with
// literal arguments, it is exec'ed directly where the direct path applies
// (direct.go). For callers that hold an argv (a configured server's command
// and arguments) rather than a line a client typed.
func CommandLine(argv ...string) string {
	q := make([]string, len(argv))
	for i, w := range argv {
		q[i] = policy.Quote(w)
	}
	return strings.Join(q, " ")
}

// Workdir is a directory the file door has validated: Root names it (the
// command's PWD and HOME, and its mount point under bwrap) and OpenDir opens
// that very directory. fsops.Workspace implements it.
type Workdir interface {
	Root() string
	OpenDir() (*os.File, error)
}

// Pty asks Start for a pseudo-terminal.
type Pty struct {
	Term       string
	Cols, Rows uint16
}

// Result of Run. A non-zero exit is not an error: err is reserved for commands
// that were blocked (errcode.DangerousOperation / UnsafeCommand), empty
// (EmptyCommand), or could not start (ExecError).
type Result struct {
	Stdout, Stderr []byte
	ExitCode       int // 128+n when killed by signal n
	// Signal is e.g. "KILL", "" when it exited normally. Under bwrap a
	// command killed by a signal shows only as ExitCode 128+n (bwrap turns
	// it into an exit status); Signal is set there only when the sandbox
	// itself was killed (timeout, cancel, Close).
	Signal   string
	TimedOut bool
	// StdoutSize and StderrSize are the sizes before truncation; a stream was
	// truncated when its size exceeds len of the kept bytes.
	StdoutSize, StderrSize int64
	Duration               time.Duration
	// Upper (a Request with an Overlay) is the directory of the
	// transaction's tmpfs: its "upper" subdirectory is the overlay's upper
	// layer (whiteouts for deletions, user.overlay.* attributes). The
	// caller closes it; the tmpfs lives as long as a descriptor of it.
	Upper *os.File
}

// Stdio are the streams of a started process. Stdin may be nil. With a Pty,
// stdout and stderr are the same terminal stream and Stderr is not used.
type Stdio struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// An OutputEnder is a Stdio writer that wants to know when the command's
// side of its stream has ended: the command (and every process that shared
// the stream) closed it, or the copy stopped. OutputEnded is called once,
// after the last write, possibly before Wait returns: a process may close
// its stdout and run on, and a reader that treats the end of the stream as
// the end of a conversation (an upstream MCP server's) learns it at once.
type OutputEnder interface {
	OutputEnded()
}

// Process is a started command.
type Process interface {
	// Wait waits for exit and for its output to be copied out.
	Wait() (ExitStatus, error)
	// Signal delivers a signal by its SSH name ("INT", "TERM", "KILL", ...).
	Signal(name string) error
	// Resize changes the pty window (no-op without a pty).
	Resize(cols, rows uint16) error
	// CloseStdin signals EOF on stdin.
	CloseStdin() error
}

// ExitStatus is how a started process ended.
type ExitStatus struct {
	Code     int    // 128+n when killed by signal n
	Signal   string // SSH signal name without "SIG", "" on normal exit (see Result.Signal for bwrap)
	TimedOut bool
}

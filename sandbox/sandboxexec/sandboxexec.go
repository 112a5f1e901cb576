//go:build linux

// Package sandboxexec is the re-exec trampoline of the landlock isolation
// mode: `agent-backend sandbox-exec`. The daemon starts every command of
// that mode as its own executable with the Argv below; the trampoline, now
// a separate process, puts itself in the Landlock domain the daemon built
// for the command (a ruleset descriptor it inherits), closes that
// descriptor and execs the command. Whatever the command runs after that
// stays in the domain: Landlock domains are inherited and never left.
//
// The trampoline is entered by an explicit call: Main, first thing in the
// main function of every program whose executable serves as the
// trampoline (cmd/agent-backend; cmd/agentbe-sandbox, the small program
// that links only this package and that the daemon starts in its place
// when it is installed beside it; and the TestMain of the test binaries
// that start commands in landlock mode). Main records that it was called
// (Ready), and the sandbox offers the landlock mode only then: an
// executable that is not the trampoline is never started as one. No
// package init takes over the argv, so a program that merely links the
// sandbox (the client library) is not a trampoline by accident. Entered
// from main, the trampoline runs after the whole program's package
// initialization (agent-backend's is about 200 packages: some
// milliseconds of CPU per command in this mode, which agentbe-sandbox,
// standard library and golang.org/x/sys only, does not pay). It reads nothing from
// its environment (the daemon starts it with an empty one; the command's
// environment travels in EnvFD), so a hostile LD_PRELOAD or GODEBUG in a
// request cannot reach it.
//
// Why a separate process and not the daemon's spawning thread: a Landlock
// domain applied to a daemon thread would put that thread in the same
// domain as the commands, and Landlock lets a process ptrace or signal
// anything in its own domain. In the trampoline only the command's own
// process tree is in the domain; the daemon is outside it, which Landlock
// enforces for ptrace, /proc/<pid>/mem and (ABI 6) signals.
//
// After the Landlock domain the trampoline installs the seccomp deny list
// the daemon assembled (sandbox/seccomp.go, the variant that also refuses
// clone3 and, below Landlock ABI 9, unix sockets) and passed on FilterFD,
// and then execs. The software mode has no
// trampoline: its executor installs the same deny list, without the
// clone3 rule, on the one thread it forks commands from (InstallSeccomp),
// and every command inherits it. The filter is assembled in the daemon so
// that the trampoline does not load the seccomp library, whose tables of
// every architecture's system calls take milliseconds to build.
package sandboxexec

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Arg is the subcommand name that makes a binary the trampoline.
const Arg = "sandbox-exec"

// Protocol is the version of the contract between the daemon and the
// program it starts as its trampoline: the argv shapes (Argv, RefuseArgv,
// OverlayArgv), the descriptors (RulesetFD, FilterFD, EnvFD, LowerFD,
// SocketFD), the encodings of the environment and the seccomp filter, and
// the overlay's report. A change to any of them raises it: the trampoline
// can be a program installed apart from the daemon (cmd/agentbe-sandbox),
// and a daemon starts one only if it answers ProtocolArg with this
// version (sandbox/trampoline.go), so a helper left by an older install
// is never handed descriptors it would read differently.
const Protocol = 1

// ProtocolArg, after Arg, makes the trampoline print ProtocolLine and
// exit 0.
const ProtocolArg = "--protocol"

// ProtocolLine is the trampoline's answer to ProtocolArg.
func ProtocolLine() string { return fmt.Sprintf("agentbe-sandbox-protocol %d", Protocol) }

// RulesetFD is the descriptor the trampoline finds its Landlock ruleset
// on (the first of exec.Cmd.ExtraFiles), FilterFD the one its seccomp
// filter is read from (the second). Both are closed before the exec.
//
// EnvFD holds the command's environment (EncodeEnv): not in the argv,
// which every user of the machine can read in /proc/<pid>/cmdline, where
// a process's environment is readable by its own user only.
const (
	RulesetFD = 3
	FilterFD  = 4
	EnvFD     = 5
)

// Argv is the trampoline's argv for one command: path is the file to
// exec (absolute, or relative to the working directory the trampoline
// starts in), argv the command's argv.
//
//	agent-backend sandbox-exec <path> <argv...>
func Argv(self, path string, argv []string) []string {
	out := make([]string, 0, 3+len(argv))
	out = append(out, self, Arg, path)
	return append(out, argv...)
}

// EncodeEnv is env as the trampoline reads it from EnvFD: each entry
// followed by a NUL.
func EncodeEnv(env []string) []byte {
	n := 0
	for _, kv := range env {
		n += len(kv) + 1
	}
	b := make([]byte, 0, n)
	for _, kv := range env {
		b = append(append(b, kv...), 0)
	}
	return b
}

// maxEnv bounds what the trampoline reads from EnvFD (the kernel refuses
// an environment of more than a quarter of the stack limit anyway).
const maxEnv = 8 << 20

// readEnv reads the environment from fd, from offset 0, and closes fd.
func readEnv(fd int) ([]string, error) {
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("the environment on fd %d: %w", fd, err)
	}
	if st.Size < 0 || st.Size > maxEnv {
		return nil, fmt.Errorf("the environment on fd %d is %d bytes", fd, st.Size)
	}
	buf := make([]byte, st.Size)
	for off := 0; off < len(buf); {
		n, err := syscall.Pread(fd, buf[off:], int64(off))
		if err != nil {
			return nil, fmt.Errorf("reading the environment: %w", err)
		}
		if n == 0 {
			return nil, fmt.Errorf("the environment on fd %d ended early", fd)
		}
		off += n
	}
	return decodeEnv(buf)
}

// decodeEnv is EncodeEnv's inverse.
func decodeEnv(b []byte) ([]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if b[len(b)-1] != 0 {
		return nil, errors.New("the environment does not end with a NUL")
	}
	var env []string
	for len(b) > 0 {
		i := 0
		for b[i] != 0 {
			i++
		}
		env = append(env, string(b[:i]))
		b = b[i+1:]
	}
	return env, nil
}

// RefuseArgv is the trampoline's argv for a command the daemon could not
// confine: it prints msg and exits 126 without running anything.
func RefuseArgv(self, msg string) []string { return []string{self, Arg, refuse, msg} }

const refuse = "--refuse"

// parse is Argv's inverse on the trampoline's os.Args[2:].
func parse(args []string) (path string, argv []string, err error) {
	if len(args) < 2 {
		return "", nil, fmt.Errorf("want <path> <argv...>, got %d arguments", len(args))
	}
	return args[0], args[1:], nil
}

// ready is set by Main when the process is not the trampoline.
var ready atomic.Bool

// Main runs the trampoline when this process was started as one
// (os.Args[1] is Arg), and then never returns: the command replaces the
// process, or it exits 126 or 127 with the reason on stderr. Otherwise it
// returns at once, and Ready reports from then on that this program's
// executable can serve as the trampoline. A program calls it first thing
// in main, before it does anything else.
func Main() {
	if len(os.Args) < 2 || os.Args[1] != Arg {
		ready.Store(true)
		return
	}
	if len(os.Args) == 3 && (os.Args[2] == "--help" || os.Args[2] == "-h") {
		fmt.Println("agent-backend sandbox-exec: the daemon's trampoline for --isolation landlock.\n" +
			"It enters the Landlock ruleset on descriptor 3 and execs the command; it is not meant to be run by hand.\n" +
			"See docs/security.md.")
		os.Exit(0)
	}
	if len(os.Args) == 3 && os.Args[2] == ProtocolArg {
		fmt.Println(ProtocolLine())
		os.Exit(0)
	}
	if len(os.Args) >= 3 && os.Args[2] == overlayFlag {
		os.Exit(runOverlay(os.Args[3:]))
	}
	if len(os.Args) == 4 && os.Args[2] == refuse {
		os.Exit(fail(126, errors.New(os.Args[3])))
	}
	os.Exit(run(os.Args[2:]))
}

// Ready reports whether this program's main called Main, so that its
// executable (/proc/self/exe) runs as the trampoline when started as one.
func Ready() bool { return ready.Load() }

// run never returns on success: the command replaces the trampoline.
// Failures exit 126 (could not confine) or 127 (no such program), as a
// shell would, with a line on stderr.
func run(args []string) int {
	// Landlock, seccomp, the capability sets and no_new_privs bind the
	// calling thread; exec must come from the same one.
	runtime.LockOSThread()
	path, argv, err := parse(args)
	if err != nil {
		return fail(126, err)
	}
	env, err := readEnv(EnvFD)
	if err != nil {
		return fail(126, err)
	}
	prog, err := readFilter(FilterFD)
	if err != nil {
		return fail(126, err)
	}
	if err := dropCapabilities(); err != nil {
		return fail(126, err)
	}
	if err := Enter(RulesetFD); err != nil {
		return fail(126, err)
	}
	if err := InstallSeccomp(prog); err != nil {
		return fail(126, err)
	}
	err = syscall.Exec(path, argv, env)
	code := 126
	if err == syscall.ENOENT {
		code = 127
	}
	return fail(code, fmt.Errorf("%s: %w", path, err))
}

// Capabilities, from linux/capability.h and linux/prctl.h.
const (
	prCapbsetDrop        = 24
	prCapAmbient         = 47
	prCapAmbientClearAll = 4
	capabilityVersion3   = 0x20080522
)

// dropCapabilities leaves the command none: the bounding set emptied (so
// a command running as root gets none back when it execs), the ambient
// set cleared, and the effective, permitted and inheritable sets zeroed.
// A root daemon's commands are then root without privilege, as bwrap's
// --cap-drop ALL makes them: no CAP_SYS_PTRACE to read other processes'
// /proc files, no CAP_MKNOD, no CAP_CHOWN, no CAP_DAC_OVERRIDE. A daemon
// that has no capabilities (not root) cannot shrink its bounding set
// (EPERM), and has nothing to lose there.
func dropCapabilities() error {
	for c := uintptr(0); c < 64; c++ {
		_, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapbsetDrop, c, 0, 0, 0, 0)
		if errno == syscall.EINVAL {
			break // past the kernel's last capability
		}
		if errno == syscall.EPERM {
			break // no CAP_SETPCAP: no capabilities to drop from it
		}
		if errno != 0 {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, errno)
		}
	}
	// EINVAL: a kernel without ambient capabilities (before 4.3).
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0); errno != 0 && errno != syscall.EINVAL {
		return fmt.Errorf("clearing the ambient capabilities: %w", errno)
	}
	hdr := struct {
		version uint32
		pid     int32
	}{version: capabilityVersion3}
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return fmt.Errorf("capset: %w", errno)
	}
	return nil
}

// Enter puts the calling thread in the ruleset's domain and closes the
// descriptor. no_new_privs is required by the kernel for an unprivileged
// caller; it is normally set already (the spawning thread's), setting it
// again is harmless. The ruleset descriptor must not survive into the
// command.
func Enter(fd int) error {
	if err := setNoNewPrivs(); err != nil {
		return err
	}
	_, _, errno := syscall.Syscall(sysLandlockRestrictSelf, uintptr(fd), 0, 0)
	syscall.Close(fd)
	if errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}

func fail(code int, err error) int {
	fmt.Fprintf(os.Stderr, "agentbe: sandbox-exec: %v\n", err)
	return code
}

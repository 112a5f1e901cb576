//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"
)

// The trampoline (sandbox/sandboxexec) is a program the executor starts
// in front of a command: every command of the landlock mode, and a
// transaction's overlay run where the daemon cannot mount in place. It is
// this program (/proc/self/exe, when its main calls sandboxexec.Main) or
// HelperName, the same trampoline in a program that links nothing else
// and so starts in a fraction of the time (docs/performance.md). Which
// one an executor starts is decided in one place, trampolineFor.
//
// A helper runs every such command, so it is trusted like the daemon's
// own executable, and checked as such once, at start (OpenHelper): a
// regular ELF file owned by root or by the daemon's user, writable by
// neither its group nor others, not setuid or setgid, in a directory
// others cannot write to (unless it is sticky), answering this daemon's
// sandboxexec.Protocol. It is opened once and started through that
// descriptor (/proc/self/fd/N), never by its name again, so a file
// swapped in under the name afterwards is never run.

// HelperName is the trampoline program's name, looked up in the directory
// of the daemon's own executable unless --sandbox-helper names one.
const HelperName = "agentbe-sandbox"

// HelperOff is the --sandbox-helper value that makes the daemon its own
// trampoline even where a helper is installed.
const HelperOff = "off"

// minHelperFD is the lowest descriptor the helper is kept on. os/exec's
// child moves the descriptors it passes to 0..2+len(ExtraFiles) and may
// use as many again above them while it does (forkAndExecInChild), before
// it execs /proc/self/fd/N, which the kernel resolves in the child's
// table: a low N could by then hold one of the command's files. Far above
// what any command here passes (trampolineFor checks).
const minHelperFD = 100

// helperProbeTimeout bounds the protocol check at start.
const helperProbeTimeout = 10 * time.Second

// Trampoline is a validated helper, held open for the daemon's life
// (Config.Trampoline). Nil is this program itself.
type Trampoline struct {
	f      *os.File // the helper, on a descriptor >= minHelperFD, close-on-exec
	name   string   // as found, for logs
	closed atomic.Bool
}

// Name is the path the helper was found by.
func (t *Trampoline) Name() string { return t.name }

// path is what a child execs: the descriptor, never the name.
func (t *Trampoline) path() string { return "/proc/self/fd/" + strconv.Itoa(int(t.f.Fd())) }

// Close closes the descriptor. Only after every executor that was given
// t is closed: a command started later would exec whatever the number
// then holds. Idempotent.
func (t *Trampoline) Close() error {
	if t == nil || !t.closed.CompareAndSwap(false, true) {
		return nil
	}
	return t.f.Close()
}

// OpenHelper finds, validates and opens the trampoline helper for the
// --sandbox-helper value setting, and logs which trampoline commands will
// get. "" looks for HelperName beside the daemon's executable (missing:
// nil, the daemon is its own trampoline; present but refused: a warning,
// and nil); HelperOff is nil; a path must be a valid helper, or the error
// names it. A helper of another protocol version (an older install) is
// passed over with a warning naming both versions, never an error: the
// daemon can be its own trampoline. Without /proc (the helper is started
// through /proc/self/fd) every helper fails its checks, as above.
func OpenHelper(setting string, log *slog.Logger) (*Trampoline, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	self := func(why string) {
		if sandboxexec.Ready() {
			log.Info("sandbox trampoline: this program (/proc/self/exe)", "why", why)
		} else {
			log.Info("sandbox trampoline: none (landlock mode and transactions without in-place mounts are unavailable)", "why", why)
		}
	}
	exeDir := ""
	if setting == "" {
		exe, err := os.Executable()
		if err != nil {
			self("the daemon's executable cannot be found: " + err.Error())
			return nil, nil
		}
		exeDir = filepath.Dir(exe)
	}
	return openHelperSetting(setting, exeDir, log, self)
}

// openHelperSetting is OpenHelper with the daemon's executable's
// directory given (tests give another).
func openHelperSetting(setting, exeDir string, log *slog.Logger, self func(why string)) (*Trampoline, error) {
	name := setting
	switch setting {
	case HelperOff:
		self("--sandbox-helper off")
		return nil, nil
	case "":
		name = filepath.Join(exeDir, HelperName)
		if _, err := os.Lstat(name); errors.Is(err, os.ErrNotExist) {
			self(name + " is not installed")
			return nil, nil
		}
	default:
		if !filepath.IsAbs(setting) {
			return nil, fmt.Errorf("--sandbox-helper %q: must be an absolute path, or off", setting)
		}
	}
	t, err := openHelper(name)
	if err != nil {
		if setting == "" {
			log.Warn("sandbox helper refused", "path", name, "err", err)
			self("the helper beside the daemon was refused")
			return nil, nil
		}
		return nil, fmt.Errorf("--sandbox-helper %s: %w", name, err)
	}
	got, err := t.protocol()
	if err != nil || got != sandboxexec.Protocol {
		t.Close()
		v := "none"
		if err == nil {
			v = strconv.Itoa(got)
		}
		log.Warn("sandbox helper speaks another protocol (from another install?), so it is not used: install the agentbe-sandbox built with this agent-backend",
			"path", name, "helper_protocol", v, "daemon_protocol", sandboxexec.Protocol, "err", err)
		self("the helper " + name + " speaks protocol " + v + ", this daemon " + strconv.Itoa(sandboxexec.Protocol))
		return nil, nil
	}
	log.Info("sandbox trampoline: "+HelperName, "path", name, "protocol", got, "fd", t.f.Fd())
	return t, nil
}

// openHelper opens name (following symlinks: what is checked is the file
// opened) and checks it and its directory; the result is on a high
// descriptor (minHelperFD).
//
// This is not the rule of system.run's "always" approvals
// (tools/gateway/approvals.go, changeable), though both judge a program
// file: that one decides whether a path may stay approved for good, and so
// whether an agent whose commands run as the daemon's user could ever
// change what the path names (owner root only, every directory up to /,
// sticky or not, the name looked at, not a descriptor). This one judges,
// once, the file this daemon then runs only through its descriptor, a
// program of the daemon's own installation: its owner may be the daemon's
// user (who could replace the daemon's executable as well), what matters
// of its directories is that no other user swaps it before a start, and
// it must be what the descriptor can start (ELF, executable, no setuid).
func openHelper(name string) (*Trampoline, error) {
	// O_NONBLOCK: a FIFO planted under the name must not block the start.
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	euid := uint32(os.Geteuid())
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, errors.New("not a regular file")
	case st.Uid != 0 && st.Uid != euid:
		return nil, fmt.Errorf("owned by uid %d, neither root nor the daemon's user (uid %d)", st.Uid, euid)
	case st.Mode&0o022 != 0:
		return nil, fmt.Errorf("mode %04o: writable by its group or others, who could make it run anything", st.Mode&0o7777)
	case st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0:
		return nil, fmt.Errorf("mode %04o: setuid or setgid", st.Mode&0o7777)
	case st.Mode&0o100 == 0:
		return nil, fmt.Errorf("mode %04o: not executable by its owner", st.Mode&0o7777)
	}
	// An interpreter script would be started by its interpreter through
	// /proc/self/fd/N, which the close-on-exec descriptor no longer names
	// by then: only an ELF program can be the helper.
	magic := make([]byte, 4)
	if n, err := unix.Pread(fd, magic, 0); err != nil || n != 4 || string(magic) != "\x7fELF" {
		return nil, errors.New("not an ELF program")
	}
	// Its directory, and the directory of the name it was found by: one
	// that others may write to lets them swap the file before a daemon
	// opens it at its next start.
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return nil, fmt.Errorf("cannot read /proc/self/fd (is /proc mounted? the helper is started through it): %w", err)
	}
	for _, d := range []string{filepath.Dir(real), filepath.Dir(name)} {
		var ds unix.Stat_t
		if err := unix.Stat(d, &ds); err != nil {
			return nil, err
		}
		if ds.Mode&0o002 != 0 && ds.Mode&unix.S_ISVTX == 0 {
			return nil, fmt.Errorf("its directory %s is writable by others (mode %04o, not sticky)", d, ds.Mode&0o7777)
		}
	}
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, minHelperFD)
	if err != nil {
		return nil, fmt.Errorf("F_DUPFD_CLOEXEC: %w", err)
	}
	if high < minHelperFD {
		unix.Close(high)
		return nil, fmt.Errorf("F_DUPFD_CLOEXEC gave descriptor %d, below %d", high, minHelperFD)
	}
	return &Trampoline{f: os.NewFile(uintptr(high), name), name: name}, nil
}

// protocol starts the helper through its descriptor with the protocol
// argument, an empty environment and a bounded time and output, and
// returns the version it answers.
func (t *Trampoline) protocol() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), helperProbeTimeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, t.path(), sandboxexec.Arg, sandboxexec.ProtocolArg)
	cmd.Args[0] = HelperName
	cmd.Env = []string{}
	cmd.Stdout = &limitedWriter{w: &out, n: 256}
	err := cmd.Run()
	line := strings.TrimSpace(out.String())
	v, ok := strings.CutPrefix(line, "agentbe-sandbox-protocol ")
	n, perr := strconv.Atoi(v)
	if !ok || perr != nil {
		if err == nil {
			err = fmt.Errorf("answered %q", line)
		}
		return 0, fmt.Errorf("no protocol version (%v)", err)
	}
	return n, nil
}

// limitedWriter keeps the first n bytes and drops the rest.
type limitedWriter struct {
	w *bytes.Buffer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if k := min(len(p), l.n-l.w.Len()); k > 0 {
		l.w.Write(p[:k])
	}
	return len(p), nil
}

// trampolineReady reports whether e has a trampoline to start: a helper,
// or this program.
func (e *executor) trampolineReady() bool {
	return e.cfg.Trampoline != nil || sandboxexec.Ready()
}

// trampolineFor makes cmd start the trampoline: cmd.Path is the helper's
// descriptor or /proc/self/exe, and the result is argv[0] for the
// trampoline's argv. Called once cmd.ExtraFiles is final: a helper is
// taken only if its descriptor lies above every descriptor os/exec's child
// may use while it arranges them (see minHelperFD).
func (e *executor) trampolineFor(cmd *exec.Cmd) string {
	if t := e.cfg.Trampoline; t != nil && !t.closed.Load() && 2*(3+len(cmd.ExtraFiles))+2 < int(t.f.Fd()) {
		cmd.Path = t.path()
		return HelperName
	}
	cmd.Path = "/proc/self/exe"
	return "agent-backend"
}

//go:build linux

package sandbox

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/sandbox/policy"
	"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"
)

// landlockIsolation runs every command through the trampoline
// (sandboxexec: this binary, re-executed as `agent-backend sandbox-exec`),
// which enters a Landlock domain built here for the command and installs
// the seccomp deny list before it execs the command. The domain allows:
//
//   - everything beneath the boundary (the workspace or the scope),
//     granted through the descriptor the executor opened, never a name;
//   - everything in a private temporary directory per boundary (TMPDIR);
//   - reading and executing the system directories bwrap binds (bwrap.go:
//     systemDirs), reading the parts of /etc it binds (etcFiles), and the
//     configured ReadOnlyPaths; everything in the WritablePaths;
//   - reading /proc (Landlock itself keeps the command away from processes
//     outside its domain: no ptrace, no /proc/<pid>/mem of the daemon),
//     and reading, writing and terminal ioctls on the usual /dev nodes;
//
// and nothing else: not the host's /tmp, not /etc beyond those files, not
// another scope, not the daemon's key or token files (unless they were put
// in a system directory). Where the kernel's ABI has them, signals and
// abstract unix sockets are scoped to the domain (ABI 6), so a command
// cannot signal the daemon, and with Config.NoNetwork TCP bind and connect
// are refused (ABI 4). Connecting to a unix socket by path is allowed only
// beneath the grants of everything (ABI 9); below ABI 9 the seccomp filter
// refuses unix sockets instead (landlockResolveUnixABI). The private
// temporary directories live outside the workspace (landlockTmp). The
// command is a host process otherwise (no
// namespaces): it is killed, waited for and bounded as in software mode,
// and the policy runs, without the escape checks Landlock makes moot.
type landlockIsolation struct {
	e   *executor
	abi int
	// handled are the access rights the ruleset restricts (all this ABI
	// has); the grants below are masked with it.
	handledFS, handledNet, scoped uint64
	// rules are the fixed grants, opened once (O_PATH) in New.
	rules []landlockRule
	// tmp holds a private temporary directory per boundary, at most
	// maxTmp of them (tmpFor).
	tmp     string
	tmpMu   sync.Mutex
	tmpDirs map[string]*landlockTmpDir // by the directory's name
	tmpSeq  uint64                     // hand-outs of tmpFor, under tmpMu
	maxTmp  int                        // maxLandlockTmpDirs; tests lower it
	tmpWG   sync.WaitGroup             // removals of evicted directories (close waits)
	// filter is the seccomp filter's sealed memfd (filterMemfd), the
	// variant that refuses unix sockets when unixBySeccomp.
	filter *os.File
	// newIPC: each command gets an IPC namespace of its own (the daemon
	// has CAP_SYS_ADMIN); without one, SysV IPC is shared (Gaps).
	newIPC bool
	// unixBySeccomp: this ABI has no Landlock rule for connecting to a
	// unix socket by path (LANDLOCK_ACCESS_FS_RESOLVE_UNIX, ABI 9), so the
	// filter refuses unix sockets instead (filterOpts.noUnixSockets).
	unixBySeccomp bool
	// roots are the resolved host directories a program may be exec'd
	// from besides the boundary (visible).
	roots []string
}

type landlockRule struct {
	f      *os.File
	access uint64
}

const (
	llRead = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	llExec = unix.LANDLOCK_ACCESS_FS_EXECUTE
	// llFileRW is what a device node gets: read, write, truncate (a
	// shell's `> /dev/null` opens with O_TRUNC) and terminal ioctls.
	llFileRW = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	// llFileOnly are the rights that apply to a non-directory.
	llFileOnly = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	// llAll is every right, but making device nodes: a command that could
	// mknod a block device in its workspace would read the disk beneath
	// every path rule (the trampoline also drops CAP_MKNOD, and the
	// seccomp filter refuses it).
	llAll = ^uint64(0) &^ (unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK)
)

// landlockHandledFS are the file system rights of each ABI (index: the
// ABI version; later ones have the last).
var landlockHandledFS = []uint64{0, 1<<13 - 1, 1<<14 - 1, 1<<15 - 1, 1<<15 - 1, 1<<16 - 1, 1<<16 - 1, 1<<16 - 1, 1<<16 - 1, 1<<17 - 1}

// devNodes may be opened read-write by every command. Not /dev/pts or
// /dev/ptmx: the host has one devpts, where the terminals of the other
// sessions (other scopes') are, and a command that could open one could
// read what is typed into it. A command on a pty has it open already (its
// stdio, and /dev/tty); what needs a new pseudo-terminal (tmux, script)
// does not work in this mode.
var devNodes = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// landlockResolveUnixABI is the first Landlock ABI with a rule for
// connecting to a unix socket by path (LANDLOCK_ACCESS_FS_RESOLVE_UNIX):
// from it, connect(2) and sendto(2) reach a named socket only beneath a
// grant that has the right (llAll: the boundary, its TMPDIR and the
// WritablePaths; not the system directories). Below it nothing governs
// them, and the trampoline's seccomp filter refuses unix sockets instead.
const landlockResolveUnixABI = 9

// landlockABI is LandlockABI; tests replace it to see auto's fallback.
var landlockABI = LandlockABI

// LandlockABI is the Landlock ABI version the kernel offers; 0 when it
// has none (not built in, or not among the enabled LSMs).
func LandlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

func (*landlockIsolation) mode() Mode           { return ModeLandlock }
func (*landlockIsolation) escapeChecks() bool   { return false }
func (*landlockIsolation) ownsTree() bool       { return false }
func (*landlockIsolation) directOK() bool       { return true }
func (*landlockIsolation) runs(hdr []byte) bool { return hostRuns(hdr) }

// rootWarning: commands of a root daemon without --run-as are root without
// capabilities, and Landlock does not govern chmod: they could change the
// mode of any root-owned file of the host (a setuid bit included).
func (*landlockIsolation) rootWarning(e *executor) string {
	if !rootCommands(e) {
		return ""
	}
	return "commands run as root (without capabilities): Landlock does not govern chmod, so they can change the permissions of root-owned files outside the workspace; set --run-as to a user that owns only the workspace"
}

// rootCommands reports that commands run as root: a root daemon without
// --run-as.
func rootCommands(e *executor) bool { return e.cred == nil && os.Geteuid() == 0 }

// unixSockets says how this domain treats unix sockets, for Reason.
func (l *landlockIsolation) unixSockets() string {
	if l.unixBySeccomp {
		return fmt.Sprintf("unix sockets refused by seccomp (Landlock ABI %d cannot confine connect by path; %d can)", l.abi, landlockResolveUnixABI)
	}
	return fmt.Sprintf("unix sockets confined by Landlock (ABI %d: connect only beneath the directories commands may write)", l.abi)
}

func (l *landlockIsolation) gaps(e *executor) []string {
	var g []string
	if l.unixBySeccomp {
		g = append(g, fmt.Sprintf("unix sockets: refused, the workspace's too (Landlock ABI %d cannot confine connect by path); socketpair works", l.abi))
	}
	if l.scoped&unix.LANDLOCK_SCOPE_SIGNAL == 0 {
		g = append(g, fmt.Sprintf("signals: commands can signal the processes of their user, the daemon's included (Landlock ABI %d; 6 scopes them)", l.abi))
	}
	if l.handledNet != 0 {
		g = append(g, "network: UDP (the Landlock rules cover TCP only)")
	}
	if !l.newIPC {
		g = append(g, "SysV IPC: the shared memory, message queues and semaphores of the commands' user, other scopes' under --run-as, the host's of that user without it (no IPC namespace: the daemon lacks CAP_SYS_ADMIN); they outlive the command")
	}
	// /proc is granted whole: Landlock has no rule for a part of it, and
	// commands need their own entries.
	g = append(g, "processes: the command line and status of every process of the host in /proc, other scopes' commands included, and the numbers of the open descriptors of every process of the commands' user: other scopes' commands under --run-as, the daemon's without it (their environment, what their descriptors are, their directories and memory are refused, and so are changes to their limits and scheduling)")
	if rootCommands(e) {
		g = append(g, "chmod, utime and extended attributes of every root-owned file of the host (root daemon without --run-as; setuid bits are refused)")
	} else {
		g = append(g, "chmod, utime and extended attributes of the files the commands' user owns outside the workspace")
	}
	return g
}

func (*landlockIsolation) filtersSpawner() bool       { return false }
func (*landlockIsolation) scriptPrefix(string) string { return "" }
func (l *landlockIsolation) String() string           { return fmt.Sprintf("landlock ABI %d", l.abi) }
func (l *landlockIsolation) visible(p, boundary string, bound bool) bool {
	// The command sees the host as it is: a PATH entry (bound) is the
	// same directory inside. The direct path execs a program only from
	// where the domain lets it; anything else goes through the shell,
	// which reports the refusal the way a shell does.
	if bound {
		return true
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return false
	}
	if policy.Within(boundary, real) {
		return true
	}
	for _, r := range l.roots {
		if policy.Within(r, real) {
			return true
		}
	}
	return false
}

// command: the trampoline, started where the command starts (hostCommand
// enters the working directory by descriptor, the session and the
// credential are the same), with an empty environment of its own, the
// ruleset on fd 3, the seccomp filter on fd 4, the command's environment
// on fd 5 and the program and its argv in its argv.
func (l *landlockIsolation) command(p program, wd *workdir, pty bool) *exec.Cmd {
	cmd := hostCommand(l.e, p, wd, pty)
	cmd.Env = []string{}
	if l.newIPC {
		// SysV shared memory, message queues and semaphores (and POSIX
		// message queues) are the namespace's: Landlock does not govern
		// them, and every command of the run-as user (or, without
		// --run-as, root's) could otherwise attach, read, write and
		// remove another scope's, or the host's of that user; what the
		// command leaves goes with the namespace.
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWIPC
	}
	// What cannot be confined does not run: command cannot fail, so the
	// trampoline is started to refuse it (exit 126 with the reason).
	refuse := func(what string, err error) *exec.Cmd {
		l.e.log.Error("landlock: cannot "+what+"; the command is refused", "err", err)
		cmd.Args = sandboxexec.RefuseArgv(l.e.trampolineFor(cmd), "cannot "+what+": "+err.Error())
		return cmd
	}
	rs, tmp, err := l.ruleset(wd)
	if err != nil {
		return refuse("build the Landlock ruleset", err)
	}
	wd.extra = append(wd.extra, rs)
	envf, err := envFile(withEnv(p.env, "TMPDIR", tmp))
	if err != nil {
		return refuse("pass the environment", err)
	}
	wd.extra = append(wd.extra, envf)
	// fds 3, 4, 5: sandboxexec.RulesetFD, FilterFD, EnvFD.
	cmd.ExtraFiles = []*os.File{rs, l.filter, envf}
	cmd.Args = sandboxexec.Argv(l.e.trampolineFor(cmd), p.path, p.argv)
	return cmd
}

// envFile is env in a memfd for the trampoline (sandboxexec.EnvFD).
// An entry with a NUL is refused, as os/exec refuses one: in the file it
// would become two entries, the second one of the caller's choosing.
func envFile(env []string) (*os.File, error) {
	for _, kv := range env {
		if strings.IndexByte(kv, 0) >= 0 {
			return nil, errors.New("an environment variable contains a NUL byte")
		}
	}
	fd, err := unix.MemfdCreate("agentbe-env", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "agentbe-env")
	if _, err := f.Write(sandboxexec.EncodeEnv(env)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// withEnv sets k=v in env and leaves one entry per name, the last, in
// the order of the last ones: what os/exec does to an exec.Cmd's Env,
// which the trampoline's own exec does not.
func withEnv(env []string, k, v string) []string {
	all := append(env[:len(env):len(env)], k+"="+v)
	out := make([]string, 0, len(all))
	saw := make(map[string]bool, len(all))
	for i := len(all) - 1; i >= 0; i-- {
		name, _, _ := strings.Cut(all[i], "=")
		if saw[name] {
			continue
		}
		saw[name] = true
		out = append(out, all[i])
	}
	slices.Reverse(out)
	return out
}

// ruleset builds the domain of one command: the fixed grants, the
// boundary's descriptor, its private temporary directory. It returns the
// ruleset descriptor (close-on-exec: ExtraFiles dups it to fd 3) and the
// temporary directory's name.
func (l *landlockIsolation) ruleset(wd *workdir) (*os.File, string, error) {
	tmpName, tmpDir, err := l.tmpFor(wd.boundary)
	if err != nil {
		return nil, "", err
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: l.handledFS, Handled_access_net: l.handledNet, Scoped: l.scoped}
	// The whole struct, whatever the ABI: the kernel accepts a larger one
	// when the fields it does not know are zero, and they are.
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return nil, "", fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	rs := os.NewFile(fd, "landlock-ruleset")
	add := func(f *os.File, access uint64) error {
		pb := unix.LandlockPathBeneathAttr{Allowed_access: access & l.handledFS, Parent_fd: int32(f.Fd())}
		if pb.Allowed_access == 0 {
			return nil
		}
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(int(rs.Fd())), unix.LANDLOCK_RULE_PATH_BENEATH,
			uintptr(unsafe.Pointer(&pb)), 0, 0, 0)
		if errno != 0 {
			return fmt.Errorf("landlock_add_rule %s: %w", f.Name(), errno)
		}
		return nil
	}
	for _, r := range l.rules {
		if err := add(r.f, r.access); err != nil {
			rs.Close()
			return nil, "", err
		}
	}
	if err := add(wd.bfd, llAll); err != nil {
		rs.Close()
		return nil, "", err
	}
	if err := add(tmpDir, llAll); err != nil {
		rs.Close()
		return nil, "", err
	}
	return rs, tmpName, nil
}

// landlockTmpDir is one boundary's private temporary directory.
type landlockTmpDir struct {
	f        *os.File // O_PATH, for the ruleset
	boundary string
	used     uint64 // tmpSeq when it was last handed out
}

// tmpFor returns the private temporary directory of a boundary, made on
// first use (0700, owned by the run-as user) under the executor's own.
// Two scopes never share one. The directories a daemon keeps are bounded
// (maxTmp): a client may name a new scope with every call (X-Scope-Path),
// so when a new one would pass the bound, the quarter of them used least
// recently and by no running command are removed, with what they hold. A
// boundary that comes back gets an empty directory.
func (l *landlockIsolation) tmpFor(boundary string) (string, *os.File, error) {
	sum := sha256.Sum256([]byte(boundary))
	name := filepath.Join(l.tmp, hex.EncodeToString(sum[:12]))
	l.tmpMu.Lock()
	if d := l.tmpDirs[name]; d != nil {
		l.tmpSeq++
		d.used = l.tmpSeq
		l.tmpMu.Unlock()
		return name, d.f, nil
	}
	full, since := len(l.tmpDirs) >= l.maxTmp, l.tmpSeq
	l.tmpMu.Unlock()
	// The boundaries of the running commands, taken without tmpMu (the
	// executor's lock is never taken inside it). A command is tracked
	// before its tmpFor, so one that got its directory before since is
	// among them while it runs; one handed its directory after since is
	// told by used.
	var busy map[string]bool
	if full {
		busy = l.e.runningBoundaries()
	}
	l.tmpMu.Lock()
	defer l.tmpMu.Unlock()
	if d := l.tmpDirs[name]; d != nil {
		l.tmpSeq++
		d.used = l.tmpSeq
		return name, d.f, nil
	}
	if len(l.tmpDirs) >= l.maxTmp && busy != nil {
		l.evictTmp(busy, since)
	}
	if len(l.tmpDirs) >= l.maxTmp {
		return "", nil, fmt.Errorf("%d scopes have commands running or starting, each with a private temporary directory (the limit); end some", l.maxTmp)
	}
	if err := os.Mkdir(name, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", nil, err
	}
	if c := l.e.cred; c != nil {
		if err := os.Lchown(name, int(c.Uid), int(c.Gid)); err != nil {
			return "", nil, err
		}
	}
	f, err := os.OpenFile(name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", nil, err
	}
	l.tmpSeq++
	l.tmpDirs[name] = &landlockTmpDir{f: f, boundary: boundary, used: l.tmpSeq}
	return name, f, nil
}

// evictTmp removes up to a quarter of maxTmp directories, least recently
// used first, of boundaries no running command has (busy) and not handed
// out after since. Each is renamed out of the way under tmpMu (a boundary
// that comes back makes a new one) and removed on a goroutine of its own,
// so that a directory full of files does not hold up every start.
// tmpMu is held.
func (l *landlockIsolation) evictTmp(busy map[string]bool, since uint64) {
	var idle []string
	for name, d := range l.tmpDirs {
		if !busy[d.boundary] && d.used <= since {
			idle = append(idle, name)
		}
	}
	slices.SortFunc(idle, func(a, b string) int { return cmp.Compare(l.tmpDirs[a].used, l.tmpDirs[b].used) })
	idle = idle[:min(len(idle), max(1, l.maxTmp/4))]
	var gone []string
	for _, name := range idle {
		l.tmpDirs[name].f.Close()
		delete(l.tmpDirs, name)
		trash := filepath.Join(l.tmp, "gone-"+filepath.Base(name)+"-"+strconv.FormatUint(l.tmpSeq, 36))
		if err := os.Rename(name, trash); err != nil {
			l.e.log.Warn("landlock: could not remove an unused private temporary directory", "dir", name, "err", err)
			continue
		}
		gone = append(gone, trash)
	}
	if len(gone) == 0 {
		return
	}
	l.tmpWG.Add(1)
	go func() {
		defer l.tmpWG.Done()
		for _, dir := range gone {
			if err := os.RemoveAll(dir); err != nil {
				l.e.log.Warn("landlock: could not remove an unused private temporary directory", "dir", dir, "err", err)
			}
		}
	}()
}

// maxLandlockTmpDirs bounds the private temporary directories (and the
// descriptors they hold) a daemon keeps: docs/security.md, "Landlock".
const maxLandlockTmpDirs = 4096

func (l *landlockIsolation) close() {
	l.tmpWG.Wait()
	l.tmpMu.Lock()
	defer l.tmpMu.Unlock()
	for _, d := range l.tmpDirs {
		d.f.Close()
	}
	l.tmpDirs = nil
	for _, r := range l.rules {
		r.f.Close()
	}
	l.rules = nil
	if l.tmp != "" {
		os.RemoveAll(l.tmp)
	}
}

// newLandlockIsolation checks that there is a trampoline (a helper, or
// this program: sandboxexec.Ready) and the kernel's Landlock ABI, opens the fixed
// grants and the executor's temporary directory, and runs the probe: the
// trampoline running `<shell> -c true` in the workspace under a real
// ruleset, which catches a kernel that has the syscalls but refuses them
// (Landlock not among the enabled LSMs, a seccomp profile refusing them).
func newLandlockIsolation(e *executor) (*landlockIsolation, error) {
	if !e.trampolineReady() {
		return nil, errors.New("this program is not the trampoline (its main does not call sandboxexec.Main) and no agentbe-sandbox helper is set")
	}
	abi := landlockABI()
	if abi < 1 {
		return nil, errors.New("the kernel has no Landlock (not built in, or not in the lsm= list)")
	}
	if !sandboxexec.SeccompSupported() {
		return nil, errors.New("the kernel has no seccomp filters")
	}
	unixBySeccomp := abi < landlockResolveUnixABI
	filter, err := filterMemfd(unixBySeccomp)
	if err != nil {
		return nil, fmt.Errorf("the seccomp filter: %v", err)
	}
	l := &landlockIsolation{e: e, abi: abi, filter: filter, unixBySeccomp: unixBySeccomp, tmpDirs: map[string]*landlockTmpDir{}, maxTmp: maxLandlockTmpDirs}
	l.handledFS = landlockHandledFS[min(abi, len(landlockHandledFS)-1)]
	if abi >= 6 {
		l.scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	if e.cfg.NoNetwork {
		if abi < 4 {
			return nil, fmt.Errorf("the network cannot be taken away: Landlock ABI %d has no network rules (4 does)", abi)
		}
		l.handledNet = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	ok := false
	defer func() {
		if !ok {
			l.close()
		}
	}()
	grant := func(p string, access uint64, exec bool) {
		f, err := os.OpenFile(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return // missing: nothing to grant
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return
		}
		if !fi.IsDir() {
			access &= llFileOnly
		}
		l.rules = append(l.rules, landlockRule{f: f, access: access})
		if exec {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				l.roots = append(l.roots, real)
			}
		}
	}
	for _, d := range systemDirs {
		grant(d, llRead|llExec, true)
	}
	for _, f := range etcFiles {
		grant(f, llRead, false)
	}
	grant("/proc", llRead, false)
	for _, d := range devNodes {
		grant(d, llFileRW|unix.LANDLOCK_ACCESS_FS_READ_DIR, false)
	}
	for _, p := range e.cfg.ReadOnlyPaths {
		grant(p, llRead|llExec, true)
	}
	for _, p := range e.cfg.WritablePaths {
		grant(p, llAll, true)
	}
	tmp, err := landlockTmp(e)
	if err != nil {
		return nil, err
	}
	l.tmp = tmp
	if c := e.cred; c != nil {
		// The run-as user must reach its directories (0700 each) beneath.
		if err := os.Chmod(tmp, 0o711); err != nil {
			return nil, err
		}
	}

	// An IPC namespace of its own for each command, where the daemon may
	// make one; if the probe fails with it, the mode goes on without.
	l.newIPC = hasCapSysAdmin()
	failed, err := e.probe(l, "the trampoline")
	if err == nil && failed != "" && l.newIPC {
		l.newIPC = false
		failed, err = e.probe(l, "the trampoline")
	}
	if err != nil {
		return nil, err
	} else if failed != "" {
		return nil, fmt.Errorf("the landlock probe failed: %s", failed)
	}
	ok = true
	return l, nil
}

// hasCapSysAdmin reports CAP_SYS_ADMIN in the daemon's effective set,
// which a new IPC namespace needs (a root daemon on a host; not one in a
// container that dropped it).
func hasCapSysAdmin() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return false
	}
	return data[0].Effective&(1<<unix.CAP_SYS_ADMIN) != 0
}

// landlockTmpParents are the directories the executor's temporary
// directory may be made in, in order: the daemon's TMPDIR (os.TempDir),
// /tmp, /var/tmp, and /dev/shm, the tmpfs that container runtimes mount
// writable even on a read-only root file system (a pod's
// readOnlyRootFilesystem without a /tmp volume).
func landlockTmpParents() []string {
	var out []string
	for _, d := range []string{os.TempDir(), "/tmp", "/var/tmp", "/dev/shm"} {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// landlockTmp makes the executor's temporary directory (0700, root of the
// commands' private ones) in the first of landlockTmpParents that takes
// it and is not inside the workspace, where the agent could read and
// change the other scopes' temporary files. A move past the daemon's
// TMPDIR is logged at warn; none at all is an error naming each try.
func landlockTmp(e *executor) (string, error) {
	var tries []string
	for _, parent := range landlockTmpParents() {
		real, err := filepath.EvalSymlinks(parent)
		if err == nil && policy.Within(e.root, real) {
			err = errors.New("it is inside the workspace")
		}
		var tmp string
		if err == nil {
			tmp, err = os.MkdirTemp(real, "agentbe-landlock-")
		}
		if err != nil {
			tries = append(tries, parent+": "+err.Error())
			continue
		}
		if len(tries) > 0 {
			e.log.Warn("landlock: the commands' private temporary directories are not where TMPDIR says", "dir", tmp, "tried", strings.Join(tries, "; "))
		}
		return tmp, nil
	}
	return "", fmt.Errorf("no directory for the commands' private temporary directories (set the daemon's TMPDIR to a writable directory outside the workspace): %s", strings.Join(tries, "; "))
}

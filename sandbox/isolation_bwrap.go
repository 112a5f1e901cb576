//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/sandbox/policy"
)

// bwrapIsolation runs every command in a bubblewrap sandbox of its own
// (bwrap.go builds the argv): all namespaces unshared, the boundary bound
// from its descriptor, system directories read-only. The pid namespace
// ends with bwrap, so killing bwrap ends the command's tree. The direct
// fast path may only exec what is the same file inside as outside.
type bwrapIsolation struct{ e *executor }

func (bwrapIsolation) mode() Mode         { return ModeBwrap }
func (bwrapIsolation) escapeChecks() bool { return false }
func (bwrapIsolation) ownsTree() bool     { return true }

// directOK: without --bind-fd the shell must check the mount first (bwrap.go).
func (b bwrapIsolation) directOK() bool { return b.e.bindFD }

// runs: only an ELF file for this machine; bwrap's execvp cannot fall back
// to the shell as the host modes' retry does.
func (bwrapIsolation) runs(hdr []byte) bool {
	return len(hdr) >= 20 && isELF(hdr) && elfMachineOK(hdr)
}

func (b bwrapIsolation) scriptPrefix(boundary string) string {
	if b.e.bindFD {
		return ""
	}
	return checkBoundary(boundary)
}

// command: bwrap with p after `--`, the boundary bound from its descriptor
// (fd 3), the cwd by bwrap's --chdir inside its own mounts, a cleared
// environment set by --setenv. bwrap cannot set argv[0], so the shell runs
// by its path; a direct command keeps the typed name, which bwrap's execvp
// searches along the same PATH (direct.go checked it is visible).
func (b bwrapIsolation) command(p program, wd *workdir, pty bool) *exec.Cmd {
	e := b.e
	argv := p.argv
	if p.shell {
		argv = append([]string{e.shellPath}, p.argv[1:]...)
	}
	cmd := &exec.Cmd{Path: e.bwrapPath, Args: e.bwrapArgs(wd.boundary, p.dir, p.env, pty, e.bwrapFilter != nil, argv),
		Env:         []string{},         // bwrap itself needs nothing; --clearenv/--setenv set the child's
		ExtraFiles:  []*os.File{wd.bfd}, // fd 3: --bind-fd 3
		SysProcAttr: &syscall.SysProcAttr{Credential: e.cred}}
	if e.bwrapFilter != nil {
		// fd 5: --seccomp 5, the filter opened again for this command
		// (bwrap reads from the offset, which a shared descriptor's
		// last reader left at the end). fd 4 stays closed here; a
		// transaction puts its report socket there (wrapOverlay). If
		// the filter cannot be opened, fd 5 is closed in the child and
		// bwrap refuses to start: never a command without the filter.
		f, _ := os.Open(procPath(e.bwrapFilter))
		if f != nil {
			wd.extra = append(wd.extra, f)
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, nil, f)
	}
	if !pty {
		// A session of its own: see hostCommand.
		cmd.SysProcAttr.Setsid = true
	}
	return cmd
}

// newBwrapIsolation finds bwrap, builds the fixed part of its argv and
// runs the probe: bwrap with the real arguments running `<shell> -c true` in the
// workspace. Looking bwrap up is not enough: in containers and on hardened
// kernels it is installed but cannot create namespaces.
// The probe builds its command with the candidate strategy itself: the
// executor's strategy is only set once New has chosen one.
func newBwrapIsolation(e *executor) (isolation, error) {
	path, lerr := exec.LookPath("bwrap")
	if lerr != nil {
		return nil, errors.New("bwrap is not installed (not found in PATH)")
	}
	e.bwrapPath = path
	e.bwrapBase = e.buildBwrapBase()
	e.bindFD = bwrapHasBindFD(path)
	if f, err := bwrapFilterMemfd(); err != nil {
		e.log.Warn("bwrap mode without its seccomp filter: a command can leave a setuid or setgid file in the workspace", "err", err)
		e.bwrapFilterErr = err
	} else {
		e.bwrapFilter = f
	}
	b := bwrapIsolation{e}

	msg, err := e.probe(b, "bwrap")
	if err != nil {
		return nil, err
	}
	if msg == "" {
		return b, nil
	}
	low := strings.ToLower(msg)
	if strings.Contains(low, "namespace") || strings.Contains(low, "uid map") ||
		strings.Contains(low, "operation not permitted") || strings.Contains(low, "permission denied") {
		hint := ""
		if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
			hint = "; user.max_user_namespaces is 0"
		}
		if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
			hint += "; kernel.unprivileged_userns_clone is 0"
		}
		return nil, fmt.Errorf("user namespaces are unavailable%s: bwrap said %q", hint, msg)
	}
	return nil, fmt.Errorf("the bwrap probe failed: %s", msg)
}

// visible reports that p (absolute) resolves inside the bwrap sandbox to
// the same file as on the host: every component, symlinks followed one by
// one, lies in a directory bound at its own path (the system directories,
// the bound parts of /etc, the boundary), is a system-dir symlink bwrap
// recreates, or is a real directory on the way to a bound one. The private
// /tmp, /proc and /dev are not the host's.
func (b bwrapIsolation) visible(p, boundary string, bound bool) bool {
	if bound {
		return b.visibleBound(p, boundary)
	}
	_, ok := b.resolveVisible(p, boundary)
	return ok
}

// visibleBound is visible for a directory that also resolves into a bound
// one (not only to a directory on the way to one).
func (b bwrapIsolation) visibleBound(p, boundary string) bool {
	real, ok := b.resolveVisible(p, boundary)
	if !ok {
		return false
	}
	for _, r := range b.bwrapRoots(boundary) {
		if policy.Within(r, real) {
			return true
		}
	}
	return false
}

// resolveVisible is the walk behind visible; it returns where p resolves.
func (b bwrapIsolation) resolveVisible(p, boundary string) (string, bool) {
	roots := b.bwrapRoots(boundary)
	bound := func(q string) bool {
		for _, r := range roots {
			if policy.Within(r, q) {
				return true
			}
		}
		return false
	}
	ancestor := func(q string) bool {
		for _, r := range roots {
			if policy.Within(q, r) {
				return true
			}
		}
		return false
	}
	rest := strings.Split(p, "/")
	cur := "/"
	for links := 0; len(rest) > 0; {
		comp := rest[0]
		rest = rest[1:]
		switch comp {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, comp)
		fi, err := os.Lstat(next)
		if os.IsNotExist(err) && bound(cur) {
			// Missing in a bound directory: missing inside too.
			return filepath.Join(append([]string{next}, rest...)...), true
		}
		if err != nil {
			return "", false
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if !bound(next) && !b.bwrapLink(next) {
				return "", false
			}
			if links++; links > 40 {
				return "", false
			}
			t, err := os.Readlink(next)
			if err != nil {
				return "", false
			}
			if filepath.IsAbs(t) {
				cur = "/"
			}
			rest = append(strings.Split(t, "/"), rest...)
			continue
		}
		if !bound(next) && !(fi.IsDir() && ancestor(next)) {
			return "", false
		}
		cur = next
	}
	return cur, true
}

// bwrapRoots are the host paths bound at their own path under bwrap: the
// boundary and the directories and files buildBwrapBase binds.
func (b bwrapIsolation) bwrapRoots(boundary string) []string {
	return append([]string{boundary}, b.e.bwrapBound...)
}

// bwrapLink reports a system directory that bwrap recreates as the same
// symlink (/bin -> usr/bin on merged-/usr systems).
func (b bwrapIsolation) bwrapLink(p string) bool {
	for _, d := range b.e.bwrapLinks {
		if d == p {
			return true
		}
	}
	return false
}

func (bwrapIsolation) filtersSpawner() bool { return false }

func (bwrapIsolation) rootWarning(*executor) string { return "" }

func (bwrapIsolation) gaps(e *executor) []string {
	var g []string
	if rootCommands(e) {
		g = append(g, "files: commands are root on the workspace's files (root daemon without --run-as)")
	}
	switch {
	case e.cfg.NoNetwork:
	case e.abstractScoped:
		// The domain is the spawner thread's: the commands forked from
		// one thread share it.
		g = append(g, "unix sockets: with the network, the abstract unix sockets of other commands forked from the same spawner thread, other scopes' included (the host's are scoped away by Landlock)")
	default:
		// Abstract unix socket names belong to the network namespace,
		// which --share-net shares; no mount hides them.
		g = append(g, "unix sockets: with the network, every abstract unix socket of the host's network namespace (the commands share it; named sockets only where bound in; not scoped: "+e.abstractScopeOff+")")
	}
	if e.bwrapFilter == nil {
		g = append(g, fmt.Sprintf("setuid files: a command can leave a setuid or setgid program of its user in the workspace (the seccomp filter is unavailable: %v)", e.bwrapFilterErr))
	}
	return g
}

// landlockScopeABI is the first Landlock ABI that scopes abstract unix
// sockets (LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET).
const landlockScopeABI = 6

// scopeSpawner puts every thread the executor forks bwrap from in a
// Landlock domain that handles no file system or network access and only
// scopes abstract unix sockets (enterAbstractScope): with the network a
// command shares the host's network namespace, and with it every abstract
// socket of the host, which no mount hides. bwrap and the command inherit
// the domain and can connect only to abstract sockets made inside it. It
// returns why the threads are left as they are, or "" once they are in
// the domain: a Landlock ABI below 6, a bwrap that no_new_privs would
// break (setuid, or with file capabilities), or a bwrap that does not
// start in the domain (the probe, run first from a thread of its own).
// The daemon's other threads stay outside: the spawner's threads are
// locked to their loop (spawn.go) and never run another goroutine.
func (b bwrapIsolation) scopeSpawner() string {
	e := b.e
	if abi := landlockABI(); abi < landlockScopeABI {
		return fmt.Sprintf("Landlock ABI %d; %d scopes them", abi, landlockScopeABI)
	}
	if why := bwrapGainsPrivileges(e.bwrapPath); why != "" {
		return why
	}
	sp := newSpawner()
	if err := sp.onThread(enterAbstractScope); err != nil {
		sp.stop()
		return "the Landlock domain cannot be entered: " + err.Error()
	}
	spawn := e.spawn
	e.spawn = sp
	msg, err := e.probe(b, "bwrap")
	e.spawn = spawn
	sp.stop()
	switch {
	case err != nil:
		return "bwrap in the Landlock domain: " + err.Error()
	case msg != "":
		return "bwrap does not start in the Landlock domain: " + msg
	}
	if err := e.spawn.onEveryThread(enterAbstractScope); err != nil {
		return "the Landlock domain cannot be entered: " + err.Error()
	}
	return ""
}

// bwrapGainsPrivileges says why no_new_privs would break the bwrap at
// path (setuid or setgid, or file capabilities: privileges its exec
// grants, which no_new_privs withholds), or "".
func bwrapGainsPrivileges(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return err.Error()
	}
	if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		return path + " is setuid or setgid, and no_new_privs (which the Landlock domain needs) would take that away"
	}
	if n, err := unix.Getxattr(path, "security.capability", nil); err == nil && n > 0 {
		return path + " has file capabilities, and no_new_privs (which the Landlock domain needs) would take them away"
	}
	return ""
}

// enterAbstractScope puts the calling thread in a Landlock domain that
// handles no file system or network access (so bwrap's mounts and every
// file stay as they are) and scopes abstract unix sockets: what the
// thread forks cannot connect or send to an abstract socket made outside
// the domain, and can to one made inside it. It sets no_new_privs first,
// as landlock_restrict_self requires without CAP_SYS_ADMIN. Both are the
// thread's alone (no TSYNC), and every process it forks inherits them. It
// runs on a spawner's thread only (onEveryThread, onThread).
func enterAbstractScope() error {
	attr := unix.LandlockRulesetAttr{Scoped: unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}

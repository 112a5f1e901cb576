//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// etcFiles are the parts of /etc that ordinary programs need: name service
// and DNS (resolv.conf, hosts, nsswitch.conf, passwd, group, host.conf,
// gai.conf, services, protocols), TLS roots (ssl, ca-certificates, pki),
// the dynamic linker's cache, Debian's alternatives symlinks, the time zone
// and MIME types. Nothing else of the host's /etc is visible: no shadow, no
// ssh keys, no daemon config.
var etcFiles = []string{
	"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group",
	"/etc/host.conf", "/etc/gai.conf", "/etc/services", "/etc/protocols",
	"/etc/ssl", "/etc/ca-certificates", "/etc/ca-certificates.conf", "/etc/pki",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
	"/etc/localtime", "/etc/timezone", "/etc/mime.types",
}

// procReadOnly are the parts of /proc that change the kernel, not a
// process: bound read-only over bwrap's fresh /proc (buildBwrapBase), as
// container runtimes do.
var procReadOnly = []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/fs"}

// systemDirs are bound read-only. On merged-/usr systems (Debian 12) /bin,
// /lib, ... are symlinks into /usr; those are recreated as the same
// symlinks rather than bound, which would fail or duplicate /usr.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

func (e *executor) buildBwrapBase() []string {
	args := []string{"--unshare-all"}
	if !e.cfg.NoNetwork {
		args = append(args, "--share-net")
	}
	args = append(args, "--die-with-parent", "--cap-drop", "ALL")
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", target, d)
				e.bwrapLinks = append(e.bwrapLinks, d)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
			e.bwrapBound = append(e.bwrapBound, d)
		}
	}
	for _, f := range etcFiles {
		if _, err := os.Stat(f); err == nil {
			args = append(args, "--ro-bind", f, f)
			// A symlink is bound as its target's content: for the
			// direct path's visibility check only real ones count.
			if fi, err := os.Lstat(f); err == nil && fi.Mode()&os.ModeSymlink == 0 {
				e.bwrapBound = append(e.bwrapBound, f)
			}
		}
	}
	// /tmp is a fresh tmpfs. It must come before the workspace bind and the
	// read-only paths: either may itself live under /tmp, and a tmpfs
	// mounted after a bind would hide it (the reference daemon's order,
	// which breaks every command in that case).
	args = append(args, "--proc", "/proc")
	// The kernel's settings in the fresh /proc, read-only: a file of
	// /proc/sys is writable by its owner bits alone, so a command whose
	// uid is the host's root (a root daemon without --run-as: bwrap maps
	// 0 to 0) could set kernel.core_pattern or kernel.modprobe to a
	// workspace program the kernel then runs as root, capabilities or
	// not. bwrap means to cover /proc/sys itself but skips it (the
	// directory is never writable, so its access(2) check says it is
	// already read-only). The host's /proc/sys is bound: its entries are
	// those of the reader's namespaces all the same.
	for _, p := range procReadOnly {
		args = append(args, "--ro-bind-try", p, p)
	}
	args = append(args, "--dev", "/dev", "--tmpfs", "/tmp")
	for _, p := range e.cfg.ReadOnlyPaths {
		args = append(args, "--ro-bind-try", p, p)
	}
	for _, p := range e.cfg.WritablePaths {
		args = append(args, "--bind-try", p, p)
	}
	return args
}

// bwrapHasBindFD reports whether this bwrap has --bind-fd (upstream 0.10,
// and distributions' backports such as Debian 12's 0.8.0-2+deb12u1).
func bwrapHasBindFD(path string) bool {
	out, _ := exec.Command(path, "--help").CombinedOutput()
	return bytes.Contains(out, []byte("--bind-fd "))
}

// checkBoundary is the first step of every command under a bwrap without
// --bind-fd (see bwrapArgs): the directory mounted at the boundary's name
// must be the one fd 3 holds (same device and inode, compared by the
// shell's own test builtin), and fd 3 is closed before anything else runs.
func checkBoundary(boundary string) string {
	q := "'" + strings.ReplaceAll(boundary, "'", `'\''`) + "'"
	return "[ " + q + " -ef /proc/self/fd/3 ] || { echo 'agentbe: the workspace directory was replaced while the sandbox was being set up; nothing ran' >&2; exit 126; }; exec 3<&-; "
}

// bwrapArgs completes the argv for one command: the boundary bound
// read-write at its own host path (clients send absolute `cd` paths) from
// the descriptor the caller passes as fd 3 (workdir.go: bwrap must not
// resolve the name again), the cwd, a cleared environment and the command;
// with filter, also the seccomp filter the caller passes as fd 5
// (bwrapFilterFD: bwrapFilterMemfd opened again), which bwrap reads,
// closes and installs just before it execs the command.
//
// With --bind-fd bwrap mounts the descriptor's directory, checks it is the
// one mounted, and closes the descriptor. An older bwrap can only bind a
// name, and resolves even /proc/self/fd/3 back to one, so a swap can still
// land a host directory on the mount point: there the name is bound, fd 3
// is handed to the command, and every command runs through the shell
// (never the direct path), whose first step (checkBoundary) refuses to go
// on unless the mounted directory is fd 3's, then closes fd 3 (a
// descriptor of a directory outside the sandbox's mount namespace, from
// which `..` leads out). bwrap's own init keeps no descriptors beyond
// stdio.
// bwrapFilterFD is the descriptor bwrap reads its seccomp filter from: 5,
// past the workspace (3) and a transaction's report socket (4, which the
// trampoline closes before it execs bwrap; overlay.go).
const bwrapFilterFD = 5

func (e *executor) bwrapArgs(boundary, dir string, env []string, pty, filter bool, argv []string) []string {
	args := make([]string, 0, len(e.bwrapBase)+10+3*len(env)+len(argv))
	args = append(args, "bwrap")
	args = append(args, e.bwrapBase...)
	if !pty {
		// A new session detaches the command from any terminal, which
		// blocks TIOCSTI input injection into the daemon's tty.
		args = append(args, "--new-session")
	}
	if e.bindFD {
		args = append(args, "--bind-fd", "3", boundary)
	} else {
		args = append(args, "--bind", boundary, boundary)
	}
	if filter {
		// The seccomp filter (seccomp.go's setuidOnly variant).
		args = append(args, "--seccomp", strconv.Itoa(bwrapFilterFD))
	}
	args = append(args, "--chdir", dir, "--clearenv")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	args = append(args, "--")
	return append(args, argv...)
}

// BwrapArgv returns what bwrap mode runs for argv with dir as both the
// boundary and the working directory: bwrap's path and its whole argv (the
// namespaces, mounts and environment of a command an Executor built from
// cfg starts), without the policy, the direct path, the cgroup or the output
// handling. It is the exec floor the benchmarks measure (bench/floor), so
// the floor runs the sandbox the daemon runs, less its seccomp filter (the
// executor's `--seccomp 5`, a few dozen instructions refusing setuid
// files), for which a bare bwrap has no descriptor.
//
// The child must get dir, opened as a directory, as its fd 3
// (exec.Cmd.ExtraFiles[0]), and an empty environment: bwrap binds the
// workspace from that descriptor with --bind-fd 3, or by name where this
// bwrap lacks --bind-fd (the executor then also checks the mount in the
// command's shell script, which is the command's part, not the sandbox's).
// cfg's Mode, WorkspaceRoot and limits are not used; dir must be absolute.
func BwrapArgv(cfg Config, dir string, argv ...string) (path string, args []string, err error) {
	if !filepath.IsAbs(dir) {
		return "", nil, invalidConfig(fmt.Sprintf("BwrapArgv: directory %q must be an absolute path", dir))
	}
	if len(argv) == 0 {
		return "", nil, invalidConfig("BwrapArgv: no command")
	}
	if path, err = exec.LookPath("bwrap"); err != nil {
		return "", nil, errors.New("bwrap is not installed (not found in PATH)")
	}
	e := &executor{cfg: cfg, log: cfg.Logger, bwrapPath: path}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Shell == "" {
		cfg.Shell = ShellAuto
	}
	if e.shellPath, e.shellArg0, e.shellKind, err = resolveShell(cfg.Shell); err != nil {
		return "", nil, err
	}
	if err := e.resolveUser(cfg.RunAs); err != nil {
		return "", nil, err
	}
	e.buildBaseEnv()
	e.bwrapBase = e.buildBwrapBase()
	e.bindFD = bwrapHasBindFD(path)
	dir = filepath.Clean(dir)
	env, err := e.env(dir, nil, "")
	if err != nil {
		return "", nil, err
	}
	return path, e.bwrapArgs(dir, dir, env, false, false, argv), nil
}

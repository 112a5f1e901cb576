//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/sandbox/policy"
	"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"
)

// Overlay asks Run to run a command on a copy-on-write view of its
// workspace (a transaction): the workspace is the overlay's lower layer,
// read through the descriptor the file door validated, and every change
// the command makes lands in an upper layer on a tmpfs of at most MaxBytes
// bytes and MaxFiles files, never in the workspace. Only bwrap mode can:
// the trampoline (sandboxexec, overlay.go there) mounts the overlay in a
// user and mount namespace of its own and execs bwrap with the overlay
// bound at the workspace's path, with the argv, environment, limits and
// cgroup of a plain bwrap command. Any other mode refuses the request
// (errcode.NotImplemented, naming bwrap) before anything runs.
type Overlay struct {
	// Dir is the transaction's directory: absolute, existing, outside the
	// workspace, without ',', ':' or '\' (the overlay's option syntax).
	// The tmpfs is mounted on it inside the trampoline's namespace only.
	Dir string
	// MaxBytes and MaxFiles bound the upper layer (the tmpfs's size and
	// inode count): past either the command's writes fail with ENOSPC.
	MaxBytes, MaxFiles int64
}

// overlayRun is one overlay command's side of the socket pair.
type overlayRun struct {
	ours, theirs *os.File
}

// overlayOK says why this executor cannot run ov, or nil.
func (e *executor) overlayOK(ov *Overlay) error {
	refuse := func(msg string) error {
		return &errcode.Error{Code: errcode.NotImplemented, Op: "exec", Msg: msg}
	}
	if _, ok := e.iso.(bwrapIsolation); !ok {
		return refuse(fmt.Sprintf("transactions need --isolation bwrap (overlay mounts); commands here run in %s mode, so nothing ran", e.iso.mode()))
	}
	if !e.bindFD {
		return refuse("transactions need a bwrap with --bind-fd (0.10, or a distribution's backport); this bwrap binds by name, so nothing ran")
	}
	if !sandboxexec.Ready() {
		return refuse("transactions need this program to be the sandbox trampoline (its main calls sandboxexec.Main) to mount the overlay before bwrap; nothing ran")
	}
	if !filepath.IsAbs(ov.Dir) || filepath.Clean(ov.Dir) != ov.Dir || strings.ContainsAny(ov.Dir, ",:\\") {
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "exec", Path: ov.Dir, Msg: "the transaction directory must be a clean absolute path without ',', ':' or '\\'"}
	}
	if policy.Within(e.root, ov.Dir) || policy.Within(ov.Dir, e.root) {
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "exec", Path: ov.Dir, Msg: "the transaction directory must lie outside the workspace " + e.root}
	}
	if ov.MaxBytes <= 0 || ov.MaxFiles <= 0 {
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "exec", Msg: fmt.Sprintf("the transaction's limits must be positive (max bytes %d, max files %d)", ov.MaxBytes, ov.MaxFiles)}
	}
	return nil
}

// wrapOverlay turns cmd, a bwrap command whose fd 3 is the workspace,
// into the trampoline's overlay run of it: the same bwrap argv, started
// in a new user and mount namespace where the daemon's user (or the
// run-as user) keeps its own ids, with the capabilities of that namespace (only) to mount.
func (e *executor) wrapOverlay(cmd *exec.Cmd, ov *Overlay, boundary string) (*overlayRun, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	run := &overlayRun{ours: os.NewFile(uintptr(fds[0]), "overlay-report"), theirs: os.NewFile(uintptr(fds[1]), "overlay-report")}
	cmd.Args = sandboxexec.OverlayArgv("agent-backend", ov.Dir, boundary, ov.MaxBytes, ov.MaxFiles, cmd.Path, cmd.Args)
	cmd.Path = "/proc/self/exe"
	// fd 3: the workspace (sandboxexec.LowerFD), fd 4: the report socket.
	cmd.ExtraFiles = append(cmd.ExtraFiles[:1:1], run.theirs)
	attr := cmd.SysProcAttr
	uid, gid := uint32(os.Geteuid()), uint32(os.Getegid())
	var groups []uint32
	if c := attr.Credential; c != nil {
		uid, gid, groups = c.Uid, c.Gid, c.Groups
	}
	attr.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
	// Identity maps: files the command writes belong to its own user, as
	// in a plain bwrap command, and the workspace's owners read as they are.
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: int(uid), HostID: int(uid), Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: int(gid), HostID: int(gid), Size: 1}}
	for _, g := range groups {
		if g != gid {
			attr.GidMappings = append(attr.GidMappings, syscall.SysProcIDMap{ContainerID: int(g), HostID: int(g), Size: 1})
		}
	}
	attr.GidMappingsEnableSetgroups = attr.Credential != nil
	if uid != 0 {
		// Every capability, in the new namespace only (nothing of the
		// host's): overlayfs does its copy-ups, whiteouts and work
		// directory with the mounter's credentials, which need more than
		// CAP_SYS_ADMIN. The trampoline clears them before bwrap.
		for c := uintptr(0); c <= unix.CAP_LAST_CAP; c++ {
			attr.AmbientCaps = append(attr.AmbientCaps, c)
		}
	}
	return run, nil
}

// receive takes the trampoline's report once the command has ended: the
// tmpfs root holding upper/, or why the overlay could not be made.
func (r *overlayRun) receive() (*os.File, error) {
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(r.ours.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC|unix.MSG_DONTWAIT)
	if err != nil || n == 0 {
		return nil, fmt.Errorf("the overlay trampoline ended without a report (%v)", err)
	}
	msg := string(buf[:n])
	var fds []int
	if oobn > 0 {
		if cms, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
			for _, cm := range cms {
				if got, err := unix.ParseUnixRights(&cm); err == nil {
					fds = append(fds, got...)
				}
			}
		}
	}
	if msg != sandboxexec.OverlayOK || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("transactions need overlay mounts under bwrap, and here %s; nothing ran", msg)
	}
	return os.NewFile(uintptr(fds[0]), "transaction-upper"), nil
}

func (r *overlayRun) close() {
	r.ours.Close()
	r.theirs.Close()
}

// NewOverlayDir makes a fresh transaction directory (0700, a random name)
// in parent, the daemon's transactions directory under its state
// directory, which it makes first (0700) if missing; parent must lie
// outside the workspace
// (Run checks the directory again). The tmpfs is mounted on the directory
// in the trampoline's namespace only, so on the host it stays empty;
// RemoveOverlayDir removes it.
func NewOverlayDir(parent, id string) (string, error) {
	if !filepath.IsAbs(parent) || strings.ContainsAny(parent, ",:\\") {
		return "", fmt.Errorf("the transactions directory %q must be an absolute path without ',', ':' or '\\'", parent)
	}
	if id == "" || strings.ContainsAny(id, "/,:\\") || id == "." || id == ".." {
		return "", fmt.Errorf("bad transaction id %q", id)
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", err
	}
	if err := os.Chmod(parent, 0o700); err != nil {
		return "", err
	}
	dir := filepath.Join(parent, id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// RemoveOverlayDir removes a directory NewOverlayDir made.
func RemoveOverlayDir(dir string) error {
	if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
		return os.RemoveAll(dir)
	}
	return nil
}

// ClearOverlayDirs removes what an earlier daemon left in parent (its
// transactions died with it: their upper layers were in memory).
func ClearOverlayDirs(parent string) error {
	ents, err := os.ReadDir(parent)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(parent, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

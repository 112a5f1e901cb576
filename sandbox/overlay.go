//go:build linux

package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

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
	if !e.trampolineReady() {
		return refuse("transactions need the sandbox trampoline to mount the overlay before bwrap (agentbe-sandbox, or this program if its main calls sandboxexec.Main); nothing ran")
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
	bwrap, bwrapArgv := cmd.Path, cmd.Args
	// fd 3: the workspace (sandboxexec.LowerFD), fd 4: the report socket;
	// from 5 what bwrap itself gets (bwrapFilterFD), passed through.
	cmd.ExtraFiles = append([]*os.File{cmd.ExtraFiles[0], run.theirs}, cmd.ExtraFiles[min(2, len(cmd.ExtraFiles)):]...)
	cmd.Args = sandboxexec.OverlayArgv(e.trampolineFor(cmd), ov.Dir, boundary, ov.MaxBytes, ov.MaxFiles, bwrap, bwrapArgv)
	attr := cmd.SysProcAttr
	uid, gid := uint32(os.Geteuid()), uint32(os.Getegid())
	var groups []uint32
	if c := attr.Credential; c != nil {
		uid, gid, groups = c.Uid, c.Gid, c.Groups
		if err := runAsOverlayDir(ov.Dir, c); err != nil {
			run.close()
			return nil, err
		}
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

// runAsOverlayDir readies the transaction's directory for a trampoline
// that runs as the --run-as user c (in a user namespace where it has no
// power over inodes of other owners): the directory, the daemon's fresh
// one, becomes that user's, and every directory above it must be
// searchable by that user, or the transaction is refused naming the one
// that is not (the trampoline mounts on the directory by its name).
func runAsOverlayDir(dir string, c *syscall.Credential) error {
	if err := os.Chown(dir, int(c.Uid), int(c.Gid)); err != nil {
		return &errcode.Error{Code: errcode.WriteFailed, Op: "exec", Path: dir, Err: err,
			Msg: fmt.Sprintf("cannot give the transaction's directory to the --run-as user (uid %d): %v; nothing ran", c.Uid, err)}
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			return &errcode.Error{Code: errcode.NotImplemented, Op: "exec", Path: d, Err: err, Msg: "cannot check the transaction's directory: " + err.Error()}
		}
		if !searchable(st, c) {
			return &errcode.Error{Code: errcode.NotImplemented, Op: "exec", Path: d,
				Msg: fmt.Sprintf("transactions under --run-as need every directory above the transaction's searchable by that user (uid %d), and %s is mode %04o owned by uid %d: make it 0711 (the daemon makes its own transactions directories so), or give --state-dir a directory that user may search; nothing ran",
					c.Uid, d, st.Mode&0o7777, st.Uid)}
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

// searchable reports whether the user c may search the directory st
// describes by its mode bits (owner, group, other), as the kernel judges
// a process without capabilities over it.
func searchable(st unix.Stat_t, c *syscall.Credential) bool {
	switch {
	case st.Uid == c.Uid:
		return st.Mode&0o100 != 0
	case st.Gid == c.Gid || slices.Contains(c.Groups, st.Gid):
		return st.Mode&0o010 != 0
	}
	return st.Mode&0o001 != 0
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
// in parent, the daemon's own directory under its state directory's
// transactions (OverlayParent.Dir), which it makes first (0711) if
// missing; parent must lie outside the workspace
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
	// Searchable, not listable, by others (0711): a --run-as user's
	// trampoline mounts on the transaction's directory by its name
	// (runAsOverlayDir); the names below are random and each
	// transaction's directory is 0700.
	if err := os.MkdirAll(parent, 0o711); err != nil {
		return "", err
	}
	if err := os.Chmod(parent, 0o711); err != nil {
		return "", err
	}
	dir := filepath.Join(parent, id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// MakeOverlayParent makes the daemon's transactions directory (absolute;
// NewOverlayDir's parent's parent), or gives an existing one, mode 0711:
// searchable, not listable, so that a --run-as user's trampoline can
// reach its transaction's directory by name (runAsOverlayDir).
func MakeOverlayParent(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("the transactions directory %q must be an absolute path", dir)
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	return os.Chmod(dir, 0o711)
}

// RemoveOverlayDir removes a directory NewOverlayDir made.
func RemoveOverlayDir(dir string) error {
	unmountLeft(dir)
	if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
		return os.RemoveAll(dir)
	}
	return nil
}

// OverlayLockFile is the file in a daemon's directory of transaction
// directories (NewOverlayParent) on which the daemon holds an exclusive
// flock for its whole life: the lock, not the directory's name, says that
// the directory is in use.
const OverlayLockFile = "lock"

// OverlayParent is one daemon's own directory of transaction directories,
// <transactions>/d-<random>: NewOverlayDir's parent. The daemon holds an
// exclusive flock on its OverlayLockFile while the OverlayParent is open,
// so no other daemon's start (ClearOverlayDirs) takes or removes it,
// whatever pid namespace either runs in; the name is random, so two
// daemons never share one (a pid is unique within one pid namespace only:
// two containers' daemons are both pid 1).
type OverlayParent struct {
	// Dir is the directory: absolute, 0711, its name d- and 16 hex digits.
	Dir  string
	lock *os.File
}

// NewOverlayParent makes a fresh directory of its own in transactions
// (absolute; made 0711 first if missing, MakeOverlayParent) and takes
// its lock. A directory another daemon's ClearOverlayDirs removed between
// the mkdir and the lock (it had no lock yet) is noticed and made again
// under another name.
func NewOverlayParent(transactions string) (*OverlayParent, error) {
	if err := MakeOverlayParent(transactions); err != nil {
		return nil, err
	}
	pfd, err := unix.Open(transactions, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: transactions, Err: err}
	}
	defer unix.Close(pfd)
	for range 8 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		name := "d-" + hex.EncodeToString(b[:])
		p, err := lockNewParent(pfd, transactions, name)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, errParentTaken) {
			return nil, err
		}
		parentRetries.Add(1)
	}
	return nil, fmt.Errorf("the transactions directory %s: no directory of this daemon's own could be made and locked", transactions)
}

// errParentTaken: the fresh directory was removed or replaced before its
// lock was taken (another daemon's start cleared it); try another name.
var errParentTaken = errors.New("taken before it was locked")

// parentRetries counts the names NewOverlayParent found taken (tests).
var parentRetries atomic.Int64

// newParentPrefix names a daemon's directory while it is being made:
// made, its lock file created and locked under this name, then renamed to
// its d- name, so that no other daemon's start (ClearOverlayDirs) ever
// finds a d- directory whose lock is not yet held. ClearOverlayDirs leaves
// such a directory alone while it is younger than newParentAge (its maker
// is at work), and clears it past that (a maker killed half-way).
const newParentPrefix = ".new-"

// newParentAge is how long a directory being made is left alone; a
// variable so a test can make one old.
var newParentAge = time.Minute

// lockNewParent makes name in pfd (0711), under newParentPrefix first,
// creates its lock file and locks it, renames it to name (never over
// another), then checks that the name still leads to that very directory
// and that the lock file is still in it.
func lockNewParent(pfd int, transactions, name string) (*OverlayParent, error) {
	dir := filepath.Join(transactions, name)
	tmp := newParentPrefix + strings.TrimPrefix(name, "d-")
	if err := unix.Mkdirat(pfd, tmp, 0o711); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil, errParentTaken
		}
		return nil, &os.PathError{Op: "mkdir", Path: filepath.Join(transactions, tmp), Err: err}
	}
	dfd, err := unix.Openat(pfd, tmp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errParentTaken
	}
	defer unix.Close(dfd)
	// The umask may have taken search from others.
	if err := unix.Fchmod(dfd, 0o711); err != nil {
		return nil, &os.PathError{Op: "chmod", Path: dir, Err: err}
	}
	lfd, err := unix.Openat(dfd, OverlayLockFile, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EEXIST) {
			return nil, errParentTaken
		}
		return nil, &os.PathError{Op: "create", Path: filepath.Join(dir, OverlayLockFile), Err: err}
	}
	lock := os.NewFile(uintptr(lfd), filepath.Join(dir, OverlayLockFile))
	if err := unix.Flock(lfd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errParentTaken
		}
		return nil, fmt.Errorf("the transactions directory %s: locking %s: %w", dir, OverlayLockFile, err)
	}
	if err := unix.Renameat2(pfd, tmp, pfd, name, unix.RENAME_NOREPLACE); err != nil {
		_ = clearEntryAt(pfd, tmp)
		lock.Close()
		if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOENT) {
			return nil, errParentTaken
		}
		return nil, &os.PathError{Op: "rename", Path: dir, Err: err}
	}
	var byFD, byName, lst unix.Stat_t
	if unix.Fstat(dfd, &byFD) != nil || unix.Fstatat(pfd, name, &byName, unix.AT_SYMLINK_NOFOLLOW) != nil ||
		byFD.Dev != byName.Dev || byFD.Ino != byName.Ino || byFD.Nlink == 0 ||
		unix.Fstat(lfd, &lst) != nil || lst.Nlink == 0 {
		lock.Close()
		return nil, errParentTaken
	}
	return &OverlayParent{Dir: dir, lock: lock}, nil
}

// Close removes the directory (with what is left in it, mounts detached)
// while still holding its lock, then releases the lock. Idempotent.
func (p *OverlayParent) Close() error {
	if p.lock == nil {
		return nil
	}
	dir := filepath.Dir(p.Dir)
	err := clearEntry(dir, filepath.Base(p.Dir))
	p.lock.Close()
	p.lock = nil
	return err
}

// clearEntry detaches the mounts left on the transaction directories in
// parent/name and removes it, nothing followed by name.
func clearEntry(parent, name string) error {
	pfd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: parent, Err: err}
	}
	defer unix.Close(pfd)
	return clearEntryAt(pfd, name)
}

func clearEntryAt(pfd int, name string) error {
	if dfd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
		df := os.NewFile(uintptr(dfd), name)
		txs, _ := df.Readdirnames(-1)
		for _, tx := range txs {
			unmountLeftAt(dfd, tx)
		}
		df.Close()
	}
	root, err := os.OpenRoot("/proc/self/fd/" + strconv.Itoa(pfd))
	if err != nil {
		return err
	}
	defer root.Close()
	return root.RemoveAll(name)
}

// ClearOverlayDirs removes what daemons no longer running left in parent
// (an absolute path, the transactions directory): each daemon keeps its
// transaction directories in a directory of its own (OverlayParent) whose
// lock file it holds locked for its life, so a directory whose lock this
// call can take is a dead daemon's and is removed (its mounts detached
// first, the lock held until it is gone), and one whose lock is held is a
// live daemon's, in whatever pid namespace, and is left alone. What it
// cannot judge it leaves: a directory it cannot open, a lock file it
// cannot open or lock for another reason than its being held (a file
// system without flock). A directory without a lock file is a daemon's
// that died before locking it, or one being made this instant: this call
// creates the lock file and takes its lock before removing anything, and
// the maker, finding the lock taken or its file gone, makes another. A
// directory named by a pid (the
// layout of daemons before OverlayParent) is left while that pid is alive
// here. Nothing in parent is followed by name: each entry is opened
// beneath the one above it without following a symlink (a link planted
// there would otherwise have a root daemon detach the mount it names),
// and what is not a real directory is only removed itself. An entry that
// cannot be removed is left; only a parent that cannot be read is an
// error.
func ClearOverlayDirs(parent string) error {
	if !filepath.IsAbs(parent) {
		return fmt.Errorf("the transactions directory %q must be an absolute path", parent)
	}
	pfd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: parent, Err: err}
	}
	pf := os.NewFile(uintptr(pfd), parent)
	defer pf.Close()
	names, err := pf.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		if pid, err := strconv.Atoi(name); err == nil && pid != os.Getpid() && alive(pid) {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			_ = unix.Unlinkat(pfd, name, 0)
			continue
		}
		if strings.HasPrefix(name, newParentPrefix) && time.Since(time.Unix(int64(st.Ctim.Sec), int64(st.Ctim.Nsec))) < newParentAge {
			continue // a daemon making its directory (lockNewParent)
		}
		dfd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // cannot judge
		}
		// A directory without a lock file gets one: the lock is taken
		// before anything is removed, so that a daemon making that
		// directory this instant either finds its lock taken or its lock
		// file gone once it holds it (lockNewParent), and makes another.
		lfd, err := unix.Openat(dfd, OverlayLockFile, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0o600)
		unix.Close(dfd)
		if err != nil {
			continue // a lock file not to be opened (a symlink, no right): cannot judge
		}
		var lst unix.Stat_t
		if unix.Fstat(lfd, &lst) != nil || lst.Mode&unix.S_IFMT != unix.S_IFREG {
			unix.Close(lfd)
			continue
		}
		if err := unix.Flock(lfd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			// EWOULDBLOCK: a live daemon's. Anything else (ENOLCK,
			// EOPNOTSUPP): cannot judge.
			unix.Close(lfd)
			continue
		}
		_ = clearEntryAt(pfd, name)
		unix.Close(lfd)
	}
	return nil
}

// alive reports a process with that pid.
func alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// A root daemon mounts a transaction's tmpfs and overlay itself, in a
// private mount namespace of the command's own (privateOverlay: a thread
// that unshares it and forks bwrap), and runs the plain bwrap command with
// the overlay's directory in place of the workspace's descriptor: no
// trampoline, whose start (this whole program's package initialization)
// would cost more than the command. The mounts exist in that namespace
// only (the host's mount table never shows them), on the transaction's
// directory (under the daemon's state directory, 0700, outside every
// sandbox's binds), and end with it; the upper layer lives on through the
// descriptor Result.Upper holds. A daemon
// without the right to mount (not root, or root without CAP_SYS_ADMIN)
// takes the trampoline, which makes its own namespace for them. So does a
// root daemon with --run-as: bwrap, started as that user, resolves the
// overlay's directory by its name (from its descriptor), and the daemon's
// state directory is not that user's to traverse.
//
// overlayByTrampoline makes a root daemon take the trampoline too (tests
// and benchmarks compare the two).
var overlayByTrampoline = false

// OverlayByTrampoline sets whether a root daemon's transactions take the
// trampoline, as a daemon that is not root does, and returns the previous
// setting: for benchmarks and tests of other packages that compare the
// trampolines (tools/transactions). Never while commands run.
func OverlayByTrampoline(on bool) (was bool) {
	was, overlayByTrampoline = overlayByTrampoline, on
	return was
}

// hostOverlay is a transaction's mounts in the daemon's namespace.
type hostOverlay struct {
	dir     string
	tmp     *os.File // the tmpfs's root, holding upper/
	mounted bool     // the overlay is mounted on dir/merged
}

// errNoMountHere: this daemon may not mount (EPERM); the trampoline can.
var errNoMountHere = errors.New("no right to mount here")

// privateOverlay mounts ov's tmpfs and overlay (mountOverlay) in a mount
// namespace of their own, on a spawner's thread of their own: the thread
// unshares CLONE_NEWNS and makes every mount it sees private (so nothing
// it mounts propagates to the host's peers), then mounts. The command is
// forked from that thread (the returned spawner), so bwrap inherits the
// namespace: no other process sees the mounts, and a daemon killed while
// the command runs leaves none behind, the namespace ending with its last
// process. The caller stops the spawner once the command was waited for
// (bwrap's --die-with-parent is bound to the forking thread), which ends
// the thread.
func privateOverlay(ov *Overlay, wd *workdir) (*spawner, *hostOverlay, error) {
	sp := newSpawner()
	var h *hostOverlay
	err := sp.onThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			if errors.Is(err, unix.EPERM) {
				return errNoMountHere
			}
			return &errcode.Error{Code: errcode.NotImplemented, Op: "exec", Err: err,
				Msg: fmt.Sprintf("transactions need overlay mounts under bwrap, and here a mount namespace cannot be made (%v); nothing ran", err)}
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return &errcode.Error{Code: errcode.NotImplemented, Op: "exec", Err: err,
				Msg: fmt.Sprintf("transactions need overlay mounts under bwrap, and here the mounts cannot be made private (%v); nothing ran", err)}
		}
		// A descriptor opened in the host's namespace names a mount of
		// that namespace, which overlayfs refuses as a layer here: the
		// workspace is opened again by name, in this namespace, and must
		// be the very directory the file door validated (device and
		// inode), as the trampoline does.
		lower, err := os.OpenFile(wd.boundary, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return &errcode.Error{Code: errcode.NotImplemented, Op: "exec", Err: err,
				Msg: fmt.Sprintf("transactions need overlay mounts under bwrap, and here the workspace cannot be opened (%v); nothing ran", err)}
		}
		defer lower.Close()
		var want, got unix.Stat_t
		if err := unix.Fstat(int(wd.bfd.Fd()), &want); err != nil {
			return err
		}
		if err := unix.Fstat(int(lower.Fd()), &got); err != nil {
			return err
		}
		if want.Dev != got.Dev || want.Ino != got.Ino {
			return &errcode.Error{Code: errcode.ExecError, Op: "exec", Path: wd.boundary,
				Msg: "the workspace directory was replaced while the transaction was set up; nothing ran"}
		}
		h, err = mountOverlay(ov, wd, lower)
		return err
	})
	if err != nil {
		sp.stop()
		return nil, nil, err
	}
	return sp, h, nil
}

// mountOverlay mounts ov's tmpfs and the overlay of lower (wd's boundary,
// by descriptor, never its name) and puts the overlay in wd's place, so
// that every bwrap command built from wd (the direct path's retry
// included) binds the overlay.
func mountOverlay(ov *Overlay, wd *workdir, lower *os.File) (*hostOverlay, error) {
	refuse := func(what string, err error) error {
		return &errcode.Error{Code: errcode.NotImplemented, Op: "exec",
			Msg: fmt.Sprintf("transactions need overlay mounts under bwrap, and here %s (%v); nothing ran", what, err), Err: err}
	}
	var lst unix.Stat_t
	if err := unix.Fstat(int(lower.Fd()), &lst); err != nil {
		return nil, refuse("the workspace cannot be read", err)
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700", ov.MaxBytes, ov.MaxFiles)
	if err := unix.Mount("tmpfs", ov.Dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		if errors.Is(err, unix.EPERM) {
			return nil, errNoMountHere
		}
		return nil, refuse("the transaction's tmpfs cannot be mounted", err)
	}
	h := &hostOverlay{dir: ov.Dir}
	ok := false
	defer func() {
		if !ok {
			h.unmount()
		}
	}()
	var err error
	if h.tmp, err = os.OpenFile(ov.Dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0); err != nil {
		return nil, refuse("the transaction's tmpfs cannot be opened", err)
	}
	tfd := int(h.tmp.Fd())
	for _, d := range []string{"upper", "work", "merged"} {
		if err := unix.Mkdirat(tfd, d, 0o700); err != nil {
			return nil, refuse("mkdir "+d, err)
		}
	}
	// The merged view's root is upper/: it gets the workspace's mode and
	// owner, so the command sees its directory as it is.
	if err := unix.Fchmodat(tfd, "upper", lst.Mode&0o7777, 0); err != nil {
		return nil, refuse("chmod upper", err)
	}
	if err := unix.Fchownat(tfd, "upper", int(lst.Uid), int(lst.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, refuse("chown upper", err)
	}
	mopts := fmt.Sprintf("lowerdir=/proc/self/fd/%d,upperdir=%s/upper,workdir=%s/work,userxattr", lower.Fd(), ov.Dir, ov.Dir)
	if err := unix.Mount("overlay", ov.Dir+"/merged", "overlay", unix.MS_NOSUID|unix.MS_NODEV, mopts); err != nil {
		return nil, refuse("the kernel refused the overlay mount", err)
	}
	h.mounted = true
	merged, err := os.OpenFile(ov.Dir+"/merged", os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, refuse("the overlay cannot be opened", err)
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(merged.Fd()), &fs); err != nil || fs.Type != unix.OVERLAYFS_SUPER_MAGIC {
		merged.Close()
		return nil, refuse("what was opened is not the overlay", err)
	}
	old := wd.bfd
	wd.bfd = merged
	if wd.dfd != old {
		wd.extra = append(wd.extra, old)
	}
	ok = true
	return h, nil
}

// take hands the tmpfs's descriptor to the caller.
func (h *hostOverlay) take() *os.File {
	f := h.tmp
	h.tmp = nil
	return f
}

// unmount detaches the mounts (the tmpfs lives on while a descriptor of it
// is open) and closes what is not taken.
func (h *hostOverlay) unmount() {
	if h.mounted {
		_ = unix.Unmount(h.dir+"/merged", unix.MNT_DETACH)
	}
	_ = unix.Unmount(h.dir, unix.MNT_DETACH)
	if h.tmp != nil {
		h.tmp.Close()
	}
}

// unmountLeft detaches what a killed daemon may have left mounted on a
// transaction directory (a root daemon mounts there while a command runs),
// following no symlink (UMOUNT_NOFOLLOW; the directory is the daemon's
// own, made by NewOverlayDir).
func unmountLeft(dir string) {
	_ = unix.Unmount(dir+"/merged", unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
	_ = unix.Unmount(dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
}

// unmountLeftAt is unmountLeft for the entry name of the directory dfd,
// by descriptor: the entry is opened without following a symlink (only a
// real directory is taken), and the mounts are detached through the
// descriptor (/proc/self/fd/N names what was opened, not a path that
// could since lead elsewhere). A directory nothing is mounted on is left
// as it is (EINVAL).
func unmountLeftAt(dfd int, name string) {
	fd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if mfd, err := unix.Openat(fd, "merged", unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
		_ = unix.Unmount("/proc/self/fd/"+strconv.Itoa(mfd), unix.MNT_DETACH)
		unix.Close(mfd)
	}
	_ = unix.Unmount("/proc/self/fd/"+strconv.Itoa(fd), unix.MNT_DETACH)
}

//go:build linux

package sandboxexec

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// The overlay run of a transaction (sandbox/overlay.go): the daemon starts
// the trampoline in a user and mount namespace of its own, with the
// command's workspace directory on LowerFD and one end of a socket pair on
// SocketFD, and this argv:
//
//	agent-backend sandbox-exec --overlay <dir> <workspace> <max-bytes> <max-files> <bwrap> <bwrap argv...>
//
// The trampoline mounts a tmpfs of at most max-bytes and max-files on dir
// (the transaction's directory, outside the workspace), makes upper/, work/
// and merged/ in it, mounts an overlay on merged/ whose lower layer is the
// workspace directory the file door validated and whose upper layer is
// upper/,
// sends the daemon a descriptor of the tmpfs's root over the socket (so the
// upper layer outlives this mount namespace), puts merged/ on fd 3 in place
// of the workspace, and execs bwrap, whose --bind-fd 3 then binds the
// overlay at the workspace's path. The command writes into the tmpfs and
// never into the workspace; the tmpfs's size and inode count bound what it
// can write (ENOSPC past either).
//
// The lower layer: overlayfs takes a private clone of it, which the kernel
// allows only for a mount of the caller's own mount namespace, and fd 3 was
// opened in the daemon's. So the trampoline opens the workspace's name in
// its new namespace and goes on only if that is the very directory fd 3
// holds (same device and inode): a directory swapped for a symlink in
// between is refused, and the overlay's lowerdir is that new descriptor
// (/proc/self/fd/N), never the name again.
const (
	// LowerFD holds the workspace directory on entry and the merged
	// overlay when bwrap starts.
	LowerFD = 3
	// SocketFD is the trampoline's end of the socket pair it reports on:
	// one message, "ok" with the tmpfs root's descriptor, or the reason
	// the overlay could not be made (no descriptor).
	SocketFD = 4
)

const overlayFlag = "--overlay"

// OverlayArgv is the trampoline's argv for an overlay run of bwrap.
func OverlayArgv(self, dir, workspace string, maxBytes, maxFiles int64, bwrap string, bwrapArgv []string) []string {
	out := make([]string, 0, 8+len(bwrapArgv))
	out = append(out, self, Arg, overlayFlag, dir, workspace, strconv.FormatInt(maxBytes, 10), strconv.FormatInt(maxFiles, 10), bwrap)
	return append(out, bwrapArgv...)
}

// OverlayOK is the message of a trampoline that made the overlay.
const OverlayOK = "ok"

// runOverlay is the trampoline of an overlay run; it never returns on
// success (bwrap replaces it).
func runOverlay(args []string) int {
	runtime.LockOSThread()
	err := overlay(args)
	if err == nil {
		err = errors.New("the overlay run ended without running bwrap")
	}
	// Whatever happened, the daemon learns it: the reason, when there is
	// no descriptor to send.
	msg := err.Error()
	_ = syscall.Sendmsg(SocketFD, []byte(msg), nil, nil, 0)
	return fail(126, err)
}

// overlay sets the overlay up and execs bwrap; it returns only an error.
func overlay(args []string) error {
	if len(args) < 7 {
		return fmt.Errorf("want <dir> <workspace> <max-bytes> <max-files> <bwrap> <argv...>, got %d arguments", len(args))
	}
	dir, ws, bwrap, argv := args[0], args[1], args[4], args[5:]
	maxBytes, err1 := strconv.ParseInt(args[2], 10, 64)
	maxFiles, err2 := strconv.ParseInt(args[3], 10, 64)
	if err1 != nil || err2 != nil || maxBytes <= 0 || maxFiles <= 0 {
		return fmt.Errorf("bad limits %q %q", args[2], args[3])
	}
	// The overlay's options are a comma-separated list; the daemon checks
	// its directories hold no separator, and so does this.
	if strings.ContainsAny(dir, ",:\\") || !strings.HasPrefix(dir, "/") {
		return fmt.Errorf("the transaction directory %q must be absolute without ',', ':' or '\\'", dir)
	}
	// Nothing mounted here may reach the host's namespace: a namespace
	// made by an unprivileged user gets its mounts as slaves anyway; this
	// makes it so for root too.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mounts private: %w", err)
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700", maxBytes, maxFiles)
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mounting the transaction's tmpfs: %w", err)
	}
	var lower syscall.Stat_t
	if err := syscall.Fstat(LowerFD, &lower); err != nil {
		return fmt.Errorf("the workspace on fd %d: %w", LowerFD, err)
	}
	if lower.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return fmt.Errorf("fd %d is not a directory", LowerFD)
	}
	lfd, err := syscall.Open(ws, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the workspace in the overlay's namespace: %w", err)
	}
	var again syscall.Stat_t
	if err := syscall.Fstat(lfd, &again); err != nil {
		return fmt.Errorf("the workspace: %w", err)
	}
	if again.Dev != lower.Dev || again.Ino != lower.Ino {
		return errors.New("the workspace directory was replaced while the overlay was being set up")
	}
	for _, d := range []string{"upper", "work", "merged"} {
		if err := syscall.Mkdir(dir+"/"+d, 0o700); err != nil {
			return fmt.Errorf("mkdir %s: %w", d, err)
		}
	}
	// The root of the merged view is upper/ itself: give it the
	// workspace's mode and owner, so the command sees its directory as
	// it is.
	if err := syscall.Chmod(dir+"/upper", lower.Mode&0o7777); err != nil {
		return fmt.Errorf("chmod upper: %w", err)
	}
	_ = syscall.Lchown(dir+"/upper", int(lower.Uid), int(lower.Gid)) // an unmapped owner stays ours
	mopts := fmt.Sprintf("lowerdir=/proc/self/fd/%d,upperdir=%s/upper,workdir=%s/work,userxattr", lfd, dir, dir)
	if err := syscall.Mount("overlay", dir+"/merged", "overlay", 0, mopts); err != nil {
		return fmt.Errorf("mounting the overlay (the kernel refused it: %w)", err)
	}
	root, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the transaction's tmpfs: %w", err)
	}
	merged, err := syscall.Open(dir+"/merged", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the overlay: %w", err)
	}
	// fd 3 becomes the overlay (dup3 without O_CLOEXEC: bwrap inherits it).
	if err := syscall.Dup3(merged, LowerFD, 0); err != nil {
		return fmt.Errorf("dup3: %w", err)
	}
	syscall.Close(merged)
	syscall.Close(lfd)
	if err := syscall.Sendmsg(SocketFD, []byte(OverlayOK), syscall.UnixRights(root), nil, 0); err != nil {
		return fmt.Errorf("sending the upper layer: %w", err)
	}
	syscall.Close(root)
	syscall.Close(SocketFD)
	// bwrap refuses to run with capabilities it did not get by setuid:
	// the ones this namespace gave the trampoline (ambient included) go.
	if err := clearCapabilities(); err != nil {
		return err
	}
	err = syscall.Exec(bwrap, argv, []string{})
	// The socket is closed: report on stderr only.
	os.Exit(fail(126, fmt.Errorf("%s: %w", bwrap, err)))
	return nil
}

// clearCapabilities empties the ambient, effective, permitted and
// inheritable sets (not the bounding set: bwrap makes its own namespace,
// whose capabilities it needs).
func clearCapabilities() error {
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0); errno != 0 && errno != syscall.EINVAL {
		return fmt.Errorf("clearing the ambient capabilities: %w", errno)
	}
	if os.Getuid() == 0 {
		// Root in the namespace gets them back at exec; bwrap accepts root.
		return nil
	}
	hdr := struct {
		version uint32
		pid     int32
	}{version: capabilityVersion3}
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return errors.New("capset: " + errno.Error())
	}
	return nil
}

package fsops

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// This file: who owns what the directory workspace creates.
//
// A root daemon with --run-as runs its commands as another user, while its
// file tools, SFTP and scp work as root. Without Options.Owner every file
// and directory they made would be root's, which the commands can read but
// not change or remove from: an agent that writes a file with write_file
// could not then edit it with sed. With it, the workspace gives each entry
// it creates (a file, a directory, a symlink, the directory of a scope) to
// the owner, and a file WriteFile or Edit replaces whole keeps the owner
// it had (a checkpoint's restore or a transaction's apply writes a new
// file, which is the owner's).
//
// Only an entry this workspace has just created is given away, and only
// through a descriptor, never by a name a command could change meanwhile
// (a command runs as the owner, concurrently, and may rename, symlink and
// hard-link what that user may; TestOwnerAttack*, owner_attack_test.go):
//
//   - a file opened with O_CREATE is first tried with O_EXCL, and only what
//     that open made is changed, through the descriptor it returned; a name
//     that exists already (a dangling symlink among them, which the plain
//     open then follows) is opened as asked and keeps its owner;
//   - a directory is made with mkdirat in its parent, opened once
//     beforehand, so a parent renamed or replaced by a symlink meanwhile
//     cannot move the change elsewhere; the new name is then opened in that
//     parent with O_NOFOLLOW|O_DIRECTORY, and changed through that
//     descriptor only if it is an empty directory of the daemon's user;
//   - a symlink is made with symlinkat in its directory's descriptor, and
//     opened there with O_PATH|O_NOFOLLOW, and changed through that
//     descriptor only if it is a symlink of the daemon's user with the
//     target just written.
//
// What a swap at the new name can still get changed is what passes those
// checks: an empty directory, or a symlink, of the daemon's user that the
// command could move there, so one in a directory the owner may write,
// which the command could as well remove and make again as its own.
// Something else there (a file, a hard link to one outside the workspace,
// another user's entry, a directory with entries) is left as it is and the
// operation fails as if the name had been taken (EEXIST); the entry just
// made, moved away by the swap, keeps the daemon's owner. A file WriteFile replaces
// keeps the owner it had and only its permission bits (no setuid or
// setgid), through the temp file's descriptor; the old file is replaced,
// not written through, so a hard link of it elsewhere is left alone.

// Owner is the user and group of Options.Owner.
type Owner struct {
	UID, GID int
}

// failOwner, when set (tests only), is the error of every change of owner.
var failOwner error

// ownRace, when set (tests only), runs after an entry is created and
// before it is given to the owner: where a concurrent command could swap
// the name.
var ownRace func()

// chown runs one change of owner, or fails with failOwner.
func chown(do func() error) error {
	if failOwner != nil {
		return failOwner
	}
	return do()
}

// ownNew gives f, a file this workspace has just created, to the owner.
func (w *dirWS) ownNew(f *os.File) error {
	o := w.opts.Owner
	if o == nil {
		return nil
	}
	return chown(func() error { return f.Chown(o.UID, o.GID) })
}

// keepOwner gives f (the temp file that will replace old) old's owner,
// where that is not the owner f already has.
func (w *dirWS) keepOwner(f *os.File, old fs.FileInfo) error {
	if w.opts.Owner == nil {
		return nil
	}
	st, ok := old.Sys().(*syscall.Stat_t)
	if !ok {
		return w.ownNew(f)
	}
	return chown(func() error { return f.Chown(int(st.Uid), int(st.Gid)) })
}

// createFile opens rel with flag, which holds os.O_CREATE, and gives the
// file to the owner when this open created it. Without an owner it is the
// plain open.
func (w *dirWS) createFile(r *os.Root, rel string, flag int, perm fs.FileMode) (*os.File, error) {
	if w.opts.Owner == nil {
		return r.OpenFile(rel, flag, perm)
	}
	f, err := r.OpenFile(rel, flag|os.O_EXCL, perm)
	switch {
	case err == nil:
		if err := w.ownNew(f); err != nil {
			f.Close()
			r.Remove(rel)
			return nil, err
		}
		return f, nil
	case flag&os.O_EXCL != 0 || !errors.Is(err, fs.ErrExist):
		return nil, err
	}
	return r.OpenFile(rel, flag, perm)
}

// mkdir creates the directory rel (its parent must exist) and gives it to
// the owner. With an owner the parent is opened first (through r, which
// resolves it as r.Mkdir would), and the directory is made, checked and
// changed in that descriptor (owner.go's header says why).
func (w *dirWS) mkdir(r *os.Root, rel string) error {
	o := w.opts.Owner
	if o == nil {
		return r.Mkdir(rel, 0o755)
	}
	dir, name := path.Split(rel)
	if dir = strings.TrimSuffix(dir, "/"); dir == "" {
		dir = "."
	}
	pf, err := r.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer pf.Close()
	sc, err := pf.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := sc.Control(func(pfd uintptr) {
		if serr = unix.Mkdirat(int(pfd), name, 0o755); serr == nil {
			serr = ownDirAt(o, int(pfd), name)
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &fs.PathError{Op: "mkdirat", Path: rel, Err: serr}
	}
	return nil
}

// mkdirs creates rel and its missing parents (os.Root's MkdirAll), giving
// each directory it creates to the owner.
func (w *dirWS) mkdirs(r *os.Root, rel string) error {
	if w.opts.Owner == nil {
		return r.MkdirAll(rel, 0o755)
	}
	for i := 0; i <= len(rel); i++ {
		if i < len(rel) && rel[i] != '/' {
			continue
		}
		p := rel[:i]
		if p == "" || strings.HasSuffix(p, "/") || p == "." || strings.HasSuffix(p, "/.") {
			continue
		}
		err := w.mkdir(r, p)
		if err == nil || !errors.Is(err, fs.ErrExist) {
			if err != nil {
				return err
			}
			continue
		}
		// There already: a directory (or a symlink to one) is walked
		// through; where it cannot be read, its error is the answer (an
		// absolute symlink's, which os.Root refuses, is the escape that
		// inRoot's fallback rewrites, as MkdirAll's is); anything else
		// fails as MkdirAll fails.
		fi, serr := r.Stat(p)
		if serr != nil {
			return serr
		}
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: p, Err: syscall.ENOTDIR}
		}
	}
	return nil
}

// errTaken is the answer where the name of an entry just made holds
// something else by the time it is given away: a swap by a command.
const errTaken = syscall.EEXIST

// ownDirAt gives the directory name in dirfd, just made there, to o: the
// name opened without following a symlink, and changed through that
// descriptor only if it is an empty directory of the daemon's user (else
// errTaken, and nothing is changed). Where the change fails the directory
// is removed again, so no entry is left that the commands could not
// change.
func ownDirAt(o *Owner, dirfd int, name string) error {
	if ownRace != nil {
		ownRace()
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return errTaken // a symlink, no directory, or gone
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if int(st.Uid) != os.Geteuid() || !emptyDir(fd) {
		return errTaken
	}
	if err := chown(func() error { return unix.Fchown(fd, o.UID, o.GID) }); err != nil {
		unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
		return err
	}
	return nil
}

// emptyDir says whether the directory fd has no entry but . and ..
func emptyDir(fd int) bool {
	var buf [512]byte
	n, err := unix.ReadDirent(fd, buf[:])
	if err != nil {
		return false
	}
	consumed, count, _ := unix.ParseDirent(buf[:n], -1, nil)
	return consumed == n && count == 0
}

package fsops

import (
	"errors"
	"io/fs"
	"os"
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
// Only an entry this workspace has just created is given away, and a file
// through its own descriptor: a file opened with O_CREATE is first tried
// with O_EXCL, and only what that open made is changed; a name that exists
// already (a dangling symlink among them, which the plain open then
// follows) is opened as asked and keeps its owner. A directory (made by
// mkdirat, which has no descriptor to give) and a symlink are changed by
// name in the directory that was just written, without following a final
// symlink; a swap in between can move that change only onto another entry
// of the same workspace, which its file tools could change anyway.

// Owner is the user and group of Options.Owner.
type Owner struct {
	UID, GID int
}

// failOwner, when set (tests only), is the error of every change of owner.
var failOwner error

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
// the owner.
func (w *dirWS) mkdir(r *os.Root, rel string) error {
	if err := r.Mkdir(rel, 0o755); err != nil {
		return err
	}
	return w.ownDir(r, rel)
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
		// through; anything else fails as MkdirAll fails.
		if fi, serr := r.Stat(p); serr != nil || !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: p, Err: syscall.ENOTDIR}
		}
	}
	return nil
}

// ownDir gives the directory rel, just created, to the owner; where that
// fails the directory is removed again, so no entry is left that the
// commands could not change.
func (w *dirWS) ownDir(r *os.Root, rel string) error {
	o := w.opts.Owner
	if o == nil {
		return nil
	}
	if err := chown(func() error { return r.Lchown(rel, o.UID, o.GID) }); err != nil {
		r.Remove(rel)
		return err
	}
	return nil
}

// ownLinkAt gives the symlink name in the directory dirfd, just created,
// to the owner, and removes it where that fails.
func ownLinkAt(o *Owner, dirfd int, name string) error {
	if o == nil {
		return nil
	}
	if err := chown(func() error { return unix.Fchownat(dirfd, name, o.UID, o.GID, unix.AT_SYMLINK_NOFOLLOW) }); err != nil {
		unix.Unlinkat(dirfd, name, 0)
		return err
	}
	return nil
}

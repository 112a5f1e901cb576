package fsops

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// This file: writes (whole files, edits, directories, moves, removal).

// writeHook, when set (tests only), replaces the write of the temp file's
// content so a test can make WriteFile fail midway.
var writeHook func(f *os.File, data []byte) error

func (w *dirWS) WriteFile(p string, data []byte) error {
	return w.run(opWrite, p, true, true, func(r *os.Root, rel string) error {
		return w.atomicWrite(r, rel, data)
	})
}

// atomicWrite writes data to a temp file next to rel and renames it over rel,
// so readers see the old or the new content, never a mix, and a failure leaves
// the old file. With Options.Fsync the temp file's data is synced before the
// rename and the directory after it (durable.go), so after a power cut the
// file is the old content or the whole new one; without it the write is
// atomic against readers and our own failures only.
func (w *dirWS) atomicWrite(r *os.Root, rel string, data []byte) error {
	if rel == "." {
		return &fs.PathError{Op: "write", Path: rel, Err: syscall.EISDIR}
	}
	perm := fs.FileMode(0o644)
	existing := false
	fi, err := r.Lstat(rel)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		// Write through the link (as writeFile does) rather than replace it.
		target, ferr := w.resolveLinks(r, rel)
		if ferr != nil {
			return ferr
		}
		rel = target
		if fi, err = r.Lstat(rel); err == nil {
			existing = true
		} else if !isNotExist(err) {
			return err
		}
	case err == nil:
		existing = true
	case isNotExist(err):
	default:
		return err
	}
	if existing {
		if fi.IsDir() {
			return &fs.PathError{Op: "write", Path: rel, Err: syscall.EISDIR}
		}
		perm = fi.Mode().Perm()
	}
	dir, base := path.Split(rel)
	created := false
	if dir != "" {
		if _, err := r.Lstat(strings.TrimSuffix(dir, "/")); err != nil {
			created = true
		}
		if err := w.mkdirs(r, strings.TrimSuffix(dir, "/")); err != nil {
			return err
		}
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	if len(base) > 200 {
		base = base[:200]
	}
	tmp := dir + "." + base + ".agentbe-tmp-" + hex.EncodeToString(rnd[:])
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if existing {
		f.Chmod(perm) // keep the old mode exactly (the umask applied to the create)
		err = w.keepOwner(f, fi)
	} else {
		err = w.ownNew(f)
	}
	switch {
	case err != nil:
	case writeHook != nil:
		err = writeHook(f, data)
	default:
		_, err = f.Write(data)
	}
	if err == nil {
		err = w.syncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Rename(tmp, rel)
	}
	if err != nil {
		r.Remove(tmp)
		return err
	}
	return w.syncDirs(r, parentDirs(rel, created)...)
}

func (w *dirWS) Edit(p string, edits []Edit, dryRun bool) (EditResult, error) {
	return editFile(w, p, edits, dryRun, w.opts.maxRead())
}

// editFile is Edit for any Workspace: read the whole file (bounded by the
// maximum read size), apply the edits (their result bounded by max, the
// same size), and write the result atomically
// unless it is a dry run or nothing changed.
func editFile(ws Workspace, p string, edits []Edit, dryRun bool, max int64) (EditResult, error) {
	orig, err := ws.ReadFile(p)
	if err != nil {
		return EditResult{}, withOp(err, opEdit)
	}
	res, modified, changed, err := applyEdits(p, string(orig), edits, dryRun, max)
	if err != nil {
		return EditResult{}, err
	}
	if changed && !dryRun {
		if err := ws.WriteFile(p, []byte(modified)); err != nil {
			return EditResult{}, withOp(err, opEdit)
		}
	}
	return res, nil
}

func (w *dirWS) Mkdir(p string, parents bool) error {
	return w.run(opMkdir, p, true, true, func(r *os.Root, rel string) error {
		if parents {
			if rel == "." {
				return nil
			}
			if err := w.mkdirs(r, rel); err != nil {
				return err
			}
			return w.syncDirs(r, append([]string{rel}, parentDirs(rel, true)...)...)
		}
		if err := w.mkdir(r, rel); err != nil {
			return err
		}
		return w.syncDirs(r, path.Dir(rel))
	})
}

func (w *dirWS) Move(src, dst string) error {
	if _, err := w.Lstat(src); err != nil {
		if errcode.Is(err, errcode.NotFound) {
			return &errcode.Error{Code: errcode.NotFound, Op: "move", Path: src, Msg: "source does not exist", Err: fs.ErrNotExist}
		}
		return withOp(err, opMove)
	}
	switch _, err := w.Lstat(dst); {
	case err == nil:
		return hinted(errcode.AlreadyExists, "move", dst, "destination already exists", "remove it first or choose another name")
	case !errcode.Is(err, errcode.NotFound):
		return withOp(err, opMove)
	}
	return withOp(w.rename(opMove, src, dst), opMove)
}

func (w *dirWS) Rename(src, dst string) error { return w.rename(opRename, src, dst) }

func (w *dirWS) rename(o op, src, dst string) error {
	srel, err := w.rel(src)
	if err != nil {
		return err
	}
	drel, err := w.rel(dst)
	if err != nil {
		return err
	}
	if srel == "." || drel == "." {
		return errcode.New(errcode.InvalidArgument, o.name, src, "cannot move the workspace root itself")
	}
	r, err := w.handle(true)
	if err != nil {
		return mapErr(o, src, err)
	}
	// Intermediate links may be absolute-but-inside: the name os.Root can
	// reach them by (the fallback on an lstat, which only an escape fails);
	// the final components are renamed, not followed.
	fix := func(rel, p string) (string, error) {
		rel2, err := inRoot(w, r, rel, false, func(r *os.Root, rel string) (string, error) {
			if _, err := r.Lstat(rel); err != nil && errcode.Is(mapErr(o, p, err), errcode.PathEscapeAttempt) {
				return rel, err
			}
			return rel, nil
		})
		if err != nil {
			return "", mapErr(o, p, err)
		}
		return rel2, nil
	}
	if srel, err = fix(srel, src); err != nil {
		return err
	}
	if drel, err = fix(drel, dst); err != nil {
		return err
	}
	if d := path.Dir(drel); d != "." {
		if err := w.mkdirAll(r, d); err != nil {
			return mapErr(o, dst, err)
		}
	}
	err = r.Rename(srel, drel)
	if err == nil {
		if err := w.syncDirs(r, append([]string{path.Dir(srel)}, parentDirs(drel, true)...)...); err != nil {
			return mapErr(o, dst, err)
		}
		return nil
	}
	if err != nil {
		var le *os.LinkError
		if errors.As(err, &le) && isNotExist(err) {
			if _, serr := r.Lstat(srel); serr != nil {
				return mapErr(o, src, err)
			}
			return mapErr(o, dst, err)
		}
		if e := mapErr(o, dst, err); !errcode.Is(e, errcode.PathEscapeAttempt) {
			return e
		}
		return mapErr(o, src+" -> "+dst, err)
	}
	return nil
}

func (w *dirWS) Remove(p string, opts RemoveOptions) error {
	rel, err := w.rel(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return errcode.New(errcode.InvalidArgument, "rm", p, "refusing to remove the workspace root itself; remove its entries instead")
	}
	return w.run(opRm, p, false, false, func(r *os.Root, rel string) error {
		if _, err := r.Lstat(rel); err != nil {
			if opts.Force && isNotExist(err) {
				return nil
			}
			return err
		}
		var err error
		if opts.Recursive {
			err = r.RemoveAll(rel)
		} else {
			err = r.Remove(rel)
		}
		if err != nil {
			return err
		}
		return w.syncDirs(r, path.Dir(rel))
	})
}

func (w *dirWS) Touch(p string) error {
	return w.run(opTouch, p, true, true, func(r *os.Root, rel string) error {
		if rel == "." {
			return nil
		}
		if d := path.Dir(rel); d != "." {
			if err := w.mkdirs(r, d); err != nil {
				return err
			}
		}
		if _, err := r.Stat(rel); err == nil {
			return nil // exists: touch never truncates (and opens nothing)
		}
		// No O_TRUNC: a file created meanwhile is not truncated either.
		f, err := w.createFile(r, rel, os.O_WRONLY|os.O_CREATE|openNoWait, 0o644)
		if err != nil {
			if errors.Is(err, syscall.EISDIR) {
				return nil // touching a directory is fine
			}
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		return w.syncDirs(r, parentDirs(rel, true)...)
	})
}

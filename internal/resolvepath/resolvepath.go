// Package resolvepath walks a path as the kernel does (Walk): the one
// walker of an operator's path, which internal/opfile.CheckModes judges
// each component of. With it, it tells where a path leads once its
// symlinks are followed, and whether that is inside a directory: the one
// implementation of "this operator file lies outside the workspace"
// (config's rule for the operator's path flags, the daemon's audit log, the
// client's daemon binary).
package resolvepath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentbe/agentbe-daemon/internal/mountinfo"
)

// MaxLinks bounds the symlinks followed while walking one path: the
// kernel's own limit, past which an open fails with ELOOP (a loop ends
// here with ErrTooManyLinks).
const MaxLinks = 40

// ErrTooManyLinks is Walk's error for a path that holds more than
// MaxLinks symlinks on the way (or a loop of them).
var ErrTooManyLinks = errors.New("too many levels of symbolic links (more than 40, as the kernel follows)")

// ErrStopWalk, returned by a Walk's visit, ends the walk there without an error.
var ErrStopWalk = errors.New("stop the walk")

// Step is one component of a path as Walk meets it.
type Step struct {
	// Path is the component's path, the links before it followed.
	Path string
	// Info is its Lstat; nil when that failed (Err says why:
	// fs.ErrNotExist, syscall.ENOTDIR below a file, or another).
	Info fs.FileInfo
	Err  error
	// Last is set when nothing of the path follows it (a link's target
	// may).
	Last bool
}

// Walk walks p as the kernel walks it when p is opened, or created (its
// directories made first), as it is now: every component in turn, symlinks
// followed one by one (a dangling link to where its target would be
// created, as open with O_CREATE follows it), ".." from where the walk is
// (so "link/../x" is beside the link's target), and a missing component
// taken as the directory or file the daemon creates there, never a link.
// It returns the absolute path p leads to. visit, when not nil, is called
// for "/" and then for each component met, with its Lstat, before the walk
// follows it (a link) or goes into it: an error it returns ends the walk
// with that error, ErrStopWalk without one. It is the one walker of the two
// rules that follow an operator's path: where it leads (Resolve, Within)
// and who may change what is on the way (internal/opfile.CheckModes).
func Walk(p string, visit func(Step) error) (string, error) {
	// Not filepath.Abs, which cleans: "link/../x" is x beside the link's
	// target, as the kernel walks it, not x beside the link.
	abs := p
	if !filepath.IsAbs(p) {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		abs = wd + string(filepath.Separator) + p
	}
	resolved := string(filepath.Separator)
	if visit != nil {
		fi, err := os.Lstat(resolved)
		if err := visit(Step{Path: resolved, Info: fi, Err: err}); err != nil {
			return stopped(resolved, err)
		}
	}
	return walk(resolved, strings.Split(abs, string(filepath.Separator)), visit)
}

// WalkFrom is Walk of rel taken from dir, a directory that a walk has
// already met as one (a Step's Path whose Info is a directory, which
// holds no symlink, "." or ".."): visit is called for the components of
// rel only, dir and those above it being the caller's to have judged.
// internal/opfile.Judge walks the pages of one request from the
// directories they share this way.
func WalkFrom(dir, rel string, visit func(Step) error) (string, error) {
	return walk(dir, strings.Split(rel, string(filepath.Separator)), visit)
}

// walk is Walk's loop: the components rest, from the directory resolved.
func walk(resolved string, rest []string, visit func(Step) error) (string, error) {
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, c)
		fi, err := os.Lstat(next)
		if visit != nil {
			if verr := visit(Step{Path: next, Info: fi, Err: err, Last: len(rest) == 0}); verr != nil {
				return stopped(next, verr)
			}
		}
		if errors.Is(err, fs.ErrNotExist) {
			// Not there: created as a directory (or, last, the file),
			// never a link; a ".." after it climbs back to where links
			// are followed again ("missing/../link/x").
			resolved = next
			continue
		}
		if errors.Is(err, syscall.ENOTDIR) {
			// Below a file: nothing can be created there; the rest as
			// named.
			return filepath.Join(append([]string{next}, rest...)...), nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if links++; links > MaxLinks {
			return "", ErrTooManyLinks
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			resolved = string(filepath.Separator)
		}
		rest = append(strings.Split(target, string(filepath.Separator)), rest...)
	}
	return resolved, nil
}

// stopped is Walk's answer when visit returned err at path.
func stopped(path string, err error) (string, error) {
	if err == ErrStopWalk {
		return path, nil
	}
	return "", err
}

// Resolve returns the absolute path p leads to when it is opened, or
// created (its directories made first), as it is now (Walk).
func Resolve(p string) (string, error) {
	r, err := Walk(p, nil)
	if errors.Is(err, ErrTooManyLinks) {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return r, err
}

// Within reports whether p is dir or lies below it once both are resolved
// (Resolve): a symlink from outside that leads in, or a ".." that climbs
// back in, is inside. A directory mounted a second time elsewhere (a bind
// mount) is the same directory: an existing ancestor of p that is dir's
// very directory counts too, and so does a path below a mount of a part
// of dir (a bind mount of dir/sub, a subPath of the same volume), told
// from the mount table.
func Within(dir, p string) (bool, error) {
	d, err := Resolve(dir)
	if err != nil {
		return false, err
	}
	f, err := Resolve(p)
	if err != nil {
		return false, err
	}
	if under(d, f) {
		return true, nil
	}
	dfi, err := os.Stat(d)
	if err != nil {
		return false, nil // dir does not exist yet: nothing else is it
	}
	for cur := f; ; {
		if fi, err := os.Stat(cur); err == nil && os.SameFile(fi, dfi) {
			return true, nil
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			break
		}
		cur = parent
	}
	// A part of dir mounted elsewhere (a bind mount of dir/sub, a
	// container's subPath of the same volume) is still dir's: the walk
	// above climbs from that mount's top to its mount point, never to
	// dir. Both are placed on their filesystems as the mount table says.
	mounts, err := readMounts(mountInfo)
	if err != nil {
		return false, nil // no mount table (no /proc): the paths have said
	}
	ddev, dpath, dok := onFilesystem(d, mounts)
	fdev, fpath, fok := onFilesystem(f, mounts)
	return dok && fok && ddev == fdev && under(dpath, fpath), nil
}

// mountInfo is this process's mount table.
const mountInfo = "/proc/self/mountinfo"

// readMounts reads the mount table at name (proc(5)'s mountinfo format).
func readMounts(name string) ([]mountinfo.Mount, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return mountinfo.Parse(data), nil
}

// onFilesystem places the resolved path p on its filesystem: the device
// of the mount it lies in (the deepest mount point above it, the last
// mounted of those there) and its path from that filesystem's root.
func onFilesystem(p string, mounts []mountinfo.Mount) (dev, path string, ok bool) {
	best := -1
	for i, m := range mounts {
		if under(m.Point, p) && (best < 0 || len(m.Point) >= len(mounts[best].Point)) {
			best = i
		}
	}
	if best < 0 {
		return "", "", false
	}
	m := mounts[best]
	rel, err := filepath.Rel(m.Point, p)
	if err != nil {
		return "", "", false
	}
	return m.Dev, filepath.Join(m.Root, rel), true
}

// under reports whether the clean absolute path p is dir or below it.
func under(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}

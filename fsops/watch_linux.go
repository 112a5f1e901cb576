//go:build linux

package fsops

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// This file: watching a directory tree of a workspace for changes
// (inotify), for the watch_changes tool (tools/watch), which keeps
// the events, cursors and bounds of its callers.
//
// Confinement: the watched directory is opened by the workspace (the
// caller's scope, no link out) and kept as an os.Root; every directory
// below it is opened through that root (which refuses a way out; a final
// link is not followed) and watched by its descriptor (inotify_add_watch
// on /proc/self/fd/N), never by a name resolved again. A directory is
// kept as its parent and its name, so a deep tree costs a name per
// directory; none whose path passes MaxPath bytes is watched.

// Change is one change under a watched tree.
type Change struct {
	Path string // relative to the watched directory, "/"-separated
	Op   string // create, write, remove, rename or chmod
}

// TreeWatchOptions bound a TreeWatch.
type TreeWatchOptions struct {
	MaxDirs int // directories watched at most; 0 means 4096
	MaxPath int // longest path watched, in bytes; 0 means 4096
}

// TreeWatch follows a directory of a workspace and every directory below
// it. Its callbacks run on its own goroutine, one at a time.
type TreeWatch struct {
	top  *os.Root
	id   FileID
	opts TreeWatchOptions
	ifd  *os.File // the inotify instance

	onChange   func(Change)
	onOverflow func() // changes may be missing: the kernel dropped events, or a new directory is not watched (MaxDirs)
	onGone     func() // the watched directory itself was moved or removed

	mu   sync.Mutex
	dirs map[int32]watchedDir // watch descriptor → where the directory is in the tree
	once sync.Once
}

// watchedDir is a watched directory: its parent's watch descriptor (-1
// for the top) and its name there.
type watchedDir struct {
	parent int32
	name   string
}

// watchMask is what each directory is watched for.
const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// WatchTree starts watching dir of ws and the directories below it.
// onChange is told every change, onOverflow when some may be missing (the
// kernel dropped events, or a directory made below dir is past MaxDirs or
// the system's watch limit, so what happens in it is not seen),
// onGone when dir itself was moved or removed (the watch then ends).
func WatchTree(ws Workspace, dir string, opts TreeWatchOptions, onChange func(Change), onOverflow, onGone func()) (*TreeWatch, error) {
	if opts.MaxDirs <= 0 {
		opts.MaxDirs = 4096
	}
	if opts.MaxPath <= 0 {
		opts.MaxPath = 4096
	}
	notDir := &errcode.Error{Code: errcode.InvalidArgument, Op: "watch", Path: dir, Msg: "not a directory of the workspace"}
	sc, err := ws.Scope(dir)
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	// Watching only reads: a read-only workspace, which refuses OpenDir
	// because commands run in that descriptor, is watched through the
	// workspace it wraps. The descriptor stays here, and the watch opens
	// directories below it O_RDONLY only (addTree).
	dirOf := sc
	if ro, ok := sc.(readOnlyWS); ok {
		dirOf = ro.Workspace
	}
	f, err := dirOf.OpenDir()
	if err != nil {
		if errcode.Is(err, errcode.NotImplemented) {
			return nil, err
		}
		return nil, notDir
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, notDir
	}
	top, err := os.OpenRoot(watchFDPath(f))
	if err != nil {
		return nil, notDir
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		top.Close()
		return nil, &errcode.Error{Code: errcode.TooLarge, Op: "watch", Msg: "cannot create an inotify instance (fs.inotify.max_user_instances?)", Err: err}
	}
	t := &TreeWatch{top: top, id: FileID{uint64(st.Dev), st.Ino}, opts: opts, ifd: os.NewFile(uintptr(fd), "inotify"),
		onChange: onChange, onOverflow: onOverflow, onGone: onGone, dirs: map[int32]watchedDir{}}
	if err := t.addTree(-1, "", "."); err != nil {
		t.Close()
		return nil, err
	}
	go t.loop()
	return t, nil
}

// ID is the watched directory's identity.
func (t *TreeWatch) ID() FileID { return t.id }

// Dirs is how many directories are watched.
func (t *TreeWatch) Dirs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.dirs)
}

// Close ends the watch (a callback already under way still finishes).
func (t *TreeWatch) Close() error {
	t.once.Do(func() {
		t.ifd.Close() // ends loop's Read
		t.top.Close()
	})
	return nil
}

func watchFDPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// pathOf is the path of watch wd's directory relative to the top ("."
// for the top); false once the chain is broken. Held: t.mu.
func (t *TreeWatch) pathOf(wd int32) (string, bool) {
	var parts []string
	for n := 0; wd != -1; n++ {
		e, ok := t.dirs[wd]
		if !ok || n > len(t.dirs) {
			return "", false
		}
		if e.parent != -1 {
			parts = append(parts, e.name)
		}
		wd = e.parent
	}
	if len(parts) == 0 {
		return ".", true
	}
	slices.Reverse(parts)
	return filepath.Join(parts...), true
}

// addTree watches rel (name in parent) and the directories below it, each
// opened through top and watched by its descriptor.
func (t *TreeWatch) addTree(parent int32, name, rel string) error {
	if len(rel) > t.opts.MaxPath {
		return nil // too deep to name: not watched
	}
	d, err := t.top.OpenFile(rel, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		if rel == "." {
			return err
		}
		return nil // gone meanwhile, a link, or not a directory: not watched
	}
	wd, err := t.addDir(d, parent, name, rel)
	if err != nil || wd < 0 {
		d.Close()
		return err
	}
	ents, _ := d.ReadDir(-1)
	d.Close()
	for _, e := range ents {
		if e.IsDir() { // from the listing: a link is not a directory here
			if err := t.addTree(wd, e.Name(), filepath.Join(rel, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// addDir watches the open directory d; wd -1 when it could not be.
func (t *TreeWatch) addDir(d *os.File, parent int32, name, rel string) (int32, error) {
	if t.Dirs() >= t.opts.MaxDirs {
		return -1, &errcode.Error{Code: errcode.TooLarge, Op: "watch", Path: rel,
			Msg: fmt.Sprintf("more than %d directories below the watched one; watch a smaller part", t.opts.MaxDirs)}
	}
	wd, err := unix.InotifyAddWatch(int(t.ifd.Fd()), watchFDPath(d), watchMask)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return -1, &errcode.Error{Code: errcode.TooLarge, Op: "watch", Path: rel, Msg: "the system's inotify watch limit is reached (fs.inotify.max_user_watches)"}
		}
		return -1, nil
	}
	t.mu.Lock()
	t.dirs[int32(wd)] = watchedDir{parent: parent, name: name}
	t.mu.Unlock()
	return int32(wd), nil
}

func (t *TreeWatch) loop() {
	buf := make([]byte, 64<<10)
	for {
		n, err := t.ifd.Read(buf)
		if err != nil {
			return // closed, or the instance failed
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameLen := int(ev.Len)
			name := ""
			if nameLen > 0 && off+unix.SizeofInotifyEvent+nameLen <= n {
				raw := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+nameLen]
				if i := bytes.IndexByte(raw, 0); i >= 0 {
					raw = raw[:i]
				}
				name = string(raw)
			}
			off += unix.SizeofInotifyEvent + nameLen
			if !t.handle(ev.Wd, ev.Mask, name) {
				return
			}
		}
	}
}

// handle takes one event; false when the watch has ended.
func (t *TreeWatch) handle(wd int32, mask uint32, name string) bool {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		t.onOverflow()
		return true
	}
	t.mu.Lock()
	e, watched := t.dirs[wd]
	if watched && e.parent == -1 && mask&(unix.IN_MOVE_SELF|unix.IN_DELETE_SELF) != 0 {
		// The watched directory itself left: what happens to it now is
		// not under the name it was watched by.
		t.mu.Unlock()
		t.Close()
		t.onGone()
		return false
	}
	if mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF) != 0 {
		delete(t.dirs, wd)
	}
	dir, ok := t.pathOf(wd)
	t.mu.Unlock()
	if !watched || !ok || name == "" {
		return true
	}
	rel := filepath.Join(dir, name)
	if len(rel) > t.opts.MaxPath {
		return true
	}
	if mask&unix.IN_ISDIR != 0 {
		switch {
		case mask&unix.IN_MOVED_FROM != 0:
			t.unwatch(wd, name) // moved out of the tree, or about to reappear under MOVED_TO
		case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
			// A new directory: follow it too. An error is a bound (MaxDirs,
			// the system's watch limit): what happens in it, or in part of
			// it, is not seen, and the caller is told so.
			if err := t.addTree(wd, name, rel); err != nil {
				t.onOverflow()
			}
		}
	}
	t.onChange(Change{Path: filepath.ToSlash(rel), Op: changeOp(mask)})
	return true
}

// unwatch stops watching the directory name of parent and everything
// below it: a directory moved elsewhere is not followed there.
func (t *TreeWatch) unwatch(parent int32, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var gone []int32
	for wd, e := range t.dirs {
		if e.parent == parent && e.name == name {
			gone = append(gone, wd)
		}
	}
	for i := 0; i < len(gone); i++ { // and their descendants
		for wd, e := range t.dirs {
			if e.parent == gone[i] {
				gone = append(gone, wd)
			}
		}
	}
	for _, wd := range gone {
		delete(t.dirs, wd)
		_, _ = unix.InotifyRmWatch(int(t.ifd.Fd()), uint32(wd))
	}
}

// changeOp names an inotify event's change.
func changeOp(mask uint32) string {
	switch {
	case mask&unix.IN_CREATE != 0:
		return "create"
	case mask&unix.IN_MODIFY != 0:
		return "write"
	case mask&unix.IN_DELETE != 0:
		return "remove"
	case mask&(unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0:
		return "rename"
	}
	return "chmod"
}

package fsops

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// OpenDirAt opens the directory name of the open directory dir: one
// component (no slash, not "." or ".."), never following a link (a link
// or a file there is an error), so what dir reaches stays what it reaches.
// rel is the directory's path in the workspace, for errors. dir must come
// from a workspace (Workspace.OpenDir, or an earlier OpenDirAt): a walk
// that goes down by descriptor costs one openat per directory whatever its
// depth, where ReadDir resolves the whole path from the root each time.
func OpenDirAt(dir *os.File, name, rel string) (*os.File, error) {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return nil, errcode.New(errcode.InvalidArgument, "readdir", rel, "%q is not one name of a directory", name)
	}
	sc, err := dir.SyscallConn()
	if err != nil {
		return nil, mapErr(opReadDir, rel, err)
	}
	fd := -1
	var oerr error
	if err := sc.Control(func(d uintptr) {
		fd, oerr = unix.Openat(int(d), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}); err != nil {
		return nil, mapErr(opReadDir, rel, err)
	}
	if oerr != nil {
		return nil, mapErr(opReadDir, rel, &os.PathError{Op: "openat", Path: rel, Err: oerr})
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// ListDir lists the open directory f (from Workspace.OpenDir or
// OpenDirAt), whose path in the workspace is rel, as ReadDir does: sorted
// by name, each entry stat-ed relative to f without following links.
func ListDir(f *os.File, rel string) ([]Info, error) {
	list, err := listOpened(f, rel)
	if err != nil {
		return nil, mapErr(opReadDir, rel, err)
	}
	return list, nil
}

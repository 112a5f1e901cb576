//go:build !linux

package fsops

import "github.com/agentbe/agentbe-daemon/errcode"

// Change is one change under a watched tree.
type Change struct{ Path, Op string }

// TreeWatchOptions bound a TreeWatch.
type TreeWatchOptions struct{ MaxDirs, MaxPath int }

// TreeWatch needs inotify: Linux only.
type TreeWatch struct{}

// WatchTree is not implemented off Linux.
func WatchTree(Workspace, string, TreeWatchOptions, func(Change), func(), func()) (*TreeWatch, error) {
	return nil, errcode.New(errcode.NotImplemented, "watch", "", "watching for changes needs Linux (inotify)")
}

func (*TreeWatch) ID() FileID   { return FileID{} }
func (*TreeWatch) Dirs() int    { return 0 }
func (*TreeWatch) Close() error { return nil }

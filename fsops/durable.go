package fsops

import (
	"os"
	"path"
	"strings"
	"sync/atomic"
	"syscall"
)

// This file: durable writes (Options.Fsync). With it, a write is on the
// disk before it is acknowledged: the file's data (fsync of the file) and
// its directory entry (fsync of each directory whose entries the
// operation changed). Without it, writes are atomic against readers and
// the daemon's own failures (atomicWrite's rename) but a power cut can
// lose what the page cache held.

// syncs counts the fsyncs made for Options.Fsync, for the tests.
var syncs atomic.Int64

// syncFile makes f's data durable when the workspace asks for it.
func (w *dirWS) syncFile(f *os.File) error {
	if !w.opts.Fsync {
		return nil
	}
	syncs.Add(1)
	return f.Sync()
}

// syncDirs makes the entries of the directories rels (relative to r)
// durable when the workspace asks for it; "" and duplicates are skipped.
func (w *dirWS) syncDirs(r *os.Root, rels ...string) error {
	if !w.opts.Fsync {
		return nil
	}
	seen := make(map[string]bool, len(rels))
	for _, rel := range rels {
		if rel == "" {
			rel = "."
		}
		if seen[rel] {
			continue
		}
		seen[rel] = true
		d, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		syncs.Add(1)
		err = d.Sync()
		d.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// parentDirs is rel's parent and, when created is set (the operation may
// have made missing directories on the way), every ancestor up to the
// workspace root: a new directory's own entry lives in its parent.
func parentDirs(rel string, created bool) []string {
	dir := path.Dir(rel)
	if !created || dir == "." {
		return []string{dir}
	}
	out := []string{dir}
	for dir != "." && strings.Contains(dir, "/") {
		dir = path.Dir(dir)
		out = append(out, dir)
	}
	if dir != "." {
		out = append(out, ".")
	}
	return out
}

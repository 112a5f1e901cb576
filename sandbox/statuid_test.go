//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"syscall"
)

func statUID(fi os.FileInfo) uint32 { return fi.Sys().(*syscall.Stat_t).Uid }

func realPath(p string) (string, error) { return filepath.EvalSymlinks(p) }

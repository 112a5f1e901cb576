package sandbox

import (
	"os"
	"syscall"
)

func statUID(fi os.FileInfo) uint32 { return fi.Sys().(*syscall.Stat_t).Uid }

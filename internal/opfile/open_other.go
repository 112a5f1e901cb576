//go:build !linux

package opfile

import (
	"io/fs"
	"os"
	"syscall"
)

// openRegular opens name for reading, without blocking (O_NONBLOCK: a
// FIFO or a device planted under the name cannot hold the read), and
// keeps the descriptor only when it is a regular file. Off Linux there is
// no descriptor that names a file without opening it, so a name swapped
// for a device since read's stat is opened before it is refused here;
// open_linux.go does not open it.
func openRegular(name string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, unwrap(err)
	}
	if whileOpen != nil {
		whileOpen(name)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, unwrap(err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, notRegular(fi.Mode())
	}
	return f, fi, nil
}

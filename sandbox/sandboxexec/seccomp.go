//go:build linux

package sandboxexec

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"
)

// Filter is one classic BPF instruction (struct sock_filter).
type Filter struct {
	Code   uint16
	Jt, Jf uint8
	K      uint32
}

type sockFprog struct {
	len    uint16
	filter *Filter
}

// The package uses the syscall package alone (see the package doc: what
// it imports is initialized before the trampoline runs).
const (
	prSetNoNewPrivs   = 38 // PR_SET_NO_NEW_PRIVS
	prGetSeccomp      = 21 // PR_GET_SECCOMP
	prSetSeccomp      = 22 // PR_SET_SECCOMP
	seccompModeFilter = 2  // SECCOMP_MODE_FILTER
	// The Landlock system calls have one number on every architecture.
	sysLandlockRestrictSelf = 446
)

// InstallSeccomp sets no_new_privs and installs prog, a seccomp filter
// (sandbox/seccomp.go assembles it), on the calling OS thread only: when
// that is the executor's spawning thread (locked to its goroutine for
// good), every process it forks inherits both, and the daemon's other
// threads stay unfiltered. Filters stack and are never removed.
func InstallSeccomp(prog []Filter) error {
	if len(prog) == 0 {
		return errors.New("seccomp filter: empty program")
	}
	if err := setNoNewPrivs(); err != nil {
		return err
	}
	fprog := sockFprog{len: uint16(len(prog)), filter: &prog[0]}
	// prctl, not seccomp(2) with SECCOMP_FILTER_FLAG_TSYNC: this thread only.
	_, _, errno := syscall.Syscall(syscall.SYS_PRCTL, prSetSeccomp, seccompModeFilter, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return nil
}

// SeccompSupported reports whether this kernel takes seccomp filters
// (the usual reason it would not: a kernel built without them).
func SeccompSupported() bool {
	// PR_GET_SECCOMP fails with EINVAL when seccomp is not built in.
	_, _, errno := syscall.Syscall(syscall.SYS_PRCTL, prGetSeccomp, 0, 0)
	return errno == 0
}

// maxFilterLen is the kernel's BPF_MAXINSNS.
const maxFilterLen = 4096

// EncodeFilter is prog as the bytes the trampoline reads from FilterFD.
func EncodeFilter(prog []Filter) []byte {
	out := make([]byte, 0, 8*len(prog))
	for _, f := range prog {
		out = append(out, byte(f.Code), byte(f.Code>>8), f.Jt, f.Jf,
			byte(f.K), byte(f.K>>8), byte(f.K>>16), byte(f.K>>24))
	}
	return out
}

// readFilter reads the filter the daemon passed on fd (a sealed memfd,
// read from offset 0 whatever its shared file offset is) and closes fd.
func readFilter(fd int) ([]Filter, error) {
	defer syscall.Close(fd)
	buf := make([]byte, 8*maxFilterLen+1)
	n, err := syscall.Pread(fd, buf, 0)
	if err != nil {
		return nil, fmt.Errorf("reading the seccomp filter: %w", err)
	}
	if n == 0 || n%8 != 0 || n > 8*maxFilterLen {
		return nil, fmt.Errorf("the seccomp filter on fd %d is %d bytes", fd, n)
	}
	prog := make([]Filter, n/8)
	for i := range prog {
		b := buf[8*i:]
		prog[i] = Filter{Code: uint16(b[0]) | uint16(b[1])<<8, Jt: b[2], Jf: b[3],
			K: uint32(b[4]) | uint32(b[5])<<8 | uint32(b[6])<<16 | uint32(b[7])<<24}
	}
	return prog, nil
}

func setNoNewPrivs() error {
	if _, _, errno := syscall.Syscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); errno != 0 {
		return fmt.Errorf("no_new_privs: %w", errno)
	}
	return nil
}

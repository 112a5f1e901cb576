//go:build linux

package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/sandbox/policy"
)

// SealedProgram is a program's content, read once into a sealed memfd: a
// copy nobody can change (F_SEAL_WRITE, F_SEAL_GROW, F_SEAL_SHRINK,
// F_SEAL_SEAL), whose SHA-256 is the digest of exactly what runs. A caller
// that approved a program by its content (system.run's approvals of a
// program in the workspace, which the agent can rewrite) runs the copy,
// never the file by its name again: there is no window between the check
// and the exec.
//
// The copy reaches the command as its Request.Stdin (an *os.File is
// handed to the child as is, in every mode: bwrap, landlock, software,
// none); Command moves it to fd 3, gives the program an empty stdin and
// execs /proc/self/fd/3. A script's interpreter is started by the kernel
// with /proc/self/fd/3 as the script's path and reads the same sealed
// copy (so a script's $0 is /proc/self/fd/3, not its name in the
// workspace). The kernel must allow executing a memfd (vm.memfd_noexec
// below 2).
type SealedProgram struct {
	f      *os.File
	digest string
	size   int64
}

// SealProgram copies r into a new sealed memfd, refusing more than limit
// bytes (errcode.TooLarge). The caller closes it.
func SealProgram(r io.Reader, limit int64) (*SealedProgram, error) {
	fd, err := unix.MemfdCreate("agentbe-program", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) {
		// Kernels before 6.3 know no MFD_EXEC; their memfds are executable.
		fd, err = unix.MemfdCreate("agentbe-program", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if errors.Is(err, unix.EACCES) {
		return nil, &errcode.Error{Code: errcode.ExecError, Op: "exec", Msg: "the kernel refuses executable memfds (vm.memfd_noexec is 2), which a sealed program needs", Err: err}
	}
	if err != nil {
		return nil, &errcode.Error{Code: errcode.ExecError, Op: "exec", Msg: "memfd for a sealed program: " + err.Error(), Err: err}
	}
	f := os.NewFile(uintptr(fd), "agentbe-program")
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, limit+1))
	if err == nil && n > limit {
		err = &errcode.Error{Code: errcode.TooLarge, Op: "exec", Msg: fmt.Sprintf("the program is over %d bytes, the most a sealed copy holds", limit)}
	}
	if err == nil {
		_, err = unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &SealedProgram{f: f, digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), size: n}, nil
}

// Digest is "sha256:" and the hex SHA-256 of the content.
func (s *SealedProgram) Digest() string { return s.digest }

// Size is the content's length in bytes.
func (s *SealedProgram) Size() int64 { return s.size }

// Stdin is what the Request's Stdin must be for Command to find the copy.
func (s *SealedProgram) Stdin() *os.File { return s.f }

// Command is the Request's Command that runs the copy with args (argv[1:]),
// each passed as is: the copy moved from stdin to fd 3, stdin then empty
// (/dev/null), and /proc/self/fd/3 exec'ed.
func (s *SealedProgram) Command(args ...string) string {
	var b strings.Builder
	b.WriteString("exec /proc/self/fd/3")
	for _, a := range args {
		b.WriteByte(' ')
		b.WriteString(policy.Quote(a))
	}
	b.WriteString(" 3<&0 </dev/null")
	return b.String()
}

// Close releases the copy (a command started with it holds its own
// descriptor).
func (s *SealedProgram) Close() error {
	if s == nil {
		return nil
	}
	return s.f.Close()
}

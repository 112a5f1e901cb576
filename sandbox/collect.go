//go:build linux

package sandbox

import (
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Run's output without a goroutine per pipe. Start's streams go to writers
// that may block (an SSH channel), so each has a pump of its own; Run's go
// to its head-and-tail buffers, which never block. Run then waits for its
// process and reads both pipes in one loop on the caller's goroutine: one
// poll(2) on the process's pidfd and the two read ends, which stay out of
// Go's poller. The kernel wakes that one thread when output comes and when
// the process exits, as it wakes a plain fork/exec's waitid; pumps parked
// in the poller would wake, after the exit, the poller's thread, then each
// pump, then the caller (docs/performance.md, issue 34's exec floor).
//
// The rules are pump's and finish's: output is read while the process
// runs; once it has exited and its group (or cgroup) was killed, reading
// goes on until every pipe is at its end, but each read must come within
// ioGrace of the last, so a pipe held open by a process that escaped the
// kill is cut, after what the kernel already holds for it was taken.

// pidfdOpen is unix.PidfdOpen; a test replaces it to take the fallback.
var pidfdOpen = unix.PidfdOpen

// rawPipe is pipe(true) with our read end as a bare descriptor: non-blocking,
// close-on-exec, not registered with Go's poller (collect polls it).
func rawPipe() (ours int, theirs *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return -1, nil, os.NewSyscallError("pipe2", err)
	}
	if _, err := unix.FcntlInt(uintptr(p[1]), unix.F_SETFL, 0); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return -1, nil, os.NewSyscallError("fcntl", err)
	}
	return p[0], os.NewFile(uintptr(p[1]), "|1"), nil
}

// collect is finish for a Run whose read ends are the bare descriptors fds
// (rawPipe), copied to outs: it waits for the process and copies its
// output in one loop (above), ends what it left behind as finish does, and
// closes fds. Without a pidfd (a kernel before 5.3, or one a seccomp
// policy denies it) the descriptors go to pumps and finish, as Start's do.
func (r *launched) collect(fds []int, outs []io.Writer) error {
	pidfd, err := pidfdOpen(r.c.cmd.Process.Pid, 0)
	if err != nil {
		for i, fd := range fds {
			f := os.NewFile(uintptr(fd), "|0") // non-blocking: Go's poller takes it
			r.readers = append(r.readers, f)
			r.copies.Add(1)
			go pump(outs[i], f, &r.exited, &r.copies)
		}
		return r.finish()
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	pfds := make([]unix.PollFd, 1+len(fds))
	pfds[0] = unix.PollFd{Fd: int32(pidfd), Events: unix.POLLIN}
	for i, fd := range fds {
		pfds[1+i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	open := len(fds)
	end := func(i int) { // stream i is at its end, or cut
		unix.Close(int(pfds[1+i].Fd))
		pfds[1+i].Fd = -1 // poll skips it
		open--
		if e, ok := outs[i].(OutputEnder); ok {
			e.OutputEnded()
		}
	}
	var werr error
	exited := false
	var deadline time.Time // once exited: the next read must come by then
	for !exited || open > 0 {
		timeout := -1
		if exited {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			timeout = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		n, err := unix.Poll(pfds, timeout)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			// Cannot happen with valid descriptors; end as finish would
			// on a deadline: wait, then take what is buffered.
			if !exited {
				werr = r.reap(pidfd)
				exited = true
			}
			break
		}
		if n == 0 {
			break // past the deadline after the exit
		}
		for i := range fds {
			p := &pfds[1+i]
			if p.Fd < 0 || p.Revents == 0 {
				continue
			}
			m, err := unix.Read(int(p.Fd), buf)
			switch {
			case m > 0:
				if _, werr := outs[i].Write(buf[:m]); werr != nil {
					end(i) // as pump: the copy stops at a write error
					continue
				}
				if exited {
					deadline = time.Now().Add(ioGrace)
				}
			case err == unix.EAGAIN || err == unix.EINTR:
			default: // the end (0), or an error reading
				end(i)
			}
		}
		if !exited && pfds[0].Revents != 0 {
			werr = r.reap(pidfd)
			pfds[0].Fd = -1
			exited = true
			deadline = time.Now().Add(ioGrace)
		}
	}
	if pfds[0].Fd >= 0 {
		unix.Close(pidfd)
	}
	for i := range fds {
		if pfds[1+i].Fd >= 0 {
			drainFD(outs[i], int(pfds[1+i].Fd), buf)
			end(i)
		}
	}
	return werr
}

// reap is finish's part between the process's exit (its pidfd is
// readable) and the reading of what is left: the wait, the timers, and the
// kill of what it left in its group and cgroup.
func (r *launched) reap(pidfd int) error {
	unix.Close(pidfd)
	cmd := r.c.cmd
	r.reaping()
	werr := cmd.Wait()
	if r.timer != nil {
		r.timer.Stop()
	}
	r.stopCtx()
	r.killLeftovers()
	r.c.ended()
	r.exited.Store(true)
	return werr
}

// drainFD is drainBuffered for a bare non-blocking descriptor: what the
// kernel holds for it, at most maxDrain bytes, without waiting for more.
func drainFD(w io.Writer, fd int, buf []byte) {
	for left := maxDrain; left > 0; {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return
		}
		left -= n
	}
}

package browser

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"

	"golang.org/x/sys/unix"
)

// MaxMessageBytes bounds one DevTools message from Chromium. chromedp reads
// and decodes each message whole, without a limit, and a page can make one
// answer enormous (an accessible name holds all the text its
// aria-labelledby names: 1 MB referenced by 200 buttons makes
// Accessibility.getFullAXTree gigabytes). A larger message ends its session
// instead of reaching chromedp.
const MaxMessageBytes = 64 << 20

// messageLimit sits between Chromium and chromedp on the pipe Chromium
// writes its messages to (its fd 4, NUL-terminated JSON): it reads each
// message into chunks, up to the limit, and passes it on only when it is
// whole; a message past the limit is never buffered beyond it, and the
// pipe to chromedp is closed instead (chromedp sees the browser gone).
type messageLimit struct {
	limit int
	in    *os.File // what Chromium writes
	out   *os.File // what chromedp reads
	over  func()   // called once when a message passed the limit

	done      chan struct{}
	closeOnce sync.Once
}

// limitMessages is run by chromedp's ModifyCmdFunc, which sees the pipe
// ends chromedp made for Chromium (cmd.ExtraFiles: fd 3 and fd 4) before
// the start. chromedp's fd 4 end is made, in place, the write end of a
// new pipe the limit reads: chromedp passes it to Chromium and closes its
// copy after the start (or a failed start) as it would its own, so the
// limit sees the end of its input exactly when chromedp would have. The
// original write end, kept by a duplicate, is where whole messages go.
func limitMessages(cmd *exec.Cmd, limit int, over func()) (*messageLimit, error) {
	if len(cmd.ExtraFiles) != 2 || cmd.ExtraFiles[1] == nil {
		return nil, fmt.Errorf("chromedp gave Chromium %d extra files, not its two pipe ends", len(cmd.ExtraFiles))
	}
	child := cmd.ExtraFiles[1]
	keep, err := unix.FcntlInt(child.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicating the DevTools pipe: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		unix.Close(keep)
		return nil, fmt.Errorf("making the DevTools message pipe: %w", err)
	}
	err = unix.Dup3(int(w.Fd()), int(child.Fd()), unix.O_CLOEXEC)
	w.Close()
	if err != nil {
		unix.Close(keep)
		r.Close()
		return nil, fmt.Errorf("placing the DevTools message pipe: %w", err)
	}
	// Only the duplicate refers to the original end now: non-blocking, so
	// that it is pollable and its Close ends a blocked Write.
	if err := unix.SetNonblock(keep, true); err != nil {
		unix.Close(keep)
		r.Close()
		return nil, err
	}
	// Both pipes hold a large message (an accessibility tree of a few
	// hundred links is 0.5 MB) in one piece where the kernel allows, instead
	// of 64 KiB a wake-up of each side; a pipe that stays at the default
	// size works the same, slower.
	// (r's descriptor through SyscallConn: r.Fd would make it blocking,
	// and close relies on it being pollable.)
	_, _ = unix.FcntlInt(uintptr(keep), unix.F_SETPIPE_SZ, pipeBytes)
	if rc, err := r.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeBytes) })
	}
	m := &messageLimit{limit: limit, in: r, out: os.NewFile(uintptr(keep), "devtools-out"), over: over, done: make(chan struct{})}
	go m.run()
	return m, nil
}

// pipeBytes is the size asked for the DevTools message pipes: the
// default /proc/sys/fs/pipe-max-size, which an unprivileged process may
// ask for too.
const pipeBytes = 1 << 20

// errTooLarge is the error of a call whose session a message past the
// limit ended.
func errTooLarge(limit int) error {
	return fmt.Errorf("the page produced a DevTools message larger than %d MiB; the session was closed", limit>>20)
}

// chunkSize is the size of the pieces a message is read into: a message
// past the limit costs the limit and one chunk, not the doubling of a
// growing buffer.
const chunkSize = 256 << 10

// run passes Chromium's messages on, each whole or not at all; it ends
// with Chromium's end of the pipe, with chromedp's, at close, or at a
// message past the limit (after over, so that the session's error is set
// before chromedp sees the pipe end).
func (m *messageLimit) run() {
	defer close(m.done)
	defer m.out.Close()
	defer m.in.Close()
	br := bufio.NewReaderSize(m.in, chunkSize)
	var msg [][]byte
	n := 0
	for {
		frag, err := br.ReadSlice(0)
		if len(frag) > 0 {
			n += len(frag)
			if n > m.limit+1 { // +1: the NUL
				m.over()
				return
			}
			msg = append(msg, append([]byte(nil), frag...))
		}
		switch {
		case err == nil: // the message is whole
			for _, b := range msg {
				if _, err := m.out.Write(b); err != nil {
					return // chromedp closed its end
				}
			}
			msg, n = msg[:0], 0
			clear(msg[:cap(msg)])
		case errors.Is(err, bufio.ErrBufferFull):
		default: // Chromium's end closed, or close: a partial message is dropped
			return
		}
	}
}

// close stops the limit and waits for its goroutine: closing both ends
// ends a Read or a Write it is blocked in (both files are pollable).
func (m *messageLimit) close() {
	m.closeOnce.Do(func() {
		m.in.Close()
		m.out.Close()
	})
	<-m.done
}

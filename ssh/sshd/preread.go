package sshd

import (
	"io"
	"sync"

	gossh "golang.org/x/crypto/ssh"
)

// MaxDataBeforeRequest is how much channel data a session may receive
// before its exec, shell or subsystem request. Nothing consumes data that
// comes before the request (the clients send none), and x/crypto keeps
// whatever arrives unread, up to its fixed 2 MiB window, for as long as
// the channel is open: a session that receives this much with no such
// request before it on the wire is closed, with the reason on its stderr.
const MaxDataBeforeRequest = 64 << 10

// preread reads a session channel's data from the moment it is accepted
// until an exec, shell or subsystem takes it (take), so that data which
// arrives before the request is held here, counted and bounded, rather
// than left in x/crypto's buffer. What it read is the first data the
// command or subsystem reads (in): nothing is lost or reordered.
//
// Its goroutine stops after the channel Read in progress returns once the
// data is taken (when the client sends its next data, its EOF, or closes),
// or when it has read MaxDataBeforeRequest bytes with nothing taking them:
// then over is set, and the session decides (session.serve) whether that
// data came before any request.
type preread struct {
	ch gossh.Channel

	mu      sync.Mutex
	cond    sync.Cond
	buf     []byte // read and not yet handed over
	total   int    // read in all
	err     error  // the channel's read error (io.EOF), once seen
	taken   bool   // an exec, shell or subsystem reads the data now
	stopped bool   // the goroutine has returned
	over    bool   // it stopped at MaxDataBeforeRequest, not taken
	done    chan struct{}
}

func newPreread(ch gossh.Channel) *preread {
	p := &preread{ch: ch, done: make(chan struct{})}
	p.cond.L = &p.mu
	return p
}

// run is the goroutine.
func (p *preread) run() {
	defer close(p.done)
	// Small reads: an idle session costs little, and the request usually
	// comes before any data, so one read is all most sessions do here.
	buf := make([]byte, 512)
	for {
		n, err := p.ch.Read(buf)
		p.mu.Lock()
		p.buf = append(p.buf, buf[:n]...)
		p.total += n
		p.err = err
		stop := err != nil || p.taken
		if !stop && p.total >= MaxDataBeforeRequest {
			p.over, stop = true, true
		}
		if stop {
			p.stopped = true
		}
		p.cond.Broadcast()
		p.mu.Unlock()
		if stop {
			return
		}
	}
}

// take says the data is the command's or subsystem's from now on: the
// goroutine stops after its Read in progress.
func (p *preread) take() {
	p.mu.Lock()
	p.taken = true
	p.mu.Unlock()
}

// overflowed reports whether the goroutine stopped at
// MaxDataBeforeRequest with the data not taken. Valid once done is closed.
func (p *preread) overflowed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.over && !p.taken
}

// discard drops what was read and not handed over (a refused session).
func (p *preread) discard() {
	p.mu.Lock()
	p.buf = nil
	p.mu.Unlock()
}

// in is the session's channel data as its command or subsystem reads it,
// and the channel for what it writes.
func (p *preread) in() *chanIn { return &chanIn{p: p} }

// chanIn reads what the pre-reader read, then the channel itself. One
// reader at a time (the command's stdin copy, or the subsystem's loop).
type chanIn struct {
	p      *preread
	direct bool // the pre-reader is done and handed everything over
}

func (c *chanIn) Read(b []byte) (int, error) {
	if c.direct {
		return c.p.ch.Read(b)
	}
	p := c.p
	p.mu.Lock()
	for len(p.buf) == 0 && !p.stopped {
		// The pre-reader's Read is in progress: the next data is its, and
		// comes here from it, in order.
		p.cond.Wait()
	}
	if len(p.buf) > 0 {
		n := copy(b, p.buf)
		p.buf = p.buf[n:]
		if len(p.buf) == 0 {
			p.buf = nil
		}
		p.mu.Unlock()
		return n, nil
	}
	err := p.err
	p.mu.Unlock()
	if err != nil {
		return 0, err
	}
	c.direct = true
	return p.ch.Read(b)
}

func (c *chanIn) Write(b []byte) (int, error) { return c.p.ch.Write(b) }

var _ io.ReadWriter = (*chanIn)(nil)

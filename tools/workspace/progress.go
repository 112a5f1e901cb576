package workspace

import (
	"context"
	"sync"
	"time"
	"unicode/utf8"
)

// progressPump turns a command's output into MCP progress notifications
// while it runs: chunks are gathered and sent at most every
// progressInterval, from one goroutine of its own (a slow client holds
// that goroutine, never the command's pipes), each message at most
// progressChunk bytes, and no more than progressBudget bytes in all (the
// rest is in the result). progress is the number of bytes of output sent
// so far, so it grows from one notification to the next.
type progressPump struct {
	ctx  context.Context
	send func(context.Context, float64, string)

	mu     sync.Mutex
	buf    []byte
	sent   int64 // bytes put in messages so far
	more   chan struct{}
	stopc  chan struct{} // closed by stop: flush now, then end
	done   chan struct{}
	closed bool
}

const (
	progressInterval = 100 * time.Millisecond
	progressChunk    = 16 << 10
	progressBudget   = 1 << 20
)

func newProgressPump(ctx context.Context, send func(context.Context, float64, string)) *progressPump {
	p := &progressPump{ctx: ctx, send: send, more: make(chan struct{}, 1), stopc: make(chan struct{}), done: make(chan struct{})}
	go p.loop()
	return p
}

// add is sandbox.Request.OnOutput: it never blocks on the client.
func (p *progressPump) add(stream string, b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.sent+int64(len(p.buf)) >= progressBudget {
		return
	}
	if stream == "stderr" && len(p.buf) > 0 && p.buf[len(p.buf)-1] != '\n' {
		p.buf = append(p.buf, '\n')
	}
	room := progressBudget - p.sent - int64(len(p.buf))
	if int64(len(b)) > room {
		b = b[:room]
	}
	p.buf = append(p.buf, b...)
	select {
	case p.more <- struct{}{}:
	default:
	}
}

func (p *progressPump) loop() {
	defer close(p.done)
	tick := time.NewTicker(progressInterval)
	defer tick.Stop()
	for {
		select {
		case <-p.more:
		case <-p.stopc:
		case <-p.ctx.Done():
			return
		}
		p.flush()
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return
		}
		select { // at most one message per interval, but none held back at the end
		case <-tick.C:
		case <-p.stopc:
		case <-p.ctx.Done():
			return
		}
	}
}

// flush sends what is gathered, in messages of at most progressChunk
// bytes cut at a UTF-8 boundary.
func (p *progressPump) flush() {
	for {
		p.mu.Lock()
		if len(p.buf) == 0 {
			p.mu.Unlock()
			return
		}
		n := min(len(p.buf), progressChunk)
		for n < len(p.buf) && n > 0 && !utf8.RuneStart(p.buf[n]) {
			n--
		}
		if n == 0 {
			n = min(len(p.buf), progressChunk)
		}
		msg := string(p.buf[:n])
		p.buf = p.buf[n:]
		p.sent += int64(n)
		progress := float64(p.sent) // grows with every message
		p.mu.Unlock()
		p.send(p.ctx, progress, msg)
	}
}

// stop sends what is left and waits until the last notification is out.
func (p *progressPump) stop() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	close(p.stopc)
	<-p.done
}

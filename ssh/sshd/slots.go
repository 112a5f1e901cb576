package sshd

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// endingGrace is how long a channel open at the cap waits for a slot
// whose channel has ended (see chanSlots.take).
const endingGrace = 2 * time.Second

// chanSlots counts one connection's open session and direct-tcpip
// channels against MaxChannels.
//
// A slot is released by the channel's goroutine when it has let go of
// everything the channel held. The client cannot see that moment, only
// the channel's end: the server's EOF and close, or x/crypto's answer to
// the client's close, which the transport sends before the goroutine
// notices. A client that opens a channel as soon as it saw another end
// must not be refused for a slot about to be released, so a channel marks
// its slot ending before the server tells the client it is over, and an
// open at the cap waits (up to endingGrace) for ending slots to be
// released. A channel the client has not let end (it never answered the
// server's close) keeps its slot: past the grace the open is refused, so
// what a connection holds stays bounded.
//
// Each slot also holds a place in the daemon-wide ChannelPool (and in its
// address's share of it), taken and given back with it: a connection at
// the pool's limit waits for its own ending slots in the same way, and is
// refused at once when it has none.
type chanSlots struct {
	max    int32
	open   atomic.Int32  // slots held
	ending atomic.Int32  // of those, slots whose channel has ended
	freed  chan struct{} // a token when a slot is released
	pool   *ChannelPool
	addr   netip.Addr // the client's, for the pool's per-address share
}

func newChanSlots(max int, pool *ChannelPool, addr netip.Addr) *chanSlots {
	return &chanSlots{max: int32(max), freed: make(chan struct{}, 1), pool: pool, addr: addr}
}

// take gets a slot, waiting for ending ones to be released. Without one
// (the connection holds MaxChannels, the pool or the address's share of it
// is full, or ctx ended) it returns nil and the refusal's text. Only the
// connection's Serve goroutine calls it.
func (cs *chanSlots) take(ctx context.Context) (*slot, string) {
	var deadline <-chan time.Time
	for {
		// Read before the counts: a release gives its counts back before
		// it clears its ending mark, so a slot seen ending here is either
		// still counted below or already given back.
		ending := cs.ending.Load()
		why := ""
		if cs.open.Load() >= cs.max {
			why = fmt.Sprintf("too many channels on this connection (limit %d); close some first", cs.max)
		} else if why = cs.pool.take(cs.addr); why == "" {
			cs.open.Add(1)
			return &slot{cs: cs}, ""
		}
		if ending == 0 {
			return nil, why
		}
		if deadline == nil {
			t := time.NewTimer(endingGrace)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-cs.freed:
		case <-deadline:
			return nil, why
		case <-ctx.Done():
			return nil, why
		}
	}
}

// slot is one channel's place in its connection's count.
type slot struct {
	cs    *chanSlots
	state atomic.Int32 // slotOpen, slotEnding, slotReleased
}

const (
	slotOpen int32 = iota
	slotEnding
	slotReleased
)

// end says the channel is over: its goroutine releases the slot without
// waiting on the client. Call it before telling the client (the last EOF
// or the close).
func (s *slot) end() {
	if s.state.CompareAndSwap(slotOpen, slotEnding) {
		s.cs.ending.Add(1)
	}
}

// release gives the slot back; calls after the first do nothing.
func (s *slot) release() {
	was := s.state.Swap(slotReleased)
	if was == slotReleased {
		return
	}
	// The counts first, the ending mark last (see take).
	s.cs.pool.give(s.cs.addr)
	s.cs.open.Add(-1)
	if was == slotEnding {
		s.cs.ending.Add(-1)
	}
	select {
	case s.cs.freed <- struct{}{}:
	default:
	}
}

// A ChannelPool counts the open session and direct-tcpip channels of every
// connection of the Servers that share it (Config.Channels): one pool for
// the daemon, whichever listener a connection came through. A channel the
// client sends data that nothing reads holds that data, up to x/crypto's
// fixed 2 MiB window, until it closes; the pool is what bounds those
// channels across the daemon, and its per-address share keeps one address
// from taking all of them. It is safe for concurrent use.
type ChannelPool struct {
	max, perAddr int

	mu     sync.Mutex
	open   int
	byAddr map[netip.Addr]int
}

// Defaults of a ChannelPool built for a Config without Channels.
const (
	// DefaultMaxServerChannels caps the open channels of all connections
	// together: 512 × x/crypto's 2 MiB window (about 2.6 MiB of heap each
	// when the client sends full packets) is about 1.3 GiB.
	DefaultMaxServerChannels = 512
	// DefaultMaxServerChannelsPerAddr is one client address's share.
	DefaultMaxServerChannelsPerAddr = DefaultMaxServerChannels / 2
)

// NewChannelPool returns a pool of max channels, at most perAddr of them
// from one client address (perAddr <= 0 or above max: max).
func NewChannelPool(max, perAddr int) *ChannelPool {
	if max <= 0 {
		max = DefaultMaxServerChannels
	}
	if perAddr <= 0 || perAddr > max {
		perAddr = max
	}
	return &ChannelPool{max: max, perAddr: perAddr, byAddr: make(map[netip.Addr]int)}
}

// Open is the number of channels the pool counts now.
func (p *ChannelPool) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

// take counts one more channel from addr, or says why not.
func (p *ChannelPool) take(addr netip.Addr) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.open >= p.max:
		return fmt.Sprintf("too many channels on this daemon (limit %d); close some first", p.max)
	case p.byAddr[addr] >= p.perAddr:
		return fmt.Sprintf("too many channels from this address on this daemon (limit %d of the daemon's %d); close some first", p.perAddr, p.max)
	}
	p.open++
	p.byAddr[addr]++
	return ""
}

// give gives back a channel take counted.
func (p *ChannelPool) give(addr netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open--
	if n := p.byAddr[addr] - 1; n > 0 {
		p.byAddr[addr] = n
	} else {
		delete(p.byAddr, addr)
	}
}

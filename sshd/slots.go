package sshd

import (
	"context"
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
type chanSlots struct {
	max    int32
	open   atomic.Int32  // slots held
	ending atomic.Int32  // of those, slots whose channel has ended
	freed  chan struct{} // a token when a slot is released
}

func newChanSlots(max int) *chanSlots {
	return &chanSlots{max: int32(max), freed: make(chan struct{}, 1)}
}

// take gets a slot, waiting for ending ones to be released; nil when the
// connection holds MaxChannels (or ctx ended).
func (cs *chanSlots) take(ctx context.Context) *slot {
	var deadline <-chan time.Time
	for cs.open.Load() >= cs.max {
		if cs.ending.Load() == 0 {
			return nil
		}
		if deadline == nil {
			t := time.NewTimer(endingGrace)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-cs.freed:
		case <-deadline:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
	cs.open.Add(1)
	return &slot{cs: cs}
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
	switch s.state.Swap(slotReleased) {
	case slotReleased:
		return
	case slotEnding:
		s.cs.ending.Add(-1)
	}
	s.cs.open.Add(-1)
	select {
	case s.cs.freed <- struct{}{}:
	default:
	}
}

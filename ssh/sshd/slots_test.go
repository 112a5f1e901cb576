package sshd

import (
	"context"
	"net/netip"
	"testing"
	"time"
)

// TestChannelSlotsAfterEnd: at MaxChannels, a session opened as soon as
// the previous one ended (exit status and close seen by the client) is
// served, not refused for a slot its predecessor's goroutine had yet to
// release; a held channel still counts.
func TestChannelSlotsAfterEnd(t *testing.T) {
	e := newEnv(t, withOpts(func(o *testOptions) { o.MaxChannels = 1 }))
	c := e.dial(t, "")
	for i := range 50 {
		s, err := c.NewSession()
		if err != nil {
			t.Fatalf("session %d after the previous one ended: %v", i, err)
		}
		if err := s.Run("true"); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		s.Close()
	}
	held, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	start := time.Now()
	if _, err := c.NewSession(); err == nil {
		t.Fatal("a second session was opened at MaxChannels 1")
	} else if d := time.Since(start); d > endingGrace/2 {
		t.Errorf("the refusal of a channel over the cap took %v: only ending slots are waited for", d)
	}
}

// TestChanSlots: take waits for a slot whose channel ended, up to the
// grace, and refuses at once when none is ending.
func TestChanSlots(t *testing.T) {
	ctx := context.Background()
	cs := newChanSlots(1, NewChannelPool(0, 0), netip.Addr{})
	a, _ := cs.take(ctx)
	if a == nil {
		t.Fatal("no first slot")
	}
	if s, _ := cs.take(ctx); s != nil {
		t.Fatal("a second slot at max 1")
	}
	a.end()
	go func() { time.Sleep(20 * time.Millisecond); a.release() }()
	b, _ := cs.take(ctx)
	if b == nil {
		t.Fatal("an ending slot's release was not waited for")
	}
	b.end() // never released: the grace runs out
	start := time.Now()
	if s, _ := cs.take(ctx); s != nil {
		t.Fatal("a slot beyond the cap")
	}
	if d := time.Since(start); d < endingGrace {
		t.Errorf("gave up after %v, before the grace (%v)", d, endingGrace)
	}
	b.release()
	b.release() // a second release gives nothing back twice
	b.end()     // nor does an end after the release
	if cs.open.Load() != 0 || cs.ending.Load() != 0 {
		t.Errorf("open %d, ending %d after every release", cs.open.Load(), cs.ending.Load())
	}
	cctx, cancel := context.WithCancel(ctx)
	x, _ := cs.take(ctx)
	x.end()
	cancel()
	if s, _ := cs.take(cctx); s != nil {
		t.Error("a take on an ended connection got a slot")
	}
}

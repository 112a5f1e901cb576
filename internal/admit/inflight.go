package admit

import (
	"context"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// InflightWait is how long a request beyond an Inflight's limit waits for
// one of its client's requests to finish before it is refused (429).
const InflightWait = 2 * time.Second

// Inflight bounds the requests being answered per client address
// (--max-inflight-per-ip), one count for every face that shares it: the
// daemon gives the same one to /mcp, /execute and /gateway (each message
// in flight). It is a counter per
// address, kept in a sync.Map whose lookups of a present key
// take no lock. A request takes a slot with a compare-and-swap on its
// address's counter and gives it back with an add; only a request that
// finds its address full takes the address's own mutex, to wait in line.
// Every request of every client took one mutex (and a shared channel)
// before, which the mutex profile under parallel load showed
// (docs/performance.md, "Contention under load").
//
// An address's entry outlives its last request, so that one client's
// requests one after another do not insert and delete it each time; the
// entries no request holds or waits for are dropped (sweep) whenever the
// map has grown to twice what the last sweep left, and at least
// inflightSweepMin: the map stays within a constant factor of the addresses
// with requests in flight.
type Inflight struct {
	limit int
	wait  time.Duration
	addrs sync.Map // client address (ClientAddr) → *addrSlots

	entries atomic.Int64 // in addrs
	sweepAt atomic.Int64 // entries beyond which an insert sweeps
	sweepMu sync.Mutex   // one sweep at a time
}

// inflightSweepMin is the size below which the map is not swept.
const inflightSweepMin = 256

// addrSlots is one client address's requests in flight.
type addrSlots struct {
	// n is how many requests hold a slot; -1 once swept, after which the
	// entry is no longer in the map and a request looks it up again.
	n atomic.Int64
	// waiters counts the requests in queue; changed only under mu, so that
	// a sweep (under mu) never drops an entry someone waits on.
	waiters atomic.Int32
	mu      sync.Mutex
	queue   []chan struct{} // waiting requests, first come first served; each channel has room for one
}

// Outcomes of addrSlots.take.
const (
	slotTaken = iota
	slotsFull
	slotsGone // swept: look the address up again
)

func (a *addrSlots) take(limit int64) int {
	for {
		v := a.n.Load()
		switch {
		case v < 0:
			return slotsGone
		case v >= limit:
			return slotsFull
		case a.n.CompareAndSwap(v, v+1):
			return slotTaken
		}
	}
}

// NewInflight returns a bound of limit requests in flight per client
// address, where one more waits up to wait (InflightWait when 0).
func NewInflight(limit int, wait time.Duration) *Inflight {
	if wait <= 0 {
		wait = InflightWait
	}
	f := &Inflight{limit: limit, wait: wait}
	f.sweepAt.Store(inflightSweepMin)
	return f
}

// Slot is one request's place in its address's count, given back by
// Release.
type Slot struct{ a *addrSlots }

// Acquire takes a slot for the client at remoteAddr, waiting up to the
// Inflight's wait (or until ctx ends) when it has limit requests in
// flight, and reports whether it got one; Release gives it back.
func (f *Inflight) Acquire(ctx context.Context, remoteAddr string) (Slot, bool) {
	key := ClientAddrOf(remoteAddr)
	var t *time.Timer
	for {
		a := f.entry(key)
		switch a.take(int64(f.limit)) {
		case slotTaken:
			if t != nil {
				t.Stop()
			}
			return Slot{a}, true
		case slotsGone:
			f.drop(key, a)
			continue
		}
		if t == nil {
			t = time.NewTimer(f.wait) // one wait in all, however many lookups
			defer t.Stop()
		}
		switch f.queue(ctx, a, t) {
		case slotTaken:
			return Slot{a}, true
		case slotsGone:
			f.drop(key, a)
			continue
		}
		return Slot{}, false
	}
}

// queue waits in a's line for a slot until t fires or ctx ends: slotTaken
// when a release handed it one, slotsFull when it gave up, slotsGone when a
// was swept before it could queue.
func (f *Inflight) queue(ctx context.Context, a *addrSlots, t *time.Timer) int {
	a.mu.Lock()
	a.waiters.Add(1)
	// Again under mu, after counting itself as a waiter: a release that
	// came between the first try and here either shows here or sees the
	// waiter and hands its slot on (release).
	if got := a.take(int64(f.limit)); got != slotsFull {
		a.waiters.Add(-1)
		a.mu.Unlock()
		return got
	}
	ch := make(chan struct{}, 1)
	a.queue = append(a.queue, ch)
	a.mu.Unlock()
	select {
	case <-ch:
		return slotTaken
	case <-t.C:
	case <-ctx.Done():
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if i := slices.Index(a.queue, ch); i >= 0 {
		a.queue = slices.Delete(a.queue, i, i+1)
		a.waiters.Add(-1)
		return slotsFull
	}
	return slotTaken // a release handed it a slot as it gave up: keep it
}

// Release gives back a slot Acquire took.
func (f *Inflight) Release(s Slot) {
	a := s.a
	a.n.Add(-1)
	if a.waiters.Load() == 0 {
		return
	}
	// Hand the freed slots to the requests in line, oldest first; a new
	// request may have taken one first, which is as fair as the line gets.
	a.mu.Lock()
	for len(a.queue) > 0 && a.take(int64(f.limit)) == slotTaken {
		ch := a.queue[0]
		a.queue = a.queue[1:]
		a.waiters.Add(-1)
		ch <- struct{}{}
	}
	a.mu.Unlock()
}

// entry returns key's counter, adding it (and sweeping if the map grew) if
// there is none.
func (f *Inflight) entry(key netip.Addr) *addrSlots {
	if v, ok := f.addrs.Load(key); ok {
		return v.(*addrSlots)
	}
	v, loaded := f.addrs.LoadOrStore(key, &addrSlots{})
	if !loaded && f.entries.Add(1) > f.sweepAt.Load() {
		f.sweep()
	}
	return v.(*addrSlots)
}

// drop removes a swept entry from the map, once.
func (f *Inflight) drop(key netip.Addr, a *addrSlots) {
	if f.addrs.CompareAndDelete(key, a) {
		f.entries.Add(-1)
	}
}

// sweep drops the entries no request holds or waits for, and sets the next
// sweep at twice what is left (at least inflightSweepMin).
func (f *Inflight) sweep() {
	if !f.sweepMu.TryLock() {
		return // one is under way
	}
	defer f.sweepMu.Unlock()
	var live int64
	f.addrs.Range(func(k, v any) bool {
		a := v.(*addrSlots)
		a.mu.Lock()
		if a.waiters.Load() == 0 && a.n.CompareAndSwap(0, -1) {
			a.mu.Unlock()
			f.drop(k.(netip.Addr), a)
			return true
		}
		a.mu.Unlock()
		live++
		return true
	})
	f.sweepAt.Store(max(inflightSweepMin, 2*live))
}

// Limit is the requests one address may have in flight.
func (f *Inflight) Limit() int { return f.limit }

// Busy is the refusal of a request Acquire gave no slot: 429 with
// Retry-After, the client having had Limit requests in flight for the
// whole wait.
func (f *Inflight) Busy() *Refusal {
	return &Refusal{Status: http.StatusTooManyRequests, Title: "Too many requests", RetryAfter: "1",
		Message: "this client address has had " + strconv.Itoa(f.limit) + " requests in flight for " + f.wait.String() +
			" (--max-inflight-per-ip, counted across /mcp and /execute); wait for one to finish, then retry"}
}

// Held reports how many slots the requests of the client at addr (an
// address without a port, such as "127.0.0.1") hold.
func (f *Inflight) Held(addr string) int64 {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return 0
	}
	if v, ok := f.addrs.Load(a.Unmap()); ok {
		return max(v.(*addrSlots).n.Load(), 0)
	}
	return 0
}

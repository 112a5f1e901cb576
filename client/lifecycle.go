package client

import (
	"errors"
	"io"
	"sync"
)

// lifecycle is the state every root backend shares with its scopes: the
// status and its subscribers, the tracked closeables, and the live scopes.
// A scope uses its root's lifecycle, so status is read through, never copied,
// and closeables are released once, by the root.
type lifecycle struct {
	mu        sync.Mutex
	status    Status
	subs      map[int]*subscriber
	nextSub   int
	closers   []io.Closer
	children  map[*Scoped]struct{}
	destroyed chan struct{} // closed by destroy
}

// subscriber delivers changes to one callback in order, one at a time, on a
// goroutine of its own, so a slow or re-entrant callback (one that calls
// Status, or even Destroy) cannot deadlock the backend or reorder changes.
type subscriber struct {
	fn      func(StatusChange)
	mu      sync.Mutex
	queue   []StatusChange
	running bool
	dead    bool
}

func newLifecycle(initial Status) *lifecycle {
	return &lifecycle{status: initial, subs: map[int]*subscriber{}, children: map[*Scoped]struct{}{}, destroyed: make(chan struct{})}
}

func (l *lifecycle) get() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.status
}

// set moves to s and tells every subscriber; setting the current status, or
// anything after destroyed, does nothing. It reports whether it changed.
func (l *lifecycle) set(s Status, cause error) bool {
	l.mu.Lock()
	if l.status == s || l.status == StatusDestroyed {
		l.mu.Unlock()
		return false
	}
	ch := StatusChange{From: l.status, To: s, Err: cause}
	l.status = s
	for _, sub := range l.subs {
		sub.push(ch)
	}
	l.mu.Unlock()
	return true
}

func (l *lifecycle) subscribe(fn func(StatusChange)) (cancel func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := l.nextSub
	l.nextSub++
	sub := &subscriber{fn: fn}
	l.subs[id] = sub
	return func() {
		l.mu.Lock()
		delete(l.subs, id)
		l.mu.Unlock()
		sub.mu.Lock()
		sub.dead = true
		sub.queue = nil
		sub.mu.Unlock()
	}
}

func (s *subscriber) push(ch StatusChange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return
	}
	s.queue = append(s.queue, ch)
	if !s.running {
		s.running = true
		go s.drain()
	}
}

func (s *subscriber) drain() {
	for {
		s.mu.Lock()
		if len(s.queue) == 0 || s.dead {
			s.running = false
			s.mu.Unlock()
			return
		}
		ch := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		s.fn(ch)
	}
}

// track registers c; after destroy it closes c at once.
func (l *lifecycle) track(c io.Closer) {
	l.mu.Lock()
	if l.status == StatusDestroyed {
		l.mu.Unlock()
		c.Close()
		return
	}
	l.closers = append(l.closers, c)
	l.mu.Unlock()
}

func (l *lifecycle) addChild(s *Scoped) {
	l.mu.Lock()
	l.children[s] = struct{}{}
	l.mu.Unlock()
}

func (l *lifecycle) removeChild(s *Scoped) {
	l.mu.Lock()
	delete(l.children, s)
	l.mu.Unlock()
}

// destroy sets destroyed (telling subscribers), then closes the tracked
// resources, last registered first. It reports whether this call did it, and
// the closers' errors joined.
func (l *lifecycle) destroy() (bool, error) {
	if !l.set(StatusDestroyed, nil) {
		return false, nil
	}
	l.mu.Lock()
	closers := l.closers
	l.closers = nil
	l.children = map[*Scoped]struct{}{} // orphaned, not destroyed
	close(l.destroyed)
	l.mu.Unlock()
	var errs []error
	for i := len(closers) - 1; i >= 0; i-- {
		if err := closers[i].Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return true, errors.Join(errs...)
}

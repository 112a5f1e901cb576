package client

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// PoolOptions configure a Pool of backends built from options of type C
// (LocalOptions, RemoteOptions, MemoryOptions, or a type of the caller's).
type PoolOptions[C any] struct {
	// Defaults is the configuration every backend starts from.
	Defaults C
	// New builds a backend from a configuration (Defaults, with a request's
	// override merged over it). Required.
	New func(ctx context.Context, cfg C) (Backend, error)
	// IdleTimeout is how long a backend nobody holds stays in the pool
	// before Cleanup destroys it; 0 means 5 minutes.
	IdleTimeout time.Duration
	// CleanupInterval runs Cleanup periodically when positive; otherwise
	// the caller calls Cleanup.
	CleanupInterval time.Duration
}

// PoolStats counts the pool's backends: Active are held by at least one
// caller, Idle by none.
type PoolStats struct {
	Total, Active, Idle int
}

// Pool keeps at most one backend per key for servers that handle many
// requests ("Connection Pooling"): a key's backend is reused while it is
// connected and replaced when it is not; a request without a key gets a
// fresh backend of its own, destroyed at release. Backends nobody holds
// are destroyed after the idle timeout. A Pool is safe for concurrent use.
type Pool[C any] struct {
	opts    PoolOptions[C]
	mu      sync.Mutex
	entries map[string]*poolEntry
	closed  bool
	stop    chan struct{}
	done    chan struct{}
}

type poolEntry struct {
	ready   chan struct{} // closed once b (or err) is set
	b       Backend
	err     error
	users   int
	idleAt  time.Time // when users last fell to zero
	retired bool      // replaced or cleaned: destroy when users reach zero
}

// NewPool makes a pool. Bad options are INVALID_CONFIGURATION errors.
func NewPool[C any](opts PoolOptions[C]) (*Pool[C], error) {
	if opts.New == nil {
		return nil, &Error{Code: errcode.InvalidConfiguration, Op: "new pool", Msg: "PoolOptions.New is required"}
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 5 * time.Minute
	}
	p := &Pool[C]{opts: opts, entries: map[string]*poolEntry{}, stop: make(chan struct{}), done: make(chan struct{})}
	if opts.CleanupInterval > 0 {
		go p.cleanupLoop()
	} else {
		close(p.done)
	}
	return p, nil
}

// ErrPoolClosed is the error of Acquire on a closed pool.
var ErrPoolClosed = errors.New("pool closed")

// Acquire returns the backend for key (creating it, with override merged
// over the defaults, when there is none or it is not connected) and the
// function that releases it. Each Acquire must be matched by one release;
// release is idempotent. With key "", the backend is fresh and release
// destroys it.
func (p *Pool[C]) Acquire(ctx context.Context, key string, override *C) (Backend, func(), error) {
	cfg := p.config(override)
	if key == "" {
		b, err := p.opts.New(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		var once sync.Once
		return b, func() { once.Do(func() { b.Destroy() }) }, nil
	}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, nil, ErrPoolClosed
		}
		e := p.entries[key]
		if e != nil {
			select {
			case <-e.ready:
				if e.err == nil && e.b.Status() == StatusConnected {
					e.users++
					p.mu.Unlock()
					return e.b, p.releaser(key, e), nil
				}
				// Failed, or no longer connected: replace it.
				p.retire(key, e)
				e = nil
			default:
				// Another caller is creating it: wait, then look again.
				p.mu.Unlock()
				select {
				case <-e.ready:
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
				continue
			}
		}
		e = &poolEntry{ready: make(chan struct{}), users: 1}
		p.entries[key] = e
		p.mu.Unlock()

		b, err := p.opts.New(ctx, cfg)
		p.mu.Lock()
		e.b, e.err = b, err
		close(e.ready)
		if err != nil {
			if p.entries[key] == e {
				delete(p.entries, key)
			}
			p.mu.Unlock()
			return nil, nil, err
		}
		closed := p.closed
		p.mu.Unlock()
		if closed {
			b.Destroy()
			return nil, nil, ErrPoolClosed
		}
		return b, p.releaser(key, e), nil
	}
}

// With runs fn with the backend for key and releases it afterwards, even if
// fn panics.
func (p *Pool[C]) With(ctx context.Context, key string, override *C, fn func(Backend) error) error {
	b, release, err := p.Acquire(ctx, key, override)
	if err != nil {
		return err
	}
	defer release()
	return fn(b)
}

func (p *Pool[C]) releaser(key string, e *poolEntry) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			e.users--
			var destroy Backend
			if e.users == 0 {
				e.idleAt = time.Now()
				if e.retired {
					destroy = e.b
				}
			}
			p.mu.Unlock()
			if destroy != nil {
				destroy.Destroy()
			}
		})
	}
}

// retire takes e out of the pool (p.mu held); it is destroyed now if
// nobody holds it, else by its last release.
func (p *Pool[C]) retire(key string, e *poolEntry) {
	if p.entries[key] == e {
		delete(p.entries, key)
	}
	e.retired = true
	if e.users == 0 && e.b != nil {
		go e.b.Destroy()
	}
}

// Cleanup destroys the backends nobody has held for the idle timeout, and
// those that are no longer connected and unheld; it returns how many.
func (p *Pool[C]) Cleanup() int {
	now := time.Now()
	var gone []Backend
	p.mu.Lock()
	for key, e := range p.entries {
		select {
		case <-e.ready:
		default:
			continue // being created
		}
		if e.users > 0 {
			continue
		}
		if e.err != nil || now.Sub(e.idleAt) >= p.opts.IdleTimeout || e.b.Status() != StatusConnected {
			delete(p.entries, key)
			e.retired = true
			if e.b != nil {
				gone = append(gone, e.b)
			}
		}
	}
	p.mu.Unlock()
	for _, b := range gone {
		b.Destroy()
	}
	return len(gone)
}

func (p *Pool[C]) cleanupLoop() {
	defer close(p.done)
	t := time.NewTicker(p.opts.CleanupInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.Cleanup()
		}
	}
}

// Stats counts the pool's backends.
func (p *Pool[C]) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	var s PoolStats
	for _, e := range p.entries {
		s.Total++
		if e.users > 0 {
			s.Active++
		} else {
			s.Idle++
		}
	}
	return s
}

// Close destroys every pooled backend (those still held are destroyed now
// too: their holders' operations fail with ErrDestroyed) and stops the
// periodic cleanup. Acquire fails afterwards.
func (p *Pool[C]) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var all []Backend
	for key, e := range p.entries {
		delete(p.entries, key)
		select {
		case <-e.ready:
			if e.b != nil {
				all = append(all, e.b)
			}
		default:
		}
	}
	p.mu.Unlock()
	close(p.stop)
	<-p.done
	var errs []error
	for _, b := range all {
		errs = append(errs, b.Destroy())
	}
	return errors.Join(errs...)
}

// config merges override over the defaults: every field of override that
// is not its zero value wins (maps and slices whole). A C that is not a
// struct is replaced by a non-nil override.
func (p *Pool[C]) config(override *C) C {
	cfg := p.opts.Defaults
	if override == nil {
		return cfg
	}
	dst := reflect.ValueOf(&cfg).Elem()
	src := reflect.ValueOf(override).Elem()
	if dst.Kind() != reflect.Struct {
		return *override
	}
	for i := range src.NumField() {
		if f := src.Field(i); !f.IsZero() && dst.Field(i).CanSet() {
			dst.Field(i).Set(f)
		}
	}
	return cfg
}

func (s PoolStats) String() string {
	return fmt.Sprintf("%d backends (%d active, %d idle)", s.Total, s.Active, s.Idle)
}

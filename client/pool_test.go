package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func memoryPool(t *testing.T, opts PoolOptions[MemoryOptions]) (*Pool[MemoryOptions], *atomic.Int32) {
	t.Helper()
	var made atomic.Int32
	opts.Defaults = MemoryOptions{RootPrefix: "/default"}
	opts.New = func(_ context.Context, cfg MemoryOptions) (Backend, error) {
		made.Add(1)
		return NewMemory(cfg)
	}
	p, err := NewPool(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, &made
}

func TestPoolKeys(t *testing.T) {
	ctx := context.Background()
	p, made := memoryPool(t, PoolOptions[MemoryOptions]{})
	a, relA, err := p.Acquire(ctx, "user-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	a.Write(ctx, "f", []byte("kept"))
	b, relB, _ := p.Acquire(ctx, "user-1", nil)
	if b != a || made.Load() != 1 {
		t.Fatalf("the same key did not reuse its backend (%d made)", made.Load())
	}
	if s := p.Stats(); s != (PoolStats{Total: 1, Active: 1}) {
		t.Errorf("stats %v", s)
	}
	relA()
	relA() // idempotent
	if s := p.Stats(); s.Active != 1 {
		t.Errorf("one holder left: %v", s)
	}
	relB()
	if s := p.Stats(); s != (PoolStats{Total: 1, Idle: 1}) {
		t.Errorf("after both releases: %v", s)
	}
	// Another key, with an override merged over the defaults.
	c, relC, _ := p.Acquire(ctx, "user-2", &MemoryOptions{RootPrefix: "/override"})
	defer relC()
	if c == a || c.RootDir() != "/override" {
		t.Errorf("another key: %s", c.RootDir())
	}
	// No key: a fresh backend each time, destroyed at release.
	f1, rel1, _ := p.Acquire(ctx, "", nil)
	f2, rel2, _ := p.Acquire(ctx, "", nil)
	if f1 == f2 || f1.RootDir() != "/default" {
		t.Errorf("keyless backends were shared, or did not get the defaults")
	}
	rel1()
	rel2()
	if f1.Status() != StatusDestroyed {
		t.Errorf("a keyless backend after release: %s", f1.Status())
	}
	if s := p.Stats(); s.Total != 2 {
		t.Errorf("keyless backends are not pooled: %v", s)
	}
	// A pooled backend that is no longer connected is replaced.
	a.Destroy()
	d, relD, _ := p.Acquire(ctx, "user-1", nil)
	defer relD()
	if d == a || d.Status() != StatusConnected {
		t.Error("a destroyed backend was handed out again")
	}
}

func TestPoolWithReleasesOnPanic(t *testing.T) {
	ctx := context.Background()
	p, _ := memoryPool(t, PoolOptions[MemoryOptions]{})
	func() {
		defer func() { recover() }()
		p.With(ctx, "k", nil, func(Backend) error {
			if s := p.Stats(); s.Active != 1 {
				t.Errorf("inside With: %v", s)
			}
			panic("boom")
		})
	}()
	if s := p.Stats(); s.Active != 0 || s.Idle != 1 {
		t.Errorf("after a panic in With: %v", s)
	}
	want := errors.New("fn failed")
	if err := p.With(ctx, "k", nil, func(Backend) error { return want }); err != want {
		t.Errorf("With's error: %v", err)
	}
}

func TestPoolIdleCleanup(t *testing.T) {
	ctx := context.Background()
	p, _ := memoryPool(t, PoolOptions[MemoryOptions]{IdleTimeout: 50 * time.Millisecond, CleanupInterval: 10 * time.Millisecond})
	held, release, _ := p.Acquire(ctx, "held", nil)
	idle, relIdle, _ := p.Acquire(ctx, "idle", nil)
	relIdle()
	deadline := time.Now().Add(10 * time.Second) // a hang guard
	for idle.Status() != StatusDestroyed {
		if time.Now().After(deadline) {
			t.Fatal("the idle backend was never cleaned up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if held.Status() != StatusConnected {
		t.Error("a held backend was cleaned up")
	}
	if s := p.Stats(); s != (PoolStats{Total: 1, Active: 1}) {
		t.Errorf("stats after cleanup: %v", s)
	}
	release()
	p.Close()
	if held.Status() != StatusDestroyed {
		t.Error("Close left a backend")
	}
	if _, _, err := p.Acquire(ctx, "x", nil); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("Acquire after Close: %v", err)
	}
}

// TestPoolOneBackendPerKey: concurrent first acquisitions of a key create
// one backend.
func TestPoolOneBackendPerKey(t *testing.T) {
	ctx := context.Background()
	p, made := memoryPool(t, PoolOptions[MemoryOptions]{})
	var wg sync.WaitGroup
	got := make([]Backend, 32)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, release, err := p.Acquire(ctx, "same", nil)
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = b
			release()
		}()
	}
	wg.Wait()
	if made.Load() != 1 {
		t.Errorf("%d backends made for one key", made.Load())
	}
	for _, b := range got {
		if b != got[0] {
			t.Fatal("callers got different backends for one key")
		}
	}
	if _, err := NewPool(PoolOptions[MemoryOptions]{}); err == nil {
		t.Error("a pool without New")
	}
}

package client

import "sync/atomic"

// Scoped is a backend restricted to a subdirectory of another ("Scoping"). It
// shares its root backend's status and closeables; Destroy detaches it from
// its parent and releases nothing (the parent owns the resources).
type Scoped struct {
	*base
	parent    *base
	destroyed atomic.Bool
}

func (s *Scoped) isDestroyed() bool { return s.destroyed.Load() }

func (s *Scoped) destroy() error {
	if s.destroyed.CompareAndSwap(false, true) {
		s.parent.life.removeChild(s)
	}
	return nil
}

package clip

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
)

// MaxSecrets bounds a Secrets list. Each reload of the token files adds
// at most three values, so the bound is reached only after ten rotations
// that each changed every file; the oldest values leave first.
const MaxSecrets = 32

// Secrets are the values the daemon holds in clear (its token, the
// operator's, the scraper's) that no log line (Handler), audit record
// (internal/audit), command environment (sandbox) or extension
// (tools/extensions) may show: one list that each of them reads at the
// moment it redacts, and that a reload of the token files adds to before
// the new tokens admit anyone. A value once added stays until MaxSecrets
// pushes it out: a token rotated out may still be in a client's
// configuration, a script or another daemon. The list is kept longest
// first, so a value that holds another is replaced whole. The nil
// *Secrets holds nothing. Safe for concurrent use.
type Secrets struct {
	mu sync.Mutex // serializes Add
	v  atomic.Pointer[secretList]
}

type secretList struct {
	newest []string // newest first: what MaxSecrets drops from the end
	long   []string // the same values, longest first: what readers get
}

// NewSecrets returns a list holding vals; empty strings are dropped.
func NewSecrets(vals ...string) *Secrets {
	s := new(Secrets)
	s.Add(vals...)
	return s
}

// Add puts vals in the list (empty strings and values it holds are
// skipped). Readers see the old list or the new one, never a part.
func (s *Secrets) Add(vals ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var old []string
	if p := s.v.Load(); p != nil {
		old = p.newest
	}
	// Newest first, then the oldest dropped past the bound.
	var next []string
	for _, v := range slices.Backward(vals) {
		if v != "" && !slices.Contains(next, v) {
			next = append(next, v)
		}
	}
	for _, v := range old {
		if !slices.Contains(next, v) {
			next = append(next, v)
		}
	}
	next = next[:min(len(next), MaxSecrets)]
	long := slices.Clone(next)
	slices.SortStableFunc(long, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	s.v.Store(&secretList{newest: next, long: long})
}

// List is the values, longest first; nil for a nil or empty list. The
// caller must not change the slice.
func (s *Secrets) List() []string {
	if s == nil {
		return nil
	}
	if p := s.v.Load(); p != nil {
		return p.long
	}
	return nil
}

// Package ratelog is the one rate limit on the daemon's warnings about
// what it refuses: a connection over a cap, a request over a bound, a
// login flood. A client decides how often it is refused, so a warning per
// refusal would let it fill the log (and the disk, and the journal's rate
// limit, which then drops the lines that matter). Every refusal warning
// goes through an Every: at most one line per kind per interval, carrying
// how many of that kind were refused since the last line
// (refused_since_last_warning), so the count survives the limit.
package ratelog

import (
	"log/slog"
	"sync"
	"time"
)

// Interval is the daemon's: at most one warning per kind every 10 s.
const Interval = 10 * time.Second

// SinceKey is the attribute that carries how many refusals of the kind
// the line's interval saw besides the one it reports.
const SinceKey = "refused_since_last_warning"

// Every rate-limits warnings per kind. The zero value uses Interval; it is
// safe for concurrent use.
type Every struct {
	// Interval, when set, replaces the package's (tests shorten it).
	Interval time.Duration

	mu    sync.Mutex
	kinds map[string]*kind
}

type kind struct {
	last    time.Time
	skipped int
}

// Warn logs msg with args at warn on log, unless a warning of the same
// kind was logged less than the interval ago; then it only counts it. A
// logged line carries SinceKey: how many of the kind were counted without
// a line since the last one. kind is the daemon's own name for what was
// refused (a fixed set), never a client's value, so the kinds are bounded.
func (e *Every) Warn(log *slog.Logger, kind, msg string, args ...any) {
	if !e.take(kind, time.Now(), &args) {
		return
	}
	log.Warn(msg, args...)
}

// take decides, under the lock, whether a line is due, and appends the
// count to args when it is.
func (e *Every) take(name string, now time.Time, args *[]any) bool {
	every := e.Interval
	if every <= 0 {
		every = Interval
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.kinds == nil {
		e.kinds = map[string]*kind{}
	}
	k := e.kinds[name]
	if k == nil {
		k = &kind{}
		e.kinds[name] = k
	}
	if !k.last.IsZero() && now.Sub(k.last) < every {
		k.skipped++
		return false
	}
	*args = append(*args, SinceKey, k.skipped)
	k.last, k.skipped = now, 0
	return true
}

package daemon

import (
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Returning memory after bursts. Go's scavenger gives freed heap back to the
// OS on its own, but over minutes; after a burst of connections (each
// WebSocket and SSH session holds buffers) the daemon would sit near its
// peak RSS long after the clients left. memoryReturner watches the open
// connections and, once a burst is over, has the runtime return what it
// freed (debug.FreeOSMemory: a GC and a full scavenge).
const (
	// burstMin is the smallest peak of open connections worth a return.
	burstMin = 64
	// settleAfter: a return happens once the open connections stayed at
	// half the peak or less for this long (the burst is over, not pausing).
	settleAfter = 2 * time.Second
	// minFreeInterval bounds how often a return can happen: each is a
	// stop-the-world collection.
	minFreeInterval = 10 * time.Second
)

type memoryReturner struct {
	free func() // debug.FreeOSMemory; tests count calls
	now  func() time.Time
	log  *slog.Logger

	mu       sync.Mutex
	open     int
	peak     int       // the highest open count since the last return
	lowSince time.Time // when open fell to half the peak or less; zero otherwise
	lastFree time.Time
	freeing  bool
	stop     chan struct{}
	done     chan struct{}
}

func newMemoryReturner(log *slog.Logger) *memoryReturner {
	return &memoryReturner{free: func() { freeAll(); releasePages(log, slog.LevelDebug, "burst") }, now: time.Now, log: log}
}

// freeAll collects twice before returning memory: sync.Pool keeps what it
// held through one collection (its victim cache), and the connections'
// buffers are pooled.
func freeAll() {
	runtime.GC()
	debug.FreeOSMemory()
}

func (m *memoryReturner) opened() {
	m.mu.Lock()
	m.open++
	if m.open > m.peak {
		m.peak = m.open
	}
	if m.open*2 > m.peak {
		m.lowSince = time.Time{}
	}
	m.mu.Unlock()
}

func (m *memoryReturner) closed() {
	m.mu.Lock()
	m.open--
	if m.peak >= burstMin && m.open*2 <= m.peak && m.lowSince.IsZero() {
		m.lowSince = m.now()
	}
	m.mu.Unlock()
}

// check returns memory when a burst has settled; the ticker calls it.
func (m *memoryReturner) check() {
	m.mu.Lock()
	now := m.now()
	due := !m.lowSince.IsZero() && now.Sub(m.lowSince) >= settleAfter && now.Sub(m.lastFree) >= minFreeInterval && !m.freeing
	if !due {
		m.mu.Unlock()
		return
	}
	peak, open := m.peak, m.open
	m.freeing, m.lastFree = true, now
	m.peak, m.lowSince = m.open, time.Time{}
	m.mu.Unlock()
	began := time.Now()
	m.free()
	m.log.Debug("returned freed memory to the OS after a burst of connections", "peak", peak, "open", open, "took", time.Since(began))
	m.mu.Lock()
	m.freeing = false
	m.mu.Unlock()
}

// run checks every interval until stopped.
func (m *memoryReturner) run(interval time.Duration) {
	m.stop, m.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(m.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.check()
			}
		}
	}()
}

func (m *memoryReturner) close() {
	if m.stop != nil {
		close(m.stop)
		<-m.done
	}
}

// cgroupMemoryLimit reads the memory limit of the daemon's cgroup (v2
// memory.max, or v1 memory.limit_in_bytes), in bytes; ok is false when
// there is none ("max", an absent file, or v1's "unlimited" sentinel).
func cgroupMemoryLimit(readFile func(string) ([]byte, error)) (limit int64, ok bool) {
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := readFile(f)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// applyMemoryLimit gives the Go runtime a soft memory limit of 90% of the
// cgroup's (a container's memory limit), unless GOMEMLIMIT is set: the
// collector then works harder near the limit instead of the kernel killing
// the daemon. It returns the limit set, 0 for none.
func applyMemoryLimit(getenv func(string) string, readFile func(string) ([]byte, error), set func(int64) int64) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit, ok := cgroupMemoryLimit(readFile)
	if !ok {
		return 0
	}
	soft := limit / 10 * 9
	set(soft)
	return soft
}

// ApplyMemoryLimit is applyMemoryLimit on this process (the command calls
// it once at start): the soft limit set, in bytes, or 0 for none.
func ApplyMemoryLimit() int64 {
	return applyMemoryLimit(os.Getenv, os.ReadFile, debug.SetMemoryLimit)
}

// DefaultGCPercent is the daemon's GC target (what GOGC sets) when the
// environment sets none. A daemon that holds many idle connections holds
// little else: each keeps ≈ 34 KiB live and its handshake leaves more than
// that in garbage, so at Go's default of 100 the heap grows by as much again
// before a collection, and RSS per idle connection follows the target: 47 KiB
// at 100, 38 at 75, for ≈ 2% more CPU per MCP call spent collecting (50 costs
// ≈ 8%, which shows in calls/s). Prometheus takes 75 for the same reason; the
// figures are in docs/performance.md, "Idle connections".
const DefaultGCPercent = 75

// applyGCPercent sets the GC target to DefaultGCPercent unless GOGC is set
// (the runtime applied it at start, and it wins). It returns the target in
// force and whether GOGC chose it; current reads the runtime's.
func applyGCPercent(getenv func(string) string, set func(int) int, current func() int) (percent int, fromEnv bool) {
	if getenv("GOGC") != "" {
		return current(), true
	}
	set(DefaultGCPercent)
	return DefaultGCPercent, false
}

// ApplyGCPercent is applyGCPercent on this process (the command calls it
// once at start): the GC target in force (-1 for GOGC=off), and whether
// GOGC chose it.
func ApplyGCPercent() (percent int, fromEnv bool) {
	return applyGCPercent(os.Getenv, debug.SetGCPercent, gcPercent)
}

// gcPercent reads the runtime's GC target without changing it.
func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	// GOGC=off reads as -1 stored in a uint64.
	return int(int64(s[0].Value.Uint64()))
}

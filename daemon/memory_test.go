package daemon

import (
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"testing"
	"time"
)

// TestMemoryReturnedAfterBurst: after a burst of connections settles at
// half its peak or less, freed memory is returned once; not during the
// burst, not for a small one, and not more often than minFreeInterval.
func TestMemoryReturnedAfterBurst(t *testing.T) {
	now := time.Unix(1000, 0)
	m := &memoryReturner{now: func() time.Time { return now }, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	frees := 0
	m.free = func() { frees++ }
	for range 1000 {
		m.opened()
	}
	m.check()
	now = now.Add(time.Minute)
	m.check()
	if frees != 0 {
		t.Fatalf("returned memory during the burst (%d)", frees)
	}
	for range 990 {
		m.closed()
	}
	m.check()
	if frees != 0 {
		t.Fatal("returned memory before the burst settled")
	}
	now = now.Add(settleAfter)
	m.check()
	if frees != 1 {
		t.Fatalf("%d returns after the burst settled, want 1", frees)
	}
	now = now.Add(time.Minute)
	m.check()
	if frees != 1 {
		t.Fatal("returned again with no new burst")
	}
	// A second burst right after: not before minFreeInterval.
	m.lastFree = now
	for range 500 {
		m.opened()
	}
	for range 500 {
		m.closed()
	}
	now = now.Add(settleAfter)
	m.check()
	if frees != 1 {
		t.Fatal("returned again within minFreeInterval")
	}
	now = now.Add(minFreeInterval)
	m.check()
	if frees != 2 {
		t.Fatalf("%d returns after the second burst, want 2", frees)
	}
	// A small burst is not worth it.
	small := &memoryReturner{now: m.now, log: m.log, free: func() { frees++ }}
	for range burstMin - 1 {
		small.opened()
	}
	for range burstMin - 1 {
		small.closed()
	}
	now = now.Add(time.Hour)
	small.check()
	if frees != 2 {
		t.Error("returned memory after a burst under burstMin")
	}
}

func TestCgroupMemoryLimit(t *testing.T) {
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if v, ok := m[name]; ok {
				return []byte(v), nil
			}
			return nil, os.ErrNotExist
		}
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		env   string
		want  int64
	}{
		{"v2 limit", map[string]string{"/sys/fs/cgroup/memory.max": "1073741824\n"}, "", 1073741824 / 10 * 9},
		{"v2 unlimited", map[string]string{"/sys/fs/cgroup/memory.max": "max\n"}, "", 0},
		{"v1 limit", map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912"}, "", 536870912 / 10 * 9},
		{"v1 unlimited", map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712"}, "", 0},
		{"no cgroup files", nil, "", 0},
		{"garbage", map[string]string{"/sys/fs/cgroup/memory.max": "lots"}, "", 0},
		{"GOMEMLIMIT set", map[string]string{"/sys/fs/cgroup/memory.max": "1073741824"}, "500MiB", 0},
	} {
		var set int64 = -1
		got := applyMemoryLimit(func(string) string { return tc.env }, files(tc.files), func(v int64) int64 { set = v; return 0 })
		if got != tc.want || (tc.want > 0 && set != tc.want) || (tc.want == 0 && set != -1) {
			t.Errorf("%s: %d (set %d), want %d", tc.name, got, set, tc.want)
		}
	}
}

// TestGCPercent: without GOGC the daemon's default is set, read back from
// the runtime; with GOGC the environment's target stays, untouched.
func TestGCPercent(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	none := func(string) string { return "" }
	if got, env := applyGCPercent(none, debug.SetGCPercent, gcPercent); got != DefaultGCPercent || env {
		t.Errorf("without GOGC: %d (from the environment %v), want %d", got, env, DefaultGCPercent)
	}
	if now := debug.SetGCPercent(100); now != DefaultGCPercent {
		t.Errorf("without GOGC the runtime's target is %d, want %d", now, DefaultGCPercent)
	}

	// GOGC=150 as the runtime applies it at start: the daemon reports it
	// and sets nothing.
	debug.SetGCPercent(150)
	gogc := func(k string) string {
		if k == "GOGC" {
			return "150"
		}
		return ""
	}
	set := func(p int) int { t.Errorf("GOGC set, but the target was set to %d", p); return debug.SetGCPercent(p) }
	if got, env := applyGCPercent(gogc, set, gcPercent); got != 150 || !env {
		t.Errorf("with GOGC=150: %d (from the environment %v), want 150 from it", got, env)
	}
	if now := debug.SetGCPercent(100); now != 150 {
		t.Errorf("with GOGC=150 the runtime's target is %d, want 150", now)
	}

	// GOGC=off reads back as -1.
	debug.SetGCPercent(-1)
	off := func(k string) string {
		if k == "GOGC" {
			return "off"
		}
		return ""
	}
	if got, env := applyGCPercent(off, set, gcPercent); got != -1 || !env {
		t.Errorf("with GOGC=off: %d (from the environment %v), want -1 from it", got, env)
	}
}

package browser

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkGotoSnapshot: browser.goto of a local page and an aria
// browser.snapshot of it, through the registry, on one session. Besides
// ns/op it reports the median of the iterations (p50-ms); run it with
// -benchtime 50x for the p50 over 50 runs.
func BenchmarkGotoSnapshot(b *testing.B) {
	f := setup(b, nil)
	id := f.start(b)
	f.gotoPage(b, id, "/") // the first load warms the browser's caches
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		f.gotoPage(b, id, fmt.Sprintf("/?i=%d", i))
		f.must(b, "browser.snapshot", `{"sessionId":"`+id+`"}`)
		samples = append(samples, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(median(samples), "p50-ms")
}

// BenchmarkStartSession: browser.start until the session is ready (Chromium
// started, interception and the tab set up), then browser.close, which is
// not timed.
func BenchmarkStartSession(b *testing.B) {
	f := setup(b, func(o *Options) { o.MaxSessions = 1 })
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		id := f.start(b)
		samples = append(samples, time.Since(t0))
		b.StopTimer()
		f.must(b, "browser.close", `{"sessionId":"`+id+`"}`)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(median(samples), "p50-ms")
}

// BenchmarkSessionMemory: the memory a session holds once it has loaded
// the test page and taken a snapshot: the proportional set size (PSS, so
// pages shared between Chromium's processes count once) of every process
// of the session, summed. Each iteration is one session; pss-MiB is the
// median. bench/browser/peer.sh measures a session beside Playwright MCP,
// both as processes of their own through their MCP interface.
func BenchmarkSessionMemory(b *testing.B) {
	f := setup(b, func(o *Options) { o.MaxSessions = 1 })
	var samples []float64
	for i := 0; i < b.N; i++ {
		id := f.start(b)
		f.gotoPage(b, id, "/")
		f.must(b, "browser.snapshot", `{"sessionId":"`+id+`"}`)
		b.StopTimer()
		f.p.mu.Lock()
		dir := f.p.sessions[id].dir
		f.p.mu.Unlock()
		var kib int64
		pids := processesUsing(dir, false)
		for _, pid := range pids {
			kib += pssKiB(pid)
		}
		if len(pids) == 0 || kib == 0 {
			b.Fatalf("no process of the session found under %s", dir)
		}
		samples = append(samples, float64(kib)/1024)
		f.must(b, "browser.close", `{"sessionId":"`+id+`"}`)
		b.StartTimer()
	}
	slices.Sort(samples)
	b.ReportMetric(samples[len(samples)/2], "pss-MiB")
}

// pssKiB is the Pss line of /proc/PID/smaps_rollup (0 when it is gone).
func pssKiB(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func median(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}

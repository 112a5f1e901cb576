package browser

import (
	"fmt"
	"slices"
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

func median(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}

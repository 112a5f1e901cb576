package metrics

import (
	"fmt"
	"runtime"
	"testing"
)

// TestRetain: a family whose label values come and go (10,000 values, each
// used once) keeps, after Retain, only the series kept, in the exposition
// and in memory; a dropped value used again starts from zero; values that
// hash alike are told apart while some are dropped.
func TestRetain(t *testing.T) {
	r := NewRegistry()
	cv := NewCounterVec("t_calls_total", "By tool.", "tool", "outcome")
	hv := NewHistogramVec("t_seconds", "By tool.", []float64{1}, "tool")
	for _, c := range []Collector{cv, hv} {
		if err := r.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	cv.WithLabelValues("keep", "ok").Inc()
	hv.WithLabelValues("keep").Observe(0.5)
	h0 := heap()
	const n = 10000
	for i := range n {
		name := fmt.Sprintf("gone_%d", i)
		cv.WithLabelValues(name, "ok").Inc()
		hv.WithLabelValues(name).Observe(0.5)
	}
	grown := heap()
	keep := func(v []string) bool { return v[0] == "keep" }
	if d := cv.Retain(keep); d != n {
		t.Errorf("CounterVec.Retain dropped %d; want %d", d, n)
	}
	if d := hv.Retain(keep); d != n {
		t.Errorf("HistogramVec.Retain dropped %d; want %d", d, n)
	}
	after := heap()
	t.Logf("heap: %d before, %d with %d more series, %d after Retain", h0, grown, n, after)
	if after > h0+(grown-h0)/10 {
		t.Errorf("heap %d → %d with the series → %d after Retain; want it back within a tenth of the growth", h0, grown, after)
	}
	fams := parse(t, r.AppendText(nil))
	if c := fams["t_calls_total"].Metric; len(c) != 1 || labels(c[0])["tool"] != "keep" || c[0].GetCounter().GetValue() != 1 {
		t.Errorf("t_calls_total after Retain: %v; want the one kept series, at 1", c)
	}
	if h := fams["t_seconds"].Metric; len(h) != 1 || labels(h[0])["tool"] != "keep" {
		t.Errorf("t_seconds after Retain: %v; want the one kept series", h)
	}
	cv.WithLabelValues("gone_7", "ok").Inc()
	fams = parse(t, r.AppendText(nil))
	for _, m := range fams["t_calls_total"].Metric {
		if labels(m)["tool"] == "gone_7" && m.GetCounter().GetValue() != 1 {
			t.Errorf("gone_7 used again after Retain: %v; want it from zero", m.GetCounter().GetValue())
		}
	}
	if cv.Retain(func([]string) bool { return false }) != 2 || len(parse(t, r.AppendText(nil))["t_calls_total"].GetMetric()) != 0 {
		t.Error("Retain of nothing left series behind")
	}

	// Values that hash alike (hashValues): dropping one keeps the other.
	a, b := []string{"x\xff", "y"}, []string{"x", "\xffy"}
	if hashValues(a) != hashValues(b) {
		t.Fatal("the test's values no longer hash alike; pick others")
	}
	cv.WithLabelValues(a...).Add(2)
	cv.WithLabelValues(b...).Add(3)
	cv.Retain(func(v []string) bool { return v[0] == "x" })
	if got := cv.WithLabelValues(b...).Value(); got != 3 {
		t.Errorf("the series kept beside one that hashes alike reads %v; want 3", got)
	}
	if got := cv.WithLabelValues(a...).Value(); got != 0 {
		t.Errorf("the dropped series reads %v; want it from zero", got)
	}
}

package metrics

import (
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"mime"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// parse reads text with client_golang's own parser, failing the test on any
// syntax it rejects.
func parse(t *testing.T, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("expfmt cannot parse our text: %v\n%s", err, text)
	}
	return fams
}

// labels is a sample's labels as a map.
func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// TestTextParses: every kind of family, with label values and HELP texts
// that need escaping, is read back by expfmt with the same values.
func TestTextParses(t *testing.T) {
	r := NewRegistry()
	c := NewCounter("test_counter_total", "A counter; its help has a backslash \\ and a\nnewline.")
	c.Inc()
	c.Add(1.5)
	g := NewGauge("test_gauge", "A gauge.")
	g.Set(-3.25)
	cv := NewCounterVec("test_requests_total", "By path and code.", "path", "code")
	odd := "quote \" backslash \\ newline \n tab \t é ✓"
	cv.WithLabelValues(odd, "200").Inc()
	cv.WithLabelValues("/b", "404").Add(2)
	hv := NewHistogramVec("test_seconds", "Latency.", []float64{0.1, 1, 10}, "route")
	hv.WithLabelValues("/x").Observe(0.05)
	hv.WithLabelValues("/x").Observe(1)
	hv.WithLabelValues("/x").Observe(100)
	gf := NewGaugeFunc("test_func", "From a function.", func() float64 { return 42 })
	cf := NewCounterFunc("test_func_total", "From a function, counted.", func() float64 { return 7 })
	for _, col := range []Collector{c, g, cv, hv, gf, cf, NewGoCollector(), NewProcessCollector()} {
		if err := r.Register(col); err != nil {
			t.Fatal(err)
		}
	}
	text := r.AppendText(nil)
	fams := parse(t, text)

	if f := fams["test_counter_total"]; f.GetType() != dto.MetricType_COUNTER || f.GetHelp() != "A counter; its help has a backslash \\ and a\nnewline." ||
		f.Metric[0].GetCounter().GetValue() != 2.5 {
		t.Errorf("counter read back as %v", f)
	}
	if f := fams["test_gauge"]; f.GetType() != dto.MetricType_GAUGE || f.Metric[0].GetGauge().GetValue() != -3.25 {
		t.Errorf("gauge read back as %v", f)
	}
	got := map[string]float64{}
	for _, m := range fams["test_requests_total"].Metric {
		l := labels(m)
		got[l["path"]+"|"+l["code"]] = m.GetCounter().GetValue()
	}
	if got[odd+"|200"] != 1 || got["/b|404"] != 2 || len(got) != 2 {
		t.Errorf("label values read back as %v", got)
	}
	h := fams["test_seconds"].Metric[0].GetHistogram()
	wantCum := map[float64]uint64{0.1: 1, 1: 2, 10: 2, math.Inf(1): 3}
	for _, b := range h.Bucket {
		if want, ok := wantCum[b.GetUpperBound()]; !ok || b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
		delete(wantCum, b.GetUpperBound())
	}
	if len(wantCum) != 0 {
		t.Errorf("buckets missing: %v", wantCum)
	}
	if h.GetSampleCount() != 3 || h.GetSampleSum() != 101.05 {
		t.Errorf("histogram count %d sum %v, want 3 and 101.05", h.GetSampleCount(), h.GetSampleSum())
	}
	if fams["test_func"].Metric[0].GetGauge().GetValue() != 42 || fams["test_func_total"].GetType() != dto.MetricType_COUNTER {
		t.Errorf("function metrics read back as %v %v", fams["test_func"], fams["test_func_total"])
	}
	for _, name := range []string{"go_goroutines", "go_gc_duration_seconds", "go_memstats_heap_inuse_bytes", "process_resident_memory_bytes", "process_open_fds"} {
		if fams[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
	if v := fams["process_resident_memory_bytes"].Metric[0].GetGauge().GetValue(); v <= 0 {
		t.Errorf("process_resident_memory_bytes %v", v)
	}
	// The escapes themselves, as the format writes them.
	for _, want := range []string{
		`# HELP test_counter_total A counter; its help has a backslash \\ and a\nnewline.`,
		`test_requests_total{code="200",path="quote \" backslash \\ newline \n tab ` + "\t" + ` é ✓"} 1`,
		`test_seconds_bucket{route="/x",le="+Inf"} 3`,
	} {
		if !bytes.Contains(text, []byte(want+"\n")) {
			t.Errorf("text lacks the line %q", want)
		}
	}
}

// TestHistogramConsistent: under concurrent observations and scrapes, every
// scrape's buckets are cumulative and its +Inf bucket equals its count, and
// a value on a bound counts in that bucket (le is inclusive).
func TestHistogramConsistent(t *testing.T) {
	r := NewRegistry()
	hv := NewHistogramVec("h_seconds", "H.", ExponentialBuckets(0.001, 10, 4), "k")
	if err := r.Register(hv); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	const workers, per = 4, 2000
	for w := range workers {
		wg.Go(func() {
			h := hv.WithLabelValues("a")
			for i := range per {
				h.Observe(float64((w+i)%5) * 0.01)
			}
		})
	}
	done := make(chan struct{})
	var scrapes int
	go func() {
		defer close(done)
		for {
			select {
			case <-done:
				return
			default:
			}
			fams := parse(t, r.AppendText(nil))
			if f := fams["h_seconds"]; f != nil {
				checkHistogram(t, f.Metric[0].GetHistogram())
			}
			scrapes++
			if scrapes > 50 {
				return
			}
		}
	}()
	wg.Wait()
	<-done
	fams := parse(t, r.AppendText(nil))
	h := fams["h_seconds"].Metric[0].GetHistogram()
	checkHistogram(t, h)
	if h.GetSampleCount() != workers*per {
		t.Errorf("count %d, want %d", h.GetSampleCount(), workers*per)
	}

	one := NewHistogramVec("b_seconds", "B.", []float64{1, 2}, "k")
	var wantSum float64
	for _, v := range []float64{1, 2, 2.0000001} {
		one.WithLabelValues("x").Observe(v)
		wantSum += v
	}
	cum, sum := one.WithLabelValues("x").snapshot()
	if want := []uint64{1, 2, 3}; !equalU(cum, want) || sum != wantSum {
		t.Errorf("bounds: cumulative %v sum %v, want %v and %v", cum, sum, want, wantSum)
	}
}

func equalU(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func checkHistogram(t *testing.T, h *dto.Histogram) {
	t.Helper()
	var prev uint64
	for _, b := range h.Bucket {
		if b.GetCumulativeCount() < prev {
			t.Fatalf("buckets not cumulative: %v", h)
		}
		prev = b.GetCumulativeCount()
	}
	last := h.Bucket[len(h.Bucket)-1]
	if !math.IsInf(last.GetUpperBound(), 1) || last.GetCumulativeCount() != h.GetSampleCount() {
		t.Fatalf("the +Inf bucket is not the count: %v", h)
	}
}

// TestConcurrentIncrements: increments from many goroutines, on shared and
// on separate series, all count, under -race.
func TestConcurrentIncrements(t *testing.T) {
	cv := NewCounterVec("c_total", "C.", "worker", "kind")
	g := NewGauge("g", "G.")
	c := NewCounter("plain_total", "P.")
	var wg sync.WaitGroup
	const workers, per = 8, 5000
	for w := range workers {
		wg.Go(func() {
			name := string(rune('a' + w))
			for range per {
				cv.WithLabelValues("shared", "x").Inc()
				cv.WithLabelValues(name, "y").Inc()
				g.Inc()
				c.Inc()
				c.Add(0.5)
				g.Dec()
			}
		})
	}
	wg.Wait()
	if v := cv.WithLabelValues("shared", "x").Value(); v != workers*per {
		t.Errorf("shared series %v, want %d", v, workers*per)
	}
	for w := range workers {
		if v := cv.WithLabelValues(string(rune('a'+w)), "y").Value(); v != per {
			t.Errorf("series %c: %v, want %d", 'a'+w, v, per)
		}
	}
	if g.Value() != 0 || c.Value() != 1.5*workers*per {
		t.Errorf("gauge %v (want 0), counter %v (want %v)", g.Value(), c.Value(), 1.5*workers*per)
	}
}

// TestVecNoAllocation: a series that exists is found without allocating,
// which the daemon's per-request and per-call counting relies on.
func TestVecNoAllocation(t *testing.T) {
	cv := NewCounterVec("c_total", "C.", "route", "code")
	hv := NewHistogramVec("h_seconds", "H.", ExponentialBuckets(0.0001, 4, 10), "route")
	cv.WithLabelValues("/mcp", "200").Inc()
	hv.WithLabelValues("/mcp").Observe(1)
	route, code := "/mcp", "200"
	if n := testing.AllocsPerRun(100, func() {
		cv.WithLabelValues(route, code).Inc()
		hv.WithLabelValues(route).Observe(0.001)
	}); n != 0 {
		t.Errorf("%v allocations per call on existing series", n)
	}
}

// TestRegistry: a duplicate family name is refused naming it, Unregister
// frees the name, and a vector with no series writes nothing.
func TestRegistry(t *testing.T) {
	r := NewRegistry()
	a := NewGaugeFunc("x", "X.", func() float64 { return 1 })
	if err := r.Register(a); err != nil {
		t.Fatal(err)
	}
	err := r.Register(NewCounter("x", "Another X."))
	if err == nil || !strings.Contains(err.Error(), "x is registered already") {
		t.Fatalf("duplicate: %v", err)
	}
	if !r.Unregister(a) || r.Unregister(a) {
		t.Fatal("Unregister: want true once, then false")
	}
	if err := r.Register(NewCounter("x", "Another X.")); err != nil {
		t.Fatalf("after Unregister: %v", err)
	}
	if err := r.Register(NewCounterVec("empty_total", "No series.", "k")); err != nil {
		t.Fatal(err)
	}
	if text := string(r.AppendText(nil)); strings.Contains(text, "empty_total") {
		t.Errorf("a vector without series is written:\n%s", text)
	}
	for _, bad := range []func(){
		func() { NewCounter("0bad", "") },
		func() { NewCounterVec("ok", "", "le") },
		func() { NewCounterVec("ok", "", "a-b") },
		func() { NewHistogramVec("ok", "", []float64{2, 1}) },
		func() { NewCounterVec("ok", "", "a").WithLabelValues("x", "y") },
		func() { NewCounter("ok", "").Add(-1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("a program error did not panic")
				}
			}()
			bad()
		}()
	}
}

// TestHandler: the content type, gzip when asked for, the handler's own
// error counter, and text that expfmt reads.
func TestHandler(t *testing.T) {
	r := NewRegistry()
	h, err := Handler(r)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, gz := range []bool{false, true} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		if gz {
			req.Header.Set("Accept-Encoding", "gzip")
		} else {
			req.Header.Set("Accept-Encoding", "identity")
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body := io.Reader(resp.Body)
		if gz {
			if resp.Header.Get("Content-Encoding") != "gzip" {
				t.Fatalf("Accept-Encoding gzip: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
			}
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ct := resp.Header.Get("Content-Type"); ct != ContentType {
			t.Errorf("Content-Type %q", ct)
		}
		fams := parse(t, b)
		if f := fams["promhttp_metric_handler_errors_total"]; f == nil || len(f.Metric) != 2 {
			t.Errorf("promhttp_metric_handler_errors_total: %v", f)
		}
	}
	for header, want := range map[string]bool{"gzip": true, "deflate, gzip;q=0.5": true, "gzip;q=0": false, "*": true, "br": false, "": false,
		"*;q=0, gzip": true, "gzip;Q=0": false, "gzip;q=0, *": false, "x-gzip": true, "GZIP ; q = 0.1": true} {
		if acceptsGzip(header) != want {
			t.Errorf("acceptsGzip(%q) = %v", header, !want)
		}
	}
}

// register builds the same families in client_golang's registry and ours,
// and runs the same operations on both.
func bothRegistries(t *testing.T) (theirs *prometheus.Registry, ours *Registry) {
	theirs, ours = prometheus.NewRegistry(), NewRegistry()
	pc := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "t_calls_total", Help: "Calls, by tool and outcome \\ \n."}, []string{"tool", "outcome"})
	ph := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "t_seconds", Help: "Latency.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"route"})
	ph2 := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "t2_seconds", Help: "Latency 2.",
		Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300}}, []string{"tool"})
	pg := prometheus.NewGauge(prometheus.GaugeOpts{Name: "t_in_flight", Help: "In flight."})
	pf := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "t_open", Help: "Open."}, func() float64 { return 3 })
	pcf := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "t_dropped_total", Help: "Dropped."}, func() float64 { return 1e9 })
	theirs.MustRegister(pc, ph, ph2, pg, pf, pcf)

	oc := NewCounterVec("t_calls_total", "Calls, by tool and outcome \\ \n.", "tool", "outcome")
	oh := NewHistogramVec("t_seconds", "Latency.", ExponentialBuckets(0.0001, 4, 10), "route")
	oh2 := NewHistogramVec("t2_seconds", "Latency 2.", []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300}, "tool")
	og := NewGauge("t_in_flight", "In flight.")
	of := NewGaugeFunc("t_open", "Open.", func() float64 { return 3 })
	ocf := NewCounterFunc("t_dropped_total", "Dropped.", func() float64 { return 1e9 })
	for _, c := range []Collector{oc, oh, oh2, og, of, ocf} {
		if err := ours.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	for i, op := range []struct{ tool, outcome, route string }{
		{"read_text_file", "ok", "/mcp"}, {"exec", "error", "/mcp"}, {"_unknown", "unknown", "other"},
		{"a\"b\\c\nd", "ok", "/tools"}, {"read_text_file", "ok", "/mcp"}, {"Z", "timeout", "/execute"},
	} {
		v := []float64{0.00005, 0.0001, 0.0004, 0.3, 7, 1e6}[i]
		pc.WithLabelValues(op.tool, op.outcome).Inc()
		oc.WithLabelValues(op.tool, op.outcome).Inc()
		ph.WithLabelValues(op.route).Observe(v)
		oh.WithLabelValues(op.route).Observe(v)
		ph2.WithLabelValues(op.tool).Observe(v)
		oh2.WithLabelValues(op.tool).Observe(v)
		pg.Inc()
		og.Inc()
	}
	pg.Dec()
	og.Dec()
	return theirs, ours
}

// TestSameTextAsClientGolang: the same families and operations give the
// same bytes as client_golang's registry through promhttp, and the Go and
// process collectors write the same families with the same HELP, TYPE and
// label names (their values are the moment's).
func TestSameTextAsClientGolang(t *testing.T) {
	theirs, ours := bothRegistries(t)
	h := promhttp.HandlerFor(theirs, promhttp.HandlerOpts{})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	h.ServeHTTP(rec, req)
	if got, want := string(ours.AppendText(nil)), rec.Body.String(); got != want {
		t.Errorf("text differs from client_golang's\nours:\n%s\ntheirs:\n%s", got, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != ContentType {
		t.Errorf("client_golang's Content-Type is %q, ours %q", ct, ContentType)
	}

	pr := prometheus.NewRegistry()
	pr.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	or := NewRegistry()
	if err := or.Register(NewGoCollector()); err != nil {
		t.Fatal(err)
	}
	if err := or.Register(NewProcessCollector()); err != nil {
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	promhttp.HandlerFor(pr, promhttp.HandlerOpts{}).ServeHTTP(rec, req)
	if got, want := shape(or.AppendText(nil)), shape(rec.Body.Bytes()); got != want {
		t.Errorf("Go and process collectors differ\nours:\n%s\ntheirs:\n%s", got, want)
	}
}

// shape is a scrape without its values: every line with the sample's value
// cut off, and go_info's version kept (it is a label).
func shape(text []byte) string {
	return regexp.MustCompile(`(?m)^([^#].*) \S+$`).ReplaceAllString(string(text), "$1")
}

func BenchmarkCounterVecInc(b *testing.B) {
	b.Run("client_golang", func(b *testing.B) {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "C."}, []string{"route", "code"})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.WithLabelValues("/mcp", "200").Inc()
			}
		})
	})
	b.Run("metrics", func(b *testing.B) {
		c := NewCounterVec("c_total", "C.", "route", "code")
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.WithLabelValues("/mcp", "200").Inc()
			}
		})
	})
}

func BenchmarkHistogramVecObserve(b *testing.B) {
	b.Run("client_golang", func(b *testing.B) {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h_seconds", Help: "H.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"route"})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				h.WithLabelValues("/mcp").Observe(0.0003)
			}
		})
	})
	b.Run("metrics", func(b *testing.B) {
		h := NewHistogramVec("h_seconds", "H.", ExponentialBuckets(0.0001, 4, 10), "route")
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				h.WithLabelValues("/mcp").Observe(0.0003)
			}
		})
	})
}

func BenchmarkGaugeIncDec(b *testing.B) {
	b.Run("client_golang", func(b *testing.B) {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "G."})
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				g.Inc()
				g.Dec()
			}
		})
	})
	b.Run("metrics", func(b *testing.B) {
		g := NewGauge("g", "G.")
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				g.Inc()
				g.Dec()
			}
		})
	})
}

// FuzzAcceptsGzip: /metrics is compressed exactly when the Accept-Encoding
// codings, each read by mime.ParseMediaType (its q parameter in any case),
// accept gzip as RFC 9110 12.5.3 has it: gzip or x-gzip listed with q > 0,
// else * listed with q > 0. Lists with a coding it cannot read are left out.
func FuzzAcceptsGzip(f *testing.F) {
	for _, h := range []string{"gzip", "deflate, gzip;q=0.5", "gzip;q=0", "*", "br", "", "*;q=0, gzip", "gzip;Q=0", "gzip;q=0, *", "x-gzip", "gzip;q=abc", "identity, *;q=0"} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, h string) {
		gzipQ, anyQ := -1.0, -1.0
		for part := range strings.SplitSeq(h, ",") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			coding, params, err := mime.ParseMediaType(part)
			if err != nil {
				return
			}
			q := 1.0
			if v, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					q = f
				}
			}
			switch coding {
			case "gzip", "x-gzip":
				gzipQ = max(gzipQ, q)
			case "*":
				anyQ = max(anyQ, q)
			}
		}
		want := anyQ > 0
		if gzipQ >= 0 {
			want = gzipQ > 0
		}
		if got := acceptsGzip(h); got != want {
			t.Fatalf("acceptsGzip(%q) = %v; the codings say %v", h, got, want)
		}
	})
}

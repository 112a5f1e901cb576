package metrics

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"unicode/utf8"
)

// TestAttackLabelValueNotUTF8: a label value that is not UTF-8 (a byte
// 0xff, a sequence cut short, a surrogate's encoding) cannot make the
// exposition unreadable: the text stays UTF-8 (a run of bad bytes is
// written as one U+FFFD, as strings.ToValidUTF8 writes it) and expfmt,
// which refuses a scrape with a label value that is not UTF-8, reads every
// family back, with the quote, backslash and newline escapes around the
// bad bytes intact. Every label value the daemon sets today is a route,
// a status code, a served tool's name or a fixed word; this holds the
// exposition for whatever a later one takes from a client.
func TestAttackLabelValueNotUTF8(t *testing.T) {
	r := NewRegistry()
	cv := NewCounterVec("t_requests_total", "By path.", "path", "code")
	hv := NewHistogramVec("t_seconds", "Latency.", []float64{1}, "path")
	for _, c := range []Collector{cv, hv} {
		if err := r.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string]string{
		"a\xffb":              "a\uFFFDb",
		"\xc3":                "\uFFFD",
		"\xed\xa0\x80x":       "\uFFFDx",
		"q\"\xff\\\n\xfe\xfd": "q\"\uFFFD\\\n\uFFFD",
		"ok é":                "ok é",
	}
	for in := range cases {
		cv.WithLabelValues(in, "200").Inc()
		hv.WithLabelValues(in).Observe(0.5)
	}
	text := r.AppendText(nil)
	if !utf8.Valid(text) {
		t.Fatalf("the exposition is not UTF-8:\n%q", text)
	}
	fams := parse(t, text)
	got := map[string]bool{}
	for _, m := range fams["t_requests_total"].Metric {
		got[labels(m)["path"]] = true
	}
	for in, want := range cases {
		if !got[want] {
			t.Errorf("%q: not read back as %q (read %v)", in, want, got)
		}
	}
	if n := len(fams["t_seconds"].Metric); n != len(cases) {
		t.Errorf("%d histogram series read back, want %d", n, len(cases))
	}
}

// TestAttackLabelValuesHashAlike: values whose bytes hash alike (a 0xff
// byte is also the separator hashValues puts after each value) stay two
// series: a series is found by its values compared whole, never by the
// hash alone.
func TestAttackLabelValuesHashAlike(t *testing.T) {
	a, b := []string{"x\xff", "y"}, []string{"x", "\xffy"}
	if hashValues(a) != hashValues(b) {
		t.Fatal("the two value lists were meant to hash alike")
	}
	cv := NewCounterVec("t_total", "T.", "l1", "l2")
	cv.WithLabelValues(a...).Inc()
	cv.WithLabelValues(b...).Add(2)
	if va, vb := cv.WithLabelValues(a...).Value(), cv.WithLabelValues(b...).Value(); va != 1 || vb != 2 {
		t.Errorf("series of values that hash alike: %v and %v, want 1 and 2", va, vb)
	}
}

// TestAttackConcurrentSeriesAndScrapes: series made while others scrape
// (the race detector watches) are each written once, whole, and every
// scrape parses.
func TestAttackConcurrentSeriesAndScrapes(t *testing.T) {
	r := NewRegistry()
	cv := NewCounterVec("t_total", "T.", "worker", "n")
	hv := NewHistogramVec("t_seconds", "T.", []float64{0.5, 1}, "worker")
	for _, c := range []Collector{cv, hv} {
		if err := r.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	const workers, per = 4, 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	scrapes := make(chan []byte, 1024)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			select {
			case scrapes <- r.AppendText(nil):
			default:
			}
		}
	})
	var makers sync.WaitGroup
	for w := range workers {
		makers.Go(func() {
			for i := range per {
				cv.WithLabelValues(fmt.Sprint(w), fmt.Sprint(i)).Inc()
				hv.WithLabelValues(fmt.Sprint(w)).Observe(float64(i % 3))
			}
		})
	}
	makers.Wait()
	close(stop)
	wg.Wait()
	close(scrapes)
	for text := range scrapes {
		parse(t, text)
	}
	text := r.AppendText(nil)
	fams := parse(t, text)
	if n := len(fams["t_total"].Metric); n != workers*per {
		t.Errorf("%d series, want %d", n, workers*per)
	}
	if n := bytes.Count(text, []byte(`t_total{n="7",worker="3"} 1`+"\n")); n != 1 {
		t.Errorf("a series written %d times, want once", n)
	}
	for _, m := range fams["t_seconds"].Metric {
		if h := m.GetHistogram(); h.GetSampleCount() != per {
			t.Errorf("worker %s: %d observations, want %d", labels(m)["worker"], h.GetSampleCount(), per)
		}
	}
}

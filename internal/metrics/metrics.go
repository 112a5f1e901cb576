// Package metrics is the daemon's /metrics: counters, gauges, histograms
// and their label vectors, the Go runtime's and the process's own figures,
// written in the Prometheus text exposition format 0.0.4.
//
// It holds exactly what the daemon exposes, the names, HELP texts, labels,
// buckets and order that prometheus/client_golang's registry and promhttp
// handler wrote for the same metrics, without linking that library (and
// protobuf, expvar and procfs with it): those cost 2.56 MiB of resident
// memory at ready (docs/performance.md, "RSS at ready"). The hot path is
// atomics: an increment or an observation takes no lock and, for a label
// vector's existing series, allocates nothing.
package metrics

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Collector is one or more metric families a Registry writes. The
// implementations are this package's: a Counter, Gauge, vector, function
// or the runtime and process collectors.
type Collector interface {
	// names are the families it writes, for the registry's duplicate check.
	names() []string
	// collect appends its families with at least one sample to dst.
	collect(dst []family) []family
}

// family is one metric family's exposition: its name (the sort key) and its
// text, HELP and TYPE lines included.
type family struct {
	name string
	text []byte
}

// Registry holds the collectors /metrics writes. Its methods are safe for
// concurrent use.
type Registry struct {
	mu    sync.Mutex
	cs    []Collector
	names map[string]Collector
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{names: map[string]Collector{}} }

// Register adds c. A family name another collector already writes is an
// error naming it; c is then not added.
func (r *Registry) Register(c Collector) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ns := c.names()
	for _, n := range ns {
		if _, dup := r.names[n]; dup {
			return fmt.Errorf("metrics: %s is registered already", n)
		}
	}
	for _, n := range ns {
		r.names[n] = c
	}
	r.cs = append(r.cs, c)
	return nil
}

// Unregister removes c, and reports whether it was registered.
func (r *Registry) Unregister(c Collector) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.Index(r.cs, c)
	if i < 0 {
		return false
	}
	r.cs = slices.Delete(r.cs, i, i+1)
	for _, n := range c.names() {
		delete(r.names, n)
	}
	return true
}

// AppendText appends every registered family with at least one sample to b
// in the text format, families sorted by name (as client_golang's Gather
// sorts them).
func (r *Registry) AppendText(b []byte) []byte {
	r.mu.Lock()
	cs := slices.Clone(r.cs)
	r.mu.Unlock()
	var fs []family
	for _, c := range cs {
		fs = c.collect(fs)
	}
	slices.SortFunc(fs, func(a, b family) int { return strings.Compare(a.name, b.name) })
	for _, f := range fs {
		b = append(b, f.text...)
	}
	return b
}

// desc is a family's name, HELP text and label names.
type desc struct {
	name, help string
	labels     []string
}

func newDesc(name, help string, labels []string) desc {
	if !validName(name) {
		panic("metrics: invalid metric name " + strconv.Quote(name))
	}
	for _, l := range labels {
		if !validName(l) || strings.Contains(l, ":") || l == "le" || l == "quantile" {
			panic("metrics: invalid label name " + strconv.Quote(l))
		}
	}
	return desc{name: name, help: help, labels: slices.Clone(labels)}
}

// validName is the text format's metric name rule, [a-zA-Z_:][a-zA-Z0-9_:]*.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range []byte(s) {
		ok := c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9'
		if !ok {
			return false
		}
	}
	return true
}

// header appends the family's HELP and TYPE lines.
func (d *desc) header(b []byte, typ string) []byte {
	b = append(b, "# HELP "...)
	b = append(b, d.name...)
	b = append(b, ' ')
	b = appendEscaped(b, d.help, false)
	b = append(b, "\n# TYPE "...)
	b = append(b, d.name...)
	b = append(b, ' ')
	b = append(b, typ...)
	return append(b, '\n')
}

// appendEscaped appends s with the text format's escapes: backslash and
// newline always, the double quote inside a label value. A run of bytes
// that is not UTF-8 is written as one U+FFFD (as strings.ToValidUTF8
// writes it): the format is UTF-8, and a scraper refuses the whole scrape
// for one label value that is not (client_golang refused such a value in
// WithLabelValues, with a panic; TestAttackLabelValueNotUTF8).
func appendEscaped(b []byte, s string, quote bool) []byte {
	bad := false // the byte before was part of a run not UTF-8
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				if !bad {
					b = append(b, "\uFFFD"...)
				}
				bad = true
			} else {
				b = append(b, s[i:i+n]...)
				bad = false
			}
			i += n
			continue
		}
		bad = false
		switch {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
		i++
	}
	return b
}

// appendFloat writes f as client_golang's text encoder does (strconv's
// shortest 'g' form, +Inf, -Inf, NaN).
func appendFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// appendSample appends one sample line: name+suffix, the labels (names and
// values in the family's sorted label order), an extra label (le, quantile)
// when extraName is not empty, and the value.
func appendSample(b []byte, name, suffix string, names, values []string, extraName string, extra float64, v float64) []byte {
	b = append(b, name...)
	b = append(b, suffix...)
	if len(names) > 0 || extraName != "" {
		b = append(b, '{')
		for i, n := range names {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, n...)
			b = append(b, `="`...)
			b = appendEscaped(b, values[i], true)
			b = append(b, '"')
		}
		if extraName != "" {
			if len(names) > 0 {
				b = append(b, ',')
			}
			b = append(b, extraName...)
			b = append(b, `="`...)
			b = appendFloat(b, extra)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = appendFloat(b, v)
	return append(b, '\n')
}

// floatBits is a float64 updated with atomics (compare-and-swap for Add).
type floatBits struct{ bits atomic.Uint64 }

func (f *floatBits) load() float64 { return math.Float64frombits(f.bits.Load()) }
func (f *floatBits) store(v float64) {
	f.bits.Store(math.Float64bits(v))
}
func (f *floatBits) add(v float64) {
	for {
		old := f.bits.Load()
		if f.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Counter is a value that only goes up.
type Counter struct {
	desc
	n    atomic.Uint64 // Inc's, kept apart from Add's float so Inc is one atomic add
	frac floatBits
}

// NewCounter returns a counter without labels. It panics on an invalid
// name, as a program error.
func NewCounter(name, help string) *Counter {
	return &Counter{desc: newDesc(name, help, nil)}
}

// Inc adds 1.
func (c *Counter) Inc() { c.n.Add(1) }

// Add adds v, which must not be negative (a counter never goes down).
func (c *Counter) Add(v float64) {
	if v < 0 {
		panic("metrics: a counter cannot decrease")
	}
	c.frac.add(v)
}

// Value is the counter's value now.
func (c *Counter) Value() float64 { return float64(c.n.Load()) + c.frac.load() }

func (c *Counter) names() []string { return []string{c.name} }
func (c *Counter) collect(dst []family) []family {
	b := c.header(nil, "counter")
	return append(dst, family{c.name, appendSample(b, c.name, "", nil, nil, "", 0, c.Value())})
}

// Gauge is a value that goes up and down.
type Gauge struct {
	desc
	v floatBits
}

// NewGauge returns a gauge without labels.
func NewGauge(name, help string) *Gauge { return &Gauge{desc: newDesc(name, help, nil)} }

// Inc adds 1.
func (g *Gauge) Inc() { g.v.add(1) }

// Dec subtracts 1.
func (g *Gauge) Dec() { g.v.add(-1) }

// Add adds v (which may be negative).
func (g *Gauge) Add(v float64) { g.v.add(v) }

// Set sets the value.
func (g *Gauge) Set(v float64) { g.v.store(v) }

// Value is the gauge's value now.
func (g *Gauge) Value() float64 { return g.v.load() }

func (g *Gauge) names() []string { return []string{g.name} }
func (g *Gauge) collect(dst []family) []family {
	b := g.header(nil, "gauge")
	return append(dst, family{g.name, appendSample(b, g.name, "", nil, nil, "", 0, g.Value())})
}

// funcMetric is a gauge or counter whose value a function gives at each
// scrape.
type funcMetric struct {
	desc
	typ string
	fn  func() float64
}

// NewGaugeFunc returns a gauge whose value is fn's at each scrape; fn must
// be safe for concurrent use.
func NewGaugeFunc(name, help string, fn func() float64) Collector {
	return &funcMetric{desc: newDesc(name, help, nil), typ: "gauge", fn: fn}
}

// NewCounterFunc returns a counter whose value is fn's at each scrape; fn
// must be safe for concurrent use and never go down.
func NewCounterFunc(name, help string, fn func() float64) Collector {
	return &funcMetric{desc: newDesc(name, help, nil), typ: "counter", fn: fn}
}

func (f *funcMetric) names() []string { return []string{f.name} }
func (f *funcMetric) collect(dst []family) []family {
	b := f.header(nil, f.typ)
	return append(dst, family{f.name, appendSample(b, f.name, "", nil, nil, "", 0, f.fn())})
}

// Histogram counts observations in buckets, with their sum.
type Histogram struct {
	upper  []float64       // the buckets' upper bounds, ascending, +Inf not included
	counts []atomic.Uint64 // per bucket, not cumulative; the last is above every bound
	sum    floatBits
}

func newHistogram(upper []float64) *Histogram {
	return &Histogram{upper: upper, counts: make([]atomic.Uint64, len(upper)+1)}
}

// Observe counts v in the first bucket whose upper bound is at least v.
func (h *Histogram) Observe(v float64) {
	i := 0
	// A linear search: the daemon's histograms have 10 and 12 buckets,
	// where it beats a binary search (client_golang does the same below 35).
	for i < len(h.upper) && v > h.upper[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.add(v)
}

// snapshot returns the cumulative bucket counts and the sum. The count is
// the last cumulative count, so _count and the +Inf bucket always agree.
func (h *Histogram) snapshot() (cum []uint64, sum float64) {
	cum = make([]uint64, len(h.counts))
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
		cum[i] = n
	}
	return cum, h.sum.load()
}

// checkBuckets panics unless the bounds are finite and strictly ascending.
func checkBuckets(upper []float64) []float64 {
	if len(upper) == 0 {
		panic("metrics: a histogram needs buckets")
	}
	for i, u := range upper {
		if math.IsNaN(u) || math.IsInf(u, 0) || i > 0 && u <= upper[i-1] {
			panic(fmt.Sprintf("metrics: histogram buckets must be finite and ascending: %v", upper))
		}
	}
	return slices.Clone(upper)
}

// ExponentialBuckets returns n bounds, the first start and each factor
// times the one before (computed as client_golang's function of the same
// name computes them, so the le labels are the same).
func ExponentialBuckets(start, factor float64, n int) []float64 {
	if n < 1 || start <= 0 || factor <= 1 {
		panic("metrics: ExponentialBuckets needs n ≥ 1, start > 0 and factor > 1")
	}
	b := make([]float64, n)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}

// vec is the series of a family with labels, found by their values without
// allocating once a series exists.
type vec[T any] struct {
	desc
	order  []int // order[i]: the index in labels of the i-th label by name
	sorted []string
	mk     func() *T

	mu     sync.RWMutex
	series map[uint64][]*child[T]
	count  atomic.Int64
}

type child[T any] struct {
	values []string
	m      *T
}

func newVec[T any](d desc, mk func() *T) *vec[T] {
	v := &vec[T]{desc: d, mk: mk, series: map[uint64][]*child[T]{}}
	v.order = make([]int, len(d.labels))
	for i := range v.order {
		v.order[i] = i
	}
	slices.SortFunc(v.order, func(a, b int) int { return strings.Compare(d.labels[a], d.labels[b]) })
	for _, i := range v.order {
		v.sorted = append(v.sorted, d.labels[i])
	}
	return v
}

// hashValues is FNV-1a over the values, each followed by a 0xff byte (which
// no UTF-8 text holds), so ("a","bc") and ("ab","c") differ. Values that
// are not UTF-8 may hash alike ("x\xff","y" and "x","\xffy"): with finds a
// series by its values compared whole, never by the hash alone.
func hashValues(values []string) uint64 {
	h := uint64(14695981039346656037)
	for _, v := range values {
		for i := 0; i < len(v); i++ {
			h ^= uint64(v[i])
			h *= 1099511628211
		}
		h ^= 0xff
		h *= 1099511628211
	}
	return h
}

// with returns the series of values, made on first use. A wrong number of
// values is a program error and panics, as client_golang's does.
func (v *vec[T]) with(values []string) *T {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("metrics: %s takes %d label values, got %d", v.name, len(v.labels), len(values)))
	}
	h := hashValues(values)
	v.mu.RLock()
	for _, c := range v.series[h] {
		if slices.Equal(c.values, values) {
			v.mu.RUnlock()
			return c.m
		}
	}
	v.mu.RUnlock()
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, c := range v.series[h] {
		if slices.Equal(c.values, values) {
			return c.m
		}
	}
	c := &child[T]{values: slices.Clone(values), m: v.mk()}
	v.series[h] = append(v.series[h], c)
	v.count.Add(1)
	return c.m
}

// each calls fn for every series, sorted as client_golang sorts them: by
// the label values, taken in the order of the sorted label names.
func (v *vec[T]) each(fn func(sortedValues []string, m *T)) {
	v.mu.RLock()
	type row struct {
		values []string
		m      *T
	}
	rows := make([]row, 0, v.count.Load())
	for _, cs := range v.series {
		for _, c := range cs {
			sv := make([]string, len(v.order))
			for i, j := range v.order {
				sv[i] = c.values[j]
			}
			rows = append(rows, row{sv, c.m})
		}
	}
	v.mu.RUnlock()
	slices.SortFunc(rows, func(a, b row) int { return slices.Compare(a.values, b.values) })
	for _, r := range rows {
		fn(r.values, r.m)
	}
}

// retain drops the series whose values keep refuses, and says how many.
func (v *vec[T]) retain(keep func(values []string) bool) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	dropped := 0
	for h, cs := range v.series {
		kept := cs[:0]
		for _, c := range cs {
			if keep(c.values) {
				kept = append(kept, c)
			} else {
				dropped++
			}
		}
		clear(cs[len(kept):])
		if len(kept) == 0 {
			delete(v.series, h)
		} else {
			v.series[h] = kept
		}
	}
	if dropped > 0 {
		// A Go map keeps its buckets when entries leave: a copy holds
		// only what is left.
		left := make(map[uint64][]*child[T], len(v.series))
		for h, cs := range v.series {
			left[h] = cs
		}
		v.series = left
	}
	v.count.Add(-int64(dropped))
	return dropped
}

func (v *vec[T]) names() []string { return []string{v.name} }

// CounterVec is a counter per combination of label values.
type CounterVec struct{ v *vec[Counter] }

// NewCounterVec returns a counter family with the given label names.
func NewCounterVec(name, help string, labels ...string) *CounterVec {
	d := newDesc(name, help, labels)
	return &CounterVec{newVec(d, func() *Counter { return &Counter{desc: d} })}
}

// WithLabelValues is the counter of these values, in the order of the label
// names given to NewCounterVec; it allocates only the first time.
func (c *CounterVec) WithLabelValues(values ...string) *Counter { return c.v.with(values) }

// Retain drops every series whose label values (in the order of the label
// names given to NewCounterVec) keep refuses, and says how many it dropped:
// a family whose label takes values that come and go (the tools served
// now) stays as large as what is current, not as all that ever was. A
// dropped series starts again from zero if its values are used again, as
// a counter of a restarted process does; a *Counter taken before Retain
// dropped its series is no longer exported.
func (c *CounterVec) Retain(keep func(values []string) bool) int { return c.v.retain(keep) }

func (c *CounterVec) names() []string { return c.v.names() }
func (c *CounterVec) collect(dst []family) []family {
	if c.v.count.Load() == 0 {
		return dst
	}
	b := c.v.header(nil, "counter")
	c.v.each(func(values []string, m *Counter) {
		b = appendSample(b, c.v.name, "", c.v.sorted, values, "", 0, m.Value())
	})
	return append(dst, family{c.v.name, b})
}

// HistogramVec is a histogram per combination of label values, all with
// the same buckets.
type HistogramVec struct{ v *vec[Histogram] }

// NewHistogramVec returns a histogram family with the given buckets (upper
// bounds, ascending; +Inf is implied) and label names.
func NewHistogramVec(name, help string, buckets []float64, labels ...string) *HistogramVec {
	upper := checkBuckets(buckets)
	return &HistogramVec{newVec(newDesc(name, help, labels), func() *Histogram { return newHistogram(upper) })}
}

// WithLabelValues is the histogram of these values; it allocates only the
// first time.
func (h *HistogramVec) WithLabelValues(values ...string) *Histogram { return h.v.with(values) }

// Retain drops every series whose label values keep refuses, as
// CounterVec.Retain does.
func (h *HistogramVec) Retain(keep func(values []string) bool) int { return h.v.retain(keep) }

func (h *HistogramVec) names() []string { return h.v.names() }
func (h *HistogramVec) collect(dst []family) []family {
	if h.v.count.Load() == 0 {
		return dst
	}
	b := h.v.header(nil, "histogram")
	name := h.v.name
	h.v.each(func(values []string, m *Histogram) {
		cum, sum := m.snapshot()
		for i, u := range m.upper {
			b = appendSample(b, name, "_bucket", h.v.sorted, values, "le", u, float64(cum[i]))
		}
		n := float64(cum[len(cum)-1])
		b = appendSample(b, name, "_bucket", h.v.sorted, values, "le", math.Inf(1), n)
		b = appendSample(b, name, "_sum", h.v.sorted, values, "", 0, sum)
		b = appendSample(b, name, "_count", h.v.sorted, values, "", 0, n)
	})
	return append(dst, family{name, b})
}

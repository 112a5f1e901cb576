package metrics

import (
	"runtime"
	"runtime/debug"
	rm "runtime/metrics"
	"sync"
	"time"
)

// The runtime/metrics samples the Go collector reads at each scrape, by
// index into goCollector.samples.
const (
	rmTinyAllocs = iota
	rmAllocsObjects
	rmFreesObjects
	rmAllocsBytes
	rmHeapObjects
	rmGoal
	rmTotal
	rmObjects
	rmUnused
	rmReleased
	rmFree
	rmStacks
	rmOSStacks
	rmMSpanInuse
	rmMSpanFree
	rmMCacheInuse
	rmMCacheFree
	rmBuckets
	rmMetaOther
	rmOther
	rmGOGC
	rmMemLimit
	rmGOMAXPROCS
	rmCount
)

var rmNames = [rmCount]string{
	rmTinyAllocs:    "/gc/heap/tiny/allocs:objects",
	rmAllocsObjects: "/gc/heap/allocs:objects",
	rmFreesObjects:  "/gc/heap/frees:objects",
	rmAllocsBytes:   "/gc/heap/allocs:bytes",
	rmHeapObjects:   "/gc/heap/objects:objects",
	rmGoal:          "/gc/heap/goal:bytes",
	rmTotal:         "/memory/classes/total:bytes",
	rmObjects:       "/memory/classes/heap/objects:bytes",
	rmUnused:        "/memory/classes/heap/unused:bytes",
	rmReleased:      "/memory/classes/heap/released:bytes",
	rmFree:          "/memory/classes/heap/free:bytes",
	rmStacks:        "/memory/classes/heap/stacks:bytes",
	rmOSStacks:      "/memory/classes/os-stacks:bytes",
	rmMSpanInuse:    "/memory/classes/metadata/mspan/inuse:bytes",
	rmMSpanFree:     "/memory/classes/metadata/mspan/free:bytes",
	rmMCacheInuse:   "/memory/classes/metadata/mcache/inuse:bytes",
	rmMCacheFree:    "/memory/classes/metadata/mcache/free:bytes",
	rmBuckets:       "/memory/classes/profiling/buckets:bytes",
	rmMetaOther:     "/memory/classes/metadata/other:bytes",
	rmOther:         "/memory/classes/other:bytes",
	rmGOGC:          "/gc/gogc:percent",
	rmMemLimit:      "/gc/gomemlimit:bytes",
	rmGOMAXPROCS:    "/sched/gomaxprocs:threads",
}

// goFigure is one family of the Go collector computed from the samples: the
// sum of the samples it names.
type goFigure struct {
	name, typ, help string
	sum             []int
}

// goFigures are client_golang's Go collector's families built from
// runtime/metrics (its go_memstats_* and its three default runtime
// metrics), with its HELP texts, in its formulas.
var goFigures = []goFigure{
	{"go_memstats_alloc_bytes", "gauge", "Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes.", []int{rmObjects}},
	{"go_memstats_alloc_bytes_total", "counter", "Total number of bytes allocated in heap until now, even if released already. Equals to /gc/heap/allocs:bytes.", []int{rmAllocsBytes}},
	{"go_memstats_sys_bytes", "gauge", "Number of bytes obtained from system. Equals to /memory/classes/total:byte.", []int{rmTotal}},
	{"go_memstats_mallocs_total", "counter", "Total number of heap objects allocated, both live and gc-ed. Semantically a counter version for go_memstats_heap_objects gauge. Equals to /gc/heap/allocs:objects + /gc/heap/tiny/allocs:objects.", []int{rmAllocsObjects, rmTinyAllocs}},
	{"go_memstats_frees_total", "counter", "Total number of heap objects frees. Equals to /gc/heap/frees:objects + /gc/heap/tiny/allocs:objects.", []int{rmFreesObjects, rmTinyAllocs}},
	{"go_memstats_heap_alloc_bytes", "gauge", "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes. Equals to /memory/classes/heap/objects:bytes.", []int{rmObjects}},
	{"go_memstats_heap_sys_bytes", "gauge", "Number of heap bytes obtained from system. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes + /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", []int{rmObjects, rmUnused, rmReleased, rmFree}},
	{"go_memstats_heap_idle_bytes", "gauge", "Number of heap bytes waiting to be used. Equals to /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", []int{rmReleased, rmFree}},
	{"go_memstats_heap_inuse_bytes", "gauge", "Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes", []int{rmObjects, rmUnused}},
	{"go_memstats_heap_released_bytes", "gauge", "Number of heap bytes released to OS. Equals to /memory/classes/heap/released:bytes.", []int{rmReleased}},
	{"go_memstats_heap_objects", "gauge", "Number of currently allocated objects. Equals to /gc/heap/objects:objects.", []int{rmHeapObjects}},
	{"go_memstats_stack_inuse_bytes", "gauge", "Number of bytes obtained from system for stack allocator in non-CGO environments. Equals to /memory/classes/heap/stacks:bytes.", []int{rmStacks}},
	{"go_memstats_stack_sys_bytes", "gauge", "Number of bytes obtained from system for stack allocator. Equals to /memory/classes/heap/stacks:bytes + /memory/classes/os-stacks:bytes.", []int{rmStacks, rmOSStacks}},
	{"go_memstats_mspan_inuse_bytes", "gauge", "Number of bytes in use by mspan structures. Equals to /memory/classes/metadata/mspan/inuse:bytes.", []int{rmMSpanInuse}},
	{"go_memstats_mspan_sys_bytes", "gauge", "Number of bytes used for mspan structures obtained from system. Equals to /memory/classes/metadata/mspan/inuse:bytes + /memory/classes/metadata/mspan/free:bytes.", []int{rmMSpanInuse, rmMSpanFree}},
	{"go_memstats_mcache_inuse_bytes", "gauge", "Number of bytes in use by mcache structures. Equals to /memory/classes/metadata/mcache/inuse:bytes.", []int{rmMCacheInuse}},
	{"go_memstats_mcache_sys_bytes", "gauge", "Number of bytes used for mcache structures obtained from system. Equals to /memory/classes/metadata/mcache/inuse:bytes + /memory/classes/metadata/mcache/free:bytes.", []int{rmMCacheInuse, rmMCacheFree}},
	{"go_memstats_buck_hash_sys_bytes", "gauge", "Number of bytes used by the profiling bucket hash table. Equals to /memory/classes/profiling/buckets:bytes.", []int{rmBuckets}},
	{"go_memstats_gc_sys_bytes", "gauge", "Number of bytes used for garbage collection system metadata. Equals to /memory/classes/metadata/other:bytes.", []int{rmMetaOther}},
	{"go_memstats_other_sys_bytes", "gauge", "Number of bytes used for other system allocations. Equals to /memory/classes/other:bytes.", []int{rmOther}},
	{"go_memstats_next_gc_bytes", "gauge", "Number of heap bytes when next garbage collection will take place. Equals to /gc/heap/goal:bytes.", []int{rmGoal}},
	{"go_gc_gogc_percent", "gauge", "Heap size target percentage configured by the user, otherwise 100. This value is set by the GOGC environment variable, and the runtime/debug.SetGCPercent function. Sourced from /gc/gogc:percent.", []int{rmGOGC}},
	{"go_gc_gomemlimit_bytes", "gauge", "Go runtime memory limit configured by the user, otherwise math.MaxInt64. This value is set by the GOMEMLIMIT environment variable, and the runtime/debug.SetMemoryLimit function. Sourced from /gc/gomemlimit:bytes.", []int{rmMemLimit}},
	{"go_sched_gomaxprocs_threads", "gauge", "The current runtime.GOMAXPROCS setting, or the number of operating system threads that can execute user-level Go code simultaneously. Sourced from /sched/gomaxprocs:threads.", []int{rmGOMAXPROCS}},
}

// The Go collector's families that do not come from runtime/metrics.
var (
	goGCDuration = desc{name: "go_gc_duration_seconds", help: "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles."}
	goGoroutines = desc{name: "go_goroutines", help: "Number of goroutines that currently exist."}
	goThreads    = desc{name: "go_threads", help: "Number of OS threads created."}
	goInfo       = desc{name: "go_info", help: "Information about the Go environment."}
	goLastGC     = desc{name: "go_memstats_last_gc_time_seconds", help: "Number of seconds since 1970 of last garbage collection."}
)

// goCollector writes the families client_golang's default Go collector
// (collectors.NewGoCollector()) writes, from the same sources.
type goCollector struct {
	mu      sync.Mutex // samples is reused by every scrape
	samples []rm.Sample
}

// NewGoCollector returns the Go runtime's figures: goroutines, threads, GC
// pauses, the memory classes as go_memstats_*, GOGC, GOMEMLIMIT and
// GOMAXPROCS.
func NewGoCollector() Collector {
	c := &goCollector{samples: make([]rm.Sample, rmCount)}
	for i, n := range rmNames {
		c.samples[i].Name = n
	}
	return c
}

func (c *goCollector) names() []string {
	ns := []string{goGCDuration.name, goGoroutines.name, goThreads.name, goInfo.name, goLastGC.name}
	for _, f := range goFigures {
		ns = append(ns, f.name)
	}
	return ns
}

// gaugeFamily is a family of one sample without labels.
func gaugeFamily(d *desc, typ string, v float64) family {
	return family{d.name, appendSample(d.header(nil, typ), d.name, "", nil, nil, "", 0, v)}
}

func (c *goCollector) collect(dst []family) []family {
	dst = append(dst, gaugeFamily(&goGoroutines, "gauge", float64(runtime.NumGoroutine())))
	threads, _ := runtime.ThreadCreateProfile(nil)
	dst = append(dst, gaugeFamily(&goThreads, "gauge", float64(threads)))

	var st debug.GCStats
	st.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&st)
	b := goGCDuration.header(nil, "summary")
	for i, q := range st.PauseQuantiles {
		b = appendSample(b, goGCDuration.name, "", nil, nil, "quantile", float64(i)/4, q.Seconds())
	}
	b = appendSample(b, goGCDuration.name, "_sum", nil, nil, "", 0, st.PauseTotal.Seconds())
	b = appendSample(b, goGCDuration.name, "_count", nil, nil, "", 0, float64(st.NumGC))
	dst = append(dst, family{goGCDuration.name, b})
	dst = append(dst, gaugeFamily(&goLastGC, "gauge", float64(st.LastGC.UnixNano())/1e9))
	b = goInfo.header(nil, "gauge")
	dst = append(dst, family{goInfo.name, appendSample(b, goInfo.name, "", []string{"version"}, []string{runtime.Version()}, "", 0, 1)})

	c.mu.Lock()
	defer c.mu.Unlock()
	rm.Read(c.samples)
	for i := range goFigures {
		f := &goFigures[i]
		var v uint64
		for _, j := range f.sum {
			// A name this Go does not know reads as KindBad: 0, as
			// client_golang's lookupOrZero gives.
			if s := c.samples[j].Value; s.Kind() == rm.KindUint64 {
				v += s.Uint64()
			}
		}
		d := desc{name: f.name, help: f.help}
		dst = append(dst, gaugeFamily(&d, f.typ, float64(v)))
	}
	return dst
}

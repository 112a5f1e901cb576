package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	jsonv2 "github.com/go-json-experiment/json"
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

// BenchmarkGotoSnapshotPhases splits a browser.goto + browser.snapshot of
// the page bench/browser/peer.sh measures (a title, a heading and 200 links
// in a list) into what handleGoto and handleSnapshot do, one after the
// other: the navigation with its location and title (nav-ms), the
// accessibility tree of goto's snapshot (tree1-ms) and the snapshot's
// (tree2-ms), medians over the iterations. Per iteration it reports
// Chromium's CPU by process kind (browser, renderer, gpu; from
// /proc/PID/stat, 10 ms ticks, so a mean over many iterations), the DevTools
// events the tab and the browser sent (events/op), and, once, the size of
// the tree's JSON (tree-KB). docs/performance.md "Browser", "Where it
// goes", has the figures.
func BenchmarkGotoSnapshotPhases(b *testing.B) {
	needBrowser(b)
	body := []byte(linksPage(200))
	srv, p, s := servedSession(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(body)
	}))
	var events atomic.Int64
	count := func(any) { events.Add(1) }
	if err := chromedp.Listen(s.ctx, count); err != nil {
		b.Fatal(err)
	}
	if err := chromedp.ListenBrowser(s.ctx, count); err != nil {
		b.Fatal(err)
	}
	gotoSnapshot := func(url string) (nav, tree1, tree2 time.Duration) {
		ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
		defer cancel()
		t0 := time.Now()
		if _, _, _, err := p.navigate(ctx, s, url); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, _, err := p.ariaSnapshot(ctx, s, false, gotoSnapshotBytes); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		tree, _, err := p.ariaSnapshot(ctx, s, false, p.opts.MaxSnapshotBytes)
		if err != nil {
			b.Fatal(err)
		}
		if !strings.Contains(tree, `"Link 200"`) {
			b.Fatalf("the snapshot lacks the last link:\n%s", tree)
		}
		return t1.Sub(t0), t2.Sub(t1), time.Since(t2)
	}
	gotoSnapshot(srv.URL + "/") // the first load warms the browser's caches
	treeJSON, err := chromedp.Run(s.ctx, func(ctx context.Context, t *chromedp.Target) (json.RawMessage, error) {
		var res json.RawMessage
		err := t.Call(ctx, string(accessibility.GetFullAXTree.Method), accessibility.GetFullAXTreeParams{}, &res)
		return res, err
	})
	if err != nil {
		b.Fatal(err)
	}
	var nav, tree1, tree2 []time.Duration
	events.Store(0)
	cpu0, self0 := cpuByKind(s.dir), selfCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n, t1, t2 := gotoSnapshot(fmt.Sprintf("%s/?i=%d", srv.URL, i))
		nav, tree1, tree2 = append(nav, n), append(tree1, t1), append(tree2, t2)
	}
	b.StopTimer()
	cpu1, self1 := cpuByKind(s.dir), selfCPU()
	b.ReportMetric(median(nav), "nav-ms")
	b.ReportMetric(median(tree1), "tree1-ms")
	b.ReportMetric(median(tree2), "tree2-ms")
	for _, kind := range []string{"browser", "renderer", "gpu-process"} {
		b.ReportMetric(float64(cpu1[kind]-cpu0[kind])/float64(b.N), strings.TrimSuffix(kind, "-process")+"-cpu-ms")
	}
	b.ReportMetric(float64(self1-self0)/float64(time.Millisecond)/float64(b.N), "daemon-cpu-ms")
	b.ReportMetric(float64(events.Load())/float64(b.N), "events/op")
	b.ReportMetric(float64(len(treeJSON))/1000, "tree-KB")
}

// linksPage is the page of bench/browser/peer.sh: a title, a heading and n
// links in a list.
func linksPage(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!doctype html><html><head><title>Links</title></head><body><h1>%d links</h1><ul>\n", n)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "<li><a href=\"/page/%d\">Link %d</a></li>\n", i, i)
	}
	b.WriteString("</ul></body></html>\n")
	return b.String()
}

// selfCPU is the CPU time (user + system) of this process: the provider,
// chromedp and the page's server.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuByKind is the CPU time (user + system, ms) of the session's live
// processes under dir, by Chromium's --type (the browser process has none).
func cpuByKind(dir string) map[string]int64 {
	out := map[string]int64{}
	for _, pid := range processesUsing(dir, false) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		cmdline, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		i := bytes.LastIndexByte(stat, ')')
		if err != nil || err2 != nil || i < 0 {
			continue // gone since the listing
		}
		kind := "browser"
		for _, a := range strings.FieldsFunc(string(cmdline), func(r rune) bool { return r == 0 || r == ' ' }) {
			if v, ok := strings.CutPrefix(a, "--type="); ok {
				kind = v
			}
		}
		// The fields after the command's name: state is field 3 of
		// proc(5), utime 14 and stime 15.
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		out[kind] += (utime + stime) * 10 // USER_HZ is 100 on Linux
	}
	return out
}

// BenchmarkDecodeAXTree: decoding the accessibility tree of the 200-link
// page (0.46 MB of JSON, as Chromium wrote it) the way chromedp's
// Target.Call decodes a result: into the struct of axNodes the snapshot
// read before (chromedp), and into axTree, whose decodeAXTree scans past
// what no snapshot reads (axTree); and decodeAXTree alone.
func BenchmarkDecodeAXTree(b *testing.B) {
	needBrowser(b)
	srv, p, s := servedSession(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, linksPage(200))
	}))
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	if _, _, _, err := p.navigate(ctx, s, srv.URL); err != nil {
		b.Fatal(err)
	}
	raw, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (json.RawMessage, error) {
		var res json.RawMessage
		err := t.Call(ctx, string(accessibility.GetFullAXTree.Method), accessibility.GetFullAXTreeParams{}, &res)
		return res, err
	})
	if err != nil {
		b.Fatal(err)
	}
	into := func(v any) func() error {
		return func() error { return jsonv2.Unmarshal(raw, v, chromedp.DefaultUnmarshalOptions) }
	}
	for _, c := range []struct {
		name   string
		decode func() error
	}{
		{"chromedp", func() error {
			return into(&struct {
				Nodes []*axNode `json:"nodes"`
			}{})()
		}},
		{"axTree", func() error { return into(&axTree{})() }},
		// The scanner alone: axTree's figure less the pass in which
		// chromedp's decoder reads the value before handing it over.
		{"decodeAXTree", func() error { _, err := decodeAXTree(raw); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.decode(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPageDocument: what each page function pays to find its
// document, in pageWorld (isolated: Page.createIsolatedWorld, then
// Runtime.evaluate in it) and, for the comparison, in the page's main world
// (Runtime.evaluate alone).
func BenchmarkPageDocument(b *testing.B) {
	f := setup(b, nil)
	id := f.start(b)
	f.gotoPage(b, id, "/")
	s := f.session(id)
	for _, world := range []string{"isolated", "main"} {
		b.Run(world, func(b *testing.B) {
			for b.Loop() {
				_, err := chromedp.Run(s.ctx, func(ctx context.Context, t *chromedp.Target) (runtime.RemoteObjectID, error) {
					if world == "isolated" {
						return evaluateObject(ctx, t, "document")
					}
					res, err := cdp.Call(ctx, t, runtime.Evaluate, runtime.EvaluateParams{Expression: "document"})
					if err != nil {
						return "", err
					}
					return res.Result.ObjectID, nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

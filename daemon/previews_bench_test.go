package daemon

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"
)

// BenchmarkPreviewProxy measures /preview/{port}/ beside the same
// workspace server reached directly on its loopback port, in one run and
// interleaved (each iteration asks both, so a shared machine's drift falls
// on both alike): a small GET (the page's text) and a 1 MiB body, each on
// a keep-alive client. It reports each path's time per request
// (direct-ns/req, preview-ns/req), their ratio (preview/direct), and for
// the 1 MiB body each path's throughput (direct-MB/s, preview-MB/s).
// "daemon-health" is GET /health on the same kind of connection. The
// small GET also reports medians (direct-p50-ns, preview-p50-ns,
// p50-ratio) and its floor, what a proxied request cannot go under on
// this machine: the direct request plus one more HTTP hop, the same GET
// answered at once with the same body by a net/http server with the
// daemon's timeouts (http-echo-p50-ns), asked in the same loop;
// floor-p50-ns is the median of each loop's direct plus echo time, and
// preview/floor the proxied median over it; cpu-ns/op is the CPU time of
// this process (the daemon, the client, the echo; not the workspace's
// server) per loop. Under bwrap the direct path is not
// reachable from the host (the server is in its own network namespace), so
// the comparison runs in software isolation. Run:
//
//	go test -run '^$' -bench PreviewProxy -benchtime 2000x -count 5 ./daemon/
func BenchmarkPreviewProxy(b *testing.B) {
	c := previewConfig(b, "software", true)
	r := start(b, c, nil)
	port := startPreviewServer(b, r, c.Root)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	defer client.CloseIdleConnections()
	fetch := func(b *testing.B, url string, auth bool, want int) time.Duration {
		start := time.Now()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		if auth {
			req.Header.Set("Authorization", "Bearer "+previewToken)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || (want > 0 && n != int64(want)) {
			b.Fatalf("%s: %d, %d bytes, %v", url, resp.StatusCode, n, err)
		}
		return time.Since(start)
	}
	direct := fmt.Sprintf("http://127.0.0.1:%d", port)
	proxied := fmt.Sprintf("%s/preview/%d", r.url, port)
	for _, tc := range []struct {
		name, path string
		size       int
	}{
		{"small", "/", 0},
		{"1MiB", fmt.Sprintf("/bytes?n=%d", 1<<20), 1 << 20},
	} {
		b.Run(tc.name, func(b *testing.B) {
			// Warm both pools: every measured request reuses a connection.
			fetch(b, direct+tc.path, false, tc.size)
			fetch(b, proxied+tc.path, true, tc.size)
			small := tc.size == 0
			var echo string
			if small {
				// The floor's extra hop answers what the server answers.
				req, _ := http.NewRequest(http.MethodGet, direct+tc.path, nil)
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				page, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				echo = httpEcho(b, page)
				fetch(b, echo+tc.path, false, 0)
			}
			var d, p time.Duration
			var dl, pl, fl, el []time.Duration
			cpu0 := cpuTime(b)
			for b.Loop() {
				di := fetch(b, direct+tc.path, false, tc.size)
				pi := fetch(b, proxied+tc.path, true, tc.size)
				d, p = d+di, p+pi
				if small {
					ei := fetch(b, echo+tc.path, false, 0)
					dl, pl, el, fl = append(dl, di), append(pl, pi), append(el, ei), append(fl, di+ei)
				}
			}
			n := float64(b.N)
			if small {
				b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/n, "cpu-ns/op")
			}
			b.ReportMetric(float64(d.Nanoseconds())/n, "direct-ns/req")
			b.ReportMetric(float64(p.Nanoseconds())/n, "preview-ns/req")
			b.ReportMetric(float64(p)/float64(d), "preview/direct")
			if tc.size > 0 {
				b.ReportMetric(float64(tc.size)*n/d.Seconds()/1e6, "direct-MB/s")
				b.ReportMetric(float64(tc.size)*n/p.Seconds()/1e6, "preview-MB/s")
			}
			if small {
				p50 := func(l []time.Duration) time.Duration { slices.Sort(l); return l[len(l)/2] }
				dm, pm, em, fm := p50(dl), p50(pl), p50(el), p50(fl)
				b.ReportMetric(float64(dm.Nanoseconds()), "direct-p50-ns")
				b.ReportMetric(float64(pm.Nanoseconds()), "preview-p50-ns")
				b.ReportMetric(float64(pm)/float64(dm), "p50-ratio")
				b.ReportMetric(float64(em.Nanoseconds()), "http-echo-p50-ns")
				b.ReportMetric(float64(fm.Nanoseconds()), "floor-p50-ns")
				b.ReportMetric(float64(pm)/float64(fm), "preview/floor")
			}
		})
	}
	b.Run("daemon-health", func(b *testing.B) {
		for b.Loop() {
			fetch(b, r.url+"/health", true, 0)
		}
	})
}

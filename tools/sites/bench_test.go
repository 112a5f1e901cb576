package sites

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkSite: a GET of a page and a POST of `echo hi` through the site's
// handler over loopback HTTP, beside their floors — the same file served by
// net/http's FileServer, and a fork/exec of echo — sequential (with the
// median latency) and with parallel callers. Run:
//
//	go test -run '^$' -bench Site -benchtime 2000x ./sites/
func BenchmarkSite(b *testing.B) {
	s, root := exampleSiteB(b)
	writePageB(b, root, "echo.md", "---\ntools:\n  - [echo, hi, \";\"]\n---\n")
	site := httptest.NewServer(serve(s))
	defer site.Close()
	files := httptest.NewServer(http.FileServer(http.Dir(root)))
	defer files.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	get := func(url string) func(*testing.B) {
		return func(b *testing.B) {
			resp, err := hc.Get(url)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatal(resp.Status)
			}
		}
	}
	postEcho := func(b *testing.B) {
		resp, err := hc.Post(site.URL+"/echo", "application/json", strings.NewReader(`{"command":["echo","hi"]}`))
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"hi\n"`) {
			b.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	forkEcho := func(b *testing.B) {
		out, err := exec.Command("echo", "hi").Output()
		if err != nil || string(out) != "hi\n" {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name string
		op   func(*testing.B)
	}{
		{"get-page", get(site.URL + "/guide")},
		{"get-floor-fileserver", get(files.URL + "/guide.md")},
		{"post-echo", postEcho},
		{"post-floor-forkexec", forkEcho},
	} {
		b.Run(bc.name+"/sequential", func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				t0 := time.Now()
				bc.op(b)
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					bc.op(b)
				}
			})
		})
	}
}

package daemon

import (
	"fmt"
	"io"
	"net/http"
	"testing"
)

// BenchmarkPreviewProxy measures /preview/{port}/ beside the same
// workspace server reached directly on its loopback port, in one run: a
// small GET (the page's text) and a 1 MiB body, each on a keep-alive
// client; and, as the floor of any hop through the daemon, GET /health. Under bwrap the direct figure is not reachable from the host (the
// server is in its own network namespace), so only software isolation is
// compared. Run:
//
//	go test -run '^$' -bench PreviewProxy -benchtime 2000x ./daemon/
func BenchmarkPreviewProxy(b *testing.B) {
	c := previewConfig(b, "software", true)
	r := start(b, c, nil)
	port := startPreviewServer(b, r, c.Root)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	defer client.CloseIdleConnections()
	fetch := func(b *testing.B, url string, auth bool, want int) {
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
		for _, via := range []struct {
			name string
			base string
			auth bool
		}{{"direct", direct, false}, {"preview", proxied, true}, {"daemon-health", r.url, true}} {
			if via.name == "daemon-health" {
				if tc.size > 0 {
					continue
				}
				// The floor of one hop through the daemon: its cheapest
				// endpoint, on the same kind of connection.
				tc.path = "/health"
			}
			b.Run(tc.name+"/"+via.name, func(b *testing.B) {

				if tc.size > 0 {
					b.SetBytes(int64(tc.size))
				}
				fetch(b, via.base+tc.path, via.auth, tc.size) // warm the pool
				b.ResetTimer()
				for b.Loop() {
					fetch(b, via.base+tc.path, via.auth, tc.size)
				}
			})
		}
	}
}

//go:build linux

package previews

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// BenchmarkProxyFloor places the preview proxy (Proxy on a loopback
// server, admitting every request with a hold as the daemon does, no
// daemon around it) beside its floor,
// a bare httputil.ReverseProxy to the same workspace server, and the
// server reached directly, interleaved in one loop: each reports its time
// per small GET and its ratio to direct, by mean and by median (-p50).
// Proxy serves a GET by its lean path (lean.go, with its own client,
// client.go), the bare proxy by the library's (its Transport); Proxy adds
// its admission callback, the port's parsing and the dial's checks.
// Run:
//
//	go test -run '^$' -bench ProxyFloor -benchtime 2000x -count 5 ./tools/previews/
func BenchmarkProxyFloor(b *testing.B) {
	p, ex, root := newProvider(b, sandbox.ModeSoftware)
	port := startServer(b, ex, root, root, "")
	direct := fmt.Sprintf("http://127.0.0.1:%d", port)

	serve := func(h http.Handler) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{Handler: h}
		go srv.Serve(l)
		b.Cleanup(func() { srv.Close() })
		return "http://" + l.Addr().String()
	}
	target, _ := url.Parse(direct)
	bare := serve(httputil.NewSingleHostReverseProxy(target))
	// The caller as the daemon gives it: with a hold (admit.Rules.Hold),
	// which a streamed answer takes.
	rules := admit.Rules{Holds: admit.NewHolds()}
	ours := serve(p.Proxy("/preview/", func(http.ResponseWriter, *http.Request) (Caller, bool) {
		return Caller{Face: "http", Hold: func(ctx context.Context) (context.Context, func()) { return rules.Hold(ctx, admit.Caller{}) }}, true
	}))
	ours += fmt.Sprintf("/preview/%d", port)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	fetch := func(u string) time.Duration {
		start := time.Now()
		resp, err := client.Get(u + "/")
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %d %v", u, resp.StatusCode, err)
		}
		return time.Since(start)
	}
	for _, u := range []string{direct, bare, ours} {
		fetch(u)
	}
	var d, br, o time.Duration
	var dl, bl, ol []time.Duration
	for b.Loop() {
		di, bi, oi := fetch(direct), fetch(bare), fetch(ours)
		d, br, o = d+di, br+bi, o+oi
		dl, bl, ol = append(dl, di), append(bl, bi), append(ol, oi)
	}
	p50 := func(l []time.Duration) time.Duration { slices.Sort(l); return l[len(l)/2] }
	dm, bm, om := p50(dl), p50(bl), p50(ol)
	b.ReportMetric(float64(bm)/float64(dm), "reverseproxy/direct-p50")
	b.ReportMetric(float64(om)/float64(dm), "preview/direct-p50")
	n := float64(b.N)
	b.ReportMetric(float64(d.Nanoseconds())/n, "direct-ns/req")
	b.ReportMetric(float64(br.Nanoseconds())/n, "reverseproxy-ns/req")
	b.ReportMetric(float64(o.Nanoseconds())/n, "preview-ns/req")
	b.ReportMetric(float64(br)/float64(d), "reverseproxy/direct")
	b.ReportMetric(float64(o)/float64(d), "preview/direct")
}

// BenchmarkTransportHandoff is what an http.Transport costs beyond the
// round trip, the reason the lean path has a client of its own
// (client.go): a small GET to a workspace server through an
// http.Transport (as ReverseProxy's path sends it: the request handed to
// the connection's write loop, the answer handed back from its read loop)
// beside the same GET written and read on the caller's goroutine over one
// kept connection (req.Write, http.ReadResponse, as client.go does),
// interleaved; medians.
// Run:
//
//	go test -run '^$' -bench TransportHandoff -benchtime 3000x -count 3 ./tools/previews/
func BenchmarkTransportHandoff(b *testing.B) {
	ex, root := newExecutor(b, sandbox.ModeSoftware)
	port := startServer(b, ex, root, root, "")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}
	defer tr.CloseIdleConnections()
	viaTransport := func() time.Duration {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("through the transport: %d %v", resp.StatusCode, err)
		}
		return time.Since(start)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	br, bw := bufio.NewReader(c), bufio.NewWriter(c)
	onCaller := func() time.Duration {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		if err := req.Write(bw); err != nil {
			b.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			b.Fatal(err)
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("on the caller's goroutine: %d %v", resp.StatusCode, err)
		}
		return time.Since(start)
	}
	viaTransport()
	onCaller()
	var tl, cl []time.Duration
	for b.Loop() {
		tl = append(tl, viaTransport())
		cl = append(cl, onCaller())
	}
	p50 := func(l []time.Duration) time.Duration { slices.Sort(l); return l[len(l)/2] }
	t, o := p50(tl), p50(cl)
	b.ReportMetric(float64(t.Nanoseconds()), "transport-p50-ns")
	b.ReportMetric(float64(o.Nanoseconds()), "caller-p50-ns")
	b.ReportMetric(float64(t)/float64(o), "transport/caller")
}

package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/internal/metrics"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// liveHeap is the live heap after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// toolSeries are the distinct tool label values of the per-tool families
// in the exposition.
func toolSeries(text string) map[string]bool {
	out := map[string]bool{}
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, "agentbe_tool_") {
			continue
		}
		_, rest, ok := strings.Cut(line, `tool="`)
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, `"`)
		out[name] = true
	}
	return out
}

// TestAttackToolMetricsOverALongLife: over a long life the served tools
// change (an upstream server that renames its tools on each list_changed,
// an extension reloaded with new names) and clients call names nobody
// serves. 2,000 generations of a provider's tool, each called once, and
// 10,000 distinct unknown names leave in /metrics the series of the tool
// served now and _unknown only, and the live heap where it was.
func TestAttackToolMetricsOverALongLife(t *testing.T) {
	mreg := metrics.NewRegistry()
	m, err := newToolMetrics(mreg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var reg *registry.Registry
	reg = registry.New(registry.Options{Observe: func(rec registry.Record) { m.observe(reg, rec) }})
	m.follow(reg)
	ok := func(context.Context, registry.Call) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}
	}
	ctx := context.Background()
	gen := func(i int) {
		name := fmt.Sprintf("up__tool_v%d", i)
		if err := reg.Set("up", []registry.Tool{{Name: name, Handler: ok}}); err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Call(ctx, name, registry.Call{}); err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Call(ctx, fmt.Sprintf("nobody_serves_%d", i), registry.Call{}); err == nil {
			t.Fatal("an unknown name was served")
		}
	}
	const warm, gens, unknown = 10, 2000, 10000
	for i := range warm {
		gen(i)
	}
	h0, g0 := liveHeap(), runtime.NumGoroutine()
	for i := warm; i < gens; i++ {
		gen(i)
	}
	for i := gens; i < unknown; i++ {
		if _, err := reg.Call(ctx, fmt.Sprintf("nobody_serves_%d", i), registry.Call{}); err == nil {
			t.Fatal("an unknown name was served")
		}
	}
	h1, g1 := liveHeap(), runtime.NumGoroutine()
	series := toolSeries(string(mreg.AppendText(nil)))
	t.Logf("after %d generations and %d unknown names: %d tool label values; live heap %d → %d; goroutines %d → %d", gens, unknown, len(series), h0, h1, g0, g1)
	want := fmt.Sprintf("up__tool_v%d", gens-1)
	if len(series) != 2 || !series[want] || !series[unknownTool] {
		names := make([]string, 0, 5)
		for n := range series {
			if len(names) < 5 {
				names = append(names, n)
			}
		}
		t.Errorf("%d tool label values (%v …); want %s and %s only", len(series), names, want, unknownTool)
	}
	if h1 > h0+256<<10 {
		t.Errorf("live heap %d → %d after %d generations of tools; want it within 256 KiB", h0, h1, gens)
	}
	if g1 > g0 {
		t.Errorf("goroutines %d → %d", g0, g1)
	}
}

// TestAttackManyAddressesOverALongLife: 3,000 connections, each from a
// loopback address of its own (127.0.0.0/8 gives a test 16M), each one
// request to /mcp, then closed: a third call a tool name nobody serves (a
// new name each time), a third bring a token that fails (a new one each
// time), a third list a scope of their own (X-Scope-Path, a new one each
// time). Afterwards the
// listener's tables (connections, connections per address) are empty,
// /metrics holds one tool label for the unknown names, and the descriptors,
// goroutines and live heap are back near where they were.
func TestAttackManyAddressesOverALongLife(t *testing.T) {
	c := testConfig(t)
	c.AuthToken = "long-life-token"
	// A daemon that logs nowhere: the tests' log buffer would grow with
	// every request and hide what the daemon holds.
	d, err := New(c, Options{Logger: slog.New(slog.DiscardHandler), Version: "9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	r := serve(t, d)
	addr := strings.TrimPrefix(r.url, "http://")
	one := func(i int) {
		src := &net.TCPAddr{IP: net.IPv4(127, byte(1+i>>16), byte(i>>8), byte(i))}
		conn, err := (&net.Dialer{LocalAddr: src}).Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial from %s: %v", src.IP, err)
		}
		defer conn.Close()
		token := c.AuthToken
		if i%3 == 0 { // a token that fails
			token = fmt.Sprintf("wrong-%d", i)
		}
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nobody_serves_%d","arguments":{}}}`, i)
		want := "nobody_serves"
		scope := ""
		switch i % 3 {
		case 0:
			want = "401"
		case 1: // a real call, in a scope of its own
			scope = fmt.Sprintf("s%d", i)
			if err := os.Mkdir(filepath.Join(c.Root, scope), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(c.Root, scope, "in-"+scope), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_directory","arguments":{"path":"."}}}`
			want = "[FILE] in-" + scope
		}
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nX-Scope-Path: %s\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
			addr, token, scope, len(body), body)
		resp, err := io.ReadAll(conn)
		if err != nil {
			t.Fatalf("from %s: %v", src.IP, err)
		}
		if !strings.Contains(string(resp), want) {
			t.Fatalf("from %s: %.300s; want %q", src.IP, resp, want)
		}
	}
	tables := func() (total, byIP, conns int) {
		lim := r.d.conns.Load() // set by Serve
		lim.mu.Lock()
		defer lim.mu.Unlock()
		return lim.total, len(lim.byIP), len(lim.conns)
	}
	settle := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			total, byIP, conns := tables()
			if total+byIP+conns == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d connections, %d addresses, %d tracked; want none", what, total, byIP, conns)
			}
		}
	}
	for i := range 20 {
		one(i)
	}
	settle("the first connections")
	fds0, g0, h0 := openFDs(t), runtime.NumGoroutine(), liveHeap()
	const n = 3000
	for i := 20; i < n; i++ {
		one(i)
	}
	settle(fmt.Sprintf("after %d addresses", n))
	fds, g := openFDs(t), runtime.NumGoroutine()
	for deadline := time.Now().Add(10 * time.Second); (fds > fds0 || g > g0+2) && time.Now().Before(deadline); fds, g = openFDs(t), runtime.NumGoroutine() {
		time.Sleep(20 * time.Millisecond)
	}
	h := liveHeap()
	_, metricsText := send(t, "GET", r.url+"/metrics", "", bearer(c.AuthToken))
	series := toolSeries(metricsText)
	t.Logf("%d addresses: descriptors %d → %d, goroutines %d → %d, live heap %d → %d, tool label values %d", n, fds0, fds, g0, g, h0, h, len(series))
	if fds > fds0 {
		t.Errorf("descriptors %d → %d after %d addresses", fds0, fds, n)
	}
	// A goroutine or two of the runtime's own may come and go.
	if g > g0+2 {
		t.Errorf("goroutines %d → %d after %d addresses", g0, g, n)
	}
	if h > h0+256<<10 {
		t.Errorf("live heap %d → %d after %d addresses; want within 256 KiB", h0, h, n)
	}
	if len(series) != 2 || !series[unknownTool] || !series["list_directory"] {
		t.Errorf("tool label values %v; want %s and list_directory only", series, unknownTool)
	}
}

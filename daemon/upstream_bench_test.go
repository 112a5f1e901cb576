package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkUpstreamEcho measures a tools/call of server-everything's echo
// made directly over stdio by a Go client (the floor) and routed through the
// daemon (--upstreams, software isolation) over /mcp and /execute, one call
// at a time and with 8 callers. p50-ns is the median latency. Run:
//
//	go test -run '^$' -bench UpstreamEcho -benchtime 2000x ./daemon/
func BenchmarkUpstreamEcho(b *testing.B) {
	everything := npmServer(b, "server-everything")
	ctx := context.Background()

	// Direct: our own stdio session to the same server.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: exec.Command("node", everything, "stdio")}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	direct := func() error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello"}})
		if err == nil && res.IsError {
			err = fmt.Errorf("echo failed")
		}
		return err
	}

	// Routed: the daemon with the server as an upstream.
	c := testConfig(b)
	cfgFile := filepath.Join(b.TempDir(), "mcp.json")
	if err := os.WriteFile(cfgFile, fmt.Appendf(nil, `{"servers":[{"name":"everything","command":"node","args":[%q,"stdio"],"maxConcurrent":16}]}`, everything), 0o600); err != nil {
		b.Fatal(err)
	}
	c.Upstreams = cfgFile
	c.MaxConcurrentCalls = 64
	if err := c.Validate(); err != nil {
		b.Fatal(err)
	}
	r := start(b, c, nil)
	waitUpstreams(b, r.url, "everything")
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	post := func(path, body string) func() error {
		return func() error {
			req, _ := http.NewRequest(http.MethodPost, r.url+path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(out), "hello") {
				return fmt.Errorf("%d %s", resp.StatusCode, out)
			}
			return nil
		}
	}
	routedMCP := post("/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"everything__echo","arguments":{"message":"hello"}}}`)
	routedREST := post("/execute", `{"tool_name":"everything__echo","arguments":{"message":"hello"}}`)

	for _, bc := range []struct {
		name string
		call func() error
	}{{"direct-stdio", direct}, {"routed-mcp", routedMCP}, {"routed-rest", routedREST}} {
		b.Run(bc.name+"/sequential", func(b *testing.B) { measure(b, 1, bc.call) })
		b.Run(bc.name+"/8-callers", func(b *testing.B) { measure(b, 8, bc.call) })
	}
}

// measure runs b.N calls over n goroutines and reports the median latency.
func measure(b *testing.B, n int, call func() error) {
	lat := make([]time.Duration, b.N)
	var next sync.Mutex
	i := 0
	b.ResetTimer()
	var wg sync.WaitGroup
	var failed error
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				if i >= b.N || failed != nil {
					next.Unlock()
					return
				}
				k := i
				i++
				next.Unlock()
				t0 := time.Now()
				err := call()
				lat[k] = time.Since(t0)
				if err != nil {
					next.Lock()
					failed = err
					next.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if failed != nil {
		b.Fatal(failed)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
}

package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/echomcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkUpstreamEcho measures a tools/call of server-everything's echo
// made directly over stdio by a Go client (the floor), routed through the
// daemon (--upstreams, software isolation) over /mcp and /execute, and
// routed through mcp-hub (an npm aggregator with the same server__tool
// naming, over its SSE endpoint), one call at a time and with 8 callers.
// The MCP calls all use the go-sdk client. p50-ns is the median latency.
// Run:
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
	c.UpstreamCacheDir = b.TempDir()
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
	ours, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.url + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ours.Close()
	routedSDK := sdkCall(ctx, ours, "everything__echo")
	hubURL, hub := startHub(b, everything)
	defer hub.Close()
	hubCall := sdkCall(ctx, hub, "everything__echo")
	hubRaw := newRawSSE(b, hubURL)
	hubRawCall := func() error { return hubRaw.call(`"name":"everything__echo","arguments":{"message":"hello"}`) }
	routedMCP := post("/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"everything__echo","arguments":{"message":"hello"}}}`)
	routedREST := post("/execute", `{"tool_name":"everything__echo","arguments":{"message":"hello"}}`)

	for _, bc := range []struct {
		name string
		call func() error
	}{{"direct-stdio", direct}, {"routed-mcp", routedMCP}, {"routed-mcp-sdk", routedSDK}, {"routed-rest", routedREST}, {"mcp-hub-sdk", hubCall}, {"mcp-hub-raw", hubRawCall}} {
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

func sdkCall(ctx context.Context, cs *mcp.ClientSession, tool string) func() error {
	return func() error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"message": "hello"}})
		if err == nil && res.IsError {
			err = fmt.Errorf("%s failed", tool)
		}
		return err
	}
}

// startHub runs mcp-hub (pinned in interop/package.json) with the same
// server and connects a go-sdk client to its SSE endpoint.
func startHub(b *testing.B, everything string) (string, *mcp.ClientSession) {
	b.Helper()
	cli, err := filepath.Abs(filepath.Join("..", "interop", "node_modules", "mcp-hub", "dist", "cli.js"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(cli); err != nil {
		b.Fatalf("mcp-hub is not installed (cd interop && npm ci): %v", err)
	}
	dir := b.TempDir()
	cfg := filepath.Join(dir, "hub.json")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `{"mcpServers":{"everything":{"command":"node","args":[%q,"stdio"]}}}`, everything), 0o600); err != nil {
		b.Fatal(err)
	}
	port := freePortB(b)
	cmd := exec.Command("node", cli, "--port", fmt.Sprint(port), "--config", cfg)
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_STATE_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	hubTransport := &http.Transport{}
	b.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		hubTransport.CloseIdleConnections()
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		url := fmt.Sprintf("http://127.0.0.1:%d", port)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
			Connect(context.Background(), &mcp.SSEClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: hubTransport}}, nil)
		if err == nil {
			if _, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": "x"}}); err == nil {
				return url, cs
			}
			cs.Close()
		}
		if time.Now().After(deadline) {
			b.Fatalf("mcp-hub not serving: %v\n%s", err, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func freePortB(b *testing.B) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// rawSSE is the cheapest client of an MCP SSE endpoint (the 2024-11-05
// transport mcp-hub serves): one GET stream carrying every reply, and a
// POST per request, replies matched by id. The daemon's side of the
// comparison is a raw HTTP POST too (routed-mcp).
type rawSSE struct {
	post    string
	hc      *http.Client
	mu      sync.Mutex
	nextID  int
	waiting map[int]chan string
	body    io.Closer
}

func newRawSSE(b *testing.B, base string) *rawSSE {
	b.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	c := &rawSSE{hc: &http.Client{Transport: tr}, waiting: map[int]chan string{}}
	resp, err := c.hc.Get(base + "/mcp")
	if err != nil {
		b.Fatal(err)
	}
	c.body = resp.Body
	stream := resp.Body
	b.Cleanup(func() { stream.Close(); tr.CloseIdleConnections() })
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	endpoint := make(chan string, 1)
	go func() {
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "endpoint":
				endpoint <- strings.TrimPrefix(line, "data: ")
			case strings.HasPrefix(line, "data: "):
				data := strings.TrimPrefix(line, "data: ")
				var m struct{ ID int }
				if json.Unmarshal([]byte(data), &m) == nil {
					c.mu.Lock()
					ch := c.waiting[m.ID]
					delete(c.waiting, m.ID)
					c.mu.Unlock()
					if ch != nil {
						ch <- data
					}
				}
			}
		}
	}()
	select {
	case ep := <-endpoint:
		c.post = base + ep
	case <-time.After(30 * time.Second):
		b.Fatal("mcp-hub sent no endpoint event")
	}
	if err := c.request(`"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`); err != nil {
		b.Fatal(err)
	}
	resp, err = c.hc.Post(c.post, "application/json", strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return c
}

func (c *rawSSE) call(params string) error {
	return c.request(`"method":"tools/call","params":{` + params + `}`)
}

func (c *rawSSE) request(rest string) error {
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan string, 1)
	c.waiting[id] = ch
	c.mu.Unlock()
	resp, err := c.hc.Post(c.post, "application/json", strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,%s}`, id, rest)))
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	select {
	case data := <-ch:
		if strings.Contains(data, `"error"`) || strings.Contains(data, `"isError":true`) {
			return fmt.Errorf("mcp-hub: %s", data)
		}
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("mcp-hub: no reply to request %d", id)
	}
}

func (c *rawSSE) Close() error { return c.body.Close() }

// echoUpstreamEnv, set in a process's environment, makes this test binary
// the minimal echo upstream (internal/echomcp) instead of running tests.
const echoUpstreamEnv = "AGENTBE_BENCH_ECHO_UPSTREAM"

func init() {
	if os.Getenv(echoUpstreamEnv) != "" {
		if echomcp.Serve(os.Stdin, os.Stdout) != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// rawStdio is the cheapest client of an MCP server on stdio: a line out, a
// line back, one call at a time.
type rawStdio struct {
	in  io.WriteCloser
	out *bufio.Reader
	cmd *exec.Cmd
	id  int
}

func newRawStdio(b *testing.B, env string) *rawStdio {
	b.Helper()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), env)
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &rawStdio{in: in, out: bufio.NewReaderSize(out, 64<<10), cmd: cmd}
	b.Cleanup(func() { in.Close(); cmd.Wait() })
	if _, err := c.request(`"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`); err != nil {
		b.Fatal(err)
	}
	if _, err := io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		b.Fatal(err)
	}
	return c
}

func (c *rawStdio) request(rest string) (string, error) {
	c.id++
	if _, err := io.WriteString(c.in, `{"jsonrpc":"2.0","id":`+strconv.Itoa(c.id)+`,`+rest+"}\n"); err != nil {
		return "", err
	}
	line, err := c.out.ReadString('\n')
	return line, err
}

// BenchmarkRoutedUpstream is the cost of routing: one tools/call of a
// minimal echo server (internal/echomcp, on stdio) straight to it over its
// pipes (raw lines, a process of its own), and through the daemon
// (--upstreams, software isolation) over /mcp as echo__echo (a raw HTTP
// POST on a kept-alive connection), the two alternated call by call so that
// both see the same load. direct-p50-ns and routed-p50-ns are the medians;
// ratio is routed over direct; cpu-ns/op is the CPU time of this process
// (the daemon, the clients and the floor's HTTP server; not the echo
// servers) per loop of calls, which a busy machine moves less than latency.
//
// The floor is what a routed call cannot go under on this machine: the
// same HTTP request, from the same kind of client, to a net/http server
// configured as the daemon's that answers the routed call's reply at once
// (http-echo-p50-ns), plus the direct call. The three calls alternate in
// one loop; floor-p50-ns is the median of each loop's HTTP echo plus its
// direct call, and routed/floor is the routed median over it: the part of
// the ratio that is the daemon's own. Run:
//
//	go test -run '^$' -bench RoutedUpstream -benchtime 3000x ./daemon/
func BenchmarkRoutedUpstream(b *testing.B) {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	direct := newRawStdio(b, echoUpstreamEnv+"=1")

	c := testConfig(b)
	cfgFile := filepath.Join(b.TempDir(), "mcp.json")
	if err := os.WriteFile(cfgFile, fmt.Appendf(nil, `{"servers":[{"name":"echo","command":%q,"env":{%q:"1"}}]}`, self, echoUpstreamEnv), 0o600); err != nil {
		b.Fatal(err)
	}
	c.Upstreams = cfgFile
	c.UpstreamCacheDir = b.TempDir()
	if err := c.Validate(); err != nil {
		b.Fatal(err)
	}
	r := start(b, c, nil)
	waitUpstreams(b, r.url, "echo")
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo__echo","arguments":{"text":"hello"}}}`
	routed := func() error {
		req, _ := http.NewRequest(http.MethodPost, r.url+"/mcp", strings.NewReader(call))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(out), `"text":"hello"`) || strings.Contains(string(out), `"isError":true`) {
			return fmt.Errorf("routed: %d %s", resp.StatusCode, out)
		}
		return nil
	}
	straight := func() error {
		line, err := direct.request(`"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}`)
		if err == nil && !strings.Contains(line, `"text":"hello"`) {
			err = fmt.Errorf("direct: %s", line)
		}
		return err
	}
	// The floor's HTTP side: the routed call's reply, answered by a
	// net/http server with the daemon's settings, on its own connection.
	reply, err := routedReply(hc, r.url, call)
	if err != nil {
		b.Fatal(err)
	}
	echoURL := httpEcho(b, reply)
	etr := &http.Transport{MaxIdleConnsPerHost: 1}
	defer etr.CloseIdleConnections()
	ehc := &http.Client{Transport: etr}
	echo := func() error {
		got, err := routedReply(ehc, echoURL, call)
		if err == nil && len(got) != len(reply) {
			err = fmt.Errorf("http echo: %d bytes, want %d", len(got), len(reply))
		}
		return err
	}
	for range 50 { // warm every path (connections, buffers, pools)
		for _, f := range []func() error{routed, straight, echo} {
			if err := f(); err != nil {
				b.Fatal(err)
			}
		}
	}
	dl, rl, el, fl := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := straight(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := routed(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := echo(); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		dl, rl, el = append(dl, t1.Sub(t0)), append(rl, t2.Sub(t1)), append(el, t3.Sub(t2))
		fl = append(fl, t1.Sub(t0)+t3.Sub(t2))
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	p50 := func(l []time.Duration) time.Duration { slices.Sort(l); return l[len(l)/2] }
	d, rt, e, f := p50(dl), p50(rl), p50(el), p50(fl)
	b.ReportMetric(float64(d.Nanoseconds()), "direct-p50-ns")
	b.ReportMetric(float64(rt.Nanoseconds()), "routed-p50-ns")
	b.ReportMetric(float64(rt)/float64(d), "ratio")
	b.ReportMetric(float64(e.Nanoseconds()), "http-echo-p50-ns")
	b.ReportMetric(float64(f.Nanoseconds()), "floor-p50-ns")
	b.ReportMetric(float64(rt)/float64(f), "routed/floor")
}

// routedReply posts body to base's /mcp as the routed benchmark's client
// does, and returns the reply.
func routedReply(hc *http.Client, base, body string) ([]byte, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %d %s", base, resp.StatusCode, out)
	}
	return out, err
}

// httpEcho serves reply, as application/json, to every request after
// reading its body, from a net/http server with the daemon's timeouts on
// a loopback port; it returns the server's URL and stops with the
// benchmark.
func httpEcho(b *testing.B, reply []byte) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.Write(reply)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idleTimeout,
	}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

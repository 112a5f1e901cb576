package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentbe/agentbe-daemon/bench/client"
	"github.com/agentbe/agentbe-daemon/internal/echomcp"
)

// The features round: our daemon started with every optional feature on
// (bench/features.sh, with `loadgen echo-mcp-stdio` as its one upstream),
// measured on what only it serves, each against the same work done without
// the daemon in between, the two alternating in one loop so that both see
// the same load:
//
//	rss_ready_all_mib          VmRSS at the first 200 from /health
//	upstream_routed_p50_ms     echo__echo through /mcp (client.MCP: a raw
//	                           JSON-RPC POST on a kept-alive connection)
//	upstream_direct_p50_ms     echo straight to a second `loadgen
//	                           echo-mcp-stdio` over its pipes (a line out,
//	                           a line back)
//	preview_p50_ms             GET / of `loadgen http-serve`, a workspace
//	                           process started with process_start, through
//	                           /preview/{port}/
//	preview_direct_p50_ms      the same GET straight to its loopback port
//
// The reference has neither upstreams nor previews: these rows are ours
// against the floor only.

// upstreamName is the server's name in the upstreams file compare.sh
// writes (bench/features.sh); its tool is served as echoTool.
const (
	upstreamName = "echo"
	echoTool     = upstreamName + "__echo"
	echoText     = "hello"
)

func runFeatures(argv []string, sz sizes, logDir string, round int) (*roundResult, error) {
	res := &roundResult{Name: "features", Round: round, Metrics: map[string]float64{}}
	m := res.Metrics
	root, err := os.MkdirTemp("", "agentbe-bench-features-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	root, _ = filepath.EvalSymlinks(root)
	if _, err := fixtures(root); err != nil {
		return nil, err
	}
	d, _, err := start(argv, root, filepath.Join(logDir, fmt.Sprintf("features-%d.log", round)))
	if err != nil {
		return nil, err
	}
	defer d.stop()
	rss, _, err := procStatus(d.pid())
	if err != nil {
		return nil, err
	}
	m["rss_ready_all_mib"] = float64(rss) / 1024

	mc := client.NewMCP(d.base, 2)
	defer mc.Close()
	if err := upstreamPhase(d.base, mc, sz, m); err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	if err := previewPhase(d.base, mc, sz, m); err != nil {
		return nil, fmt.Errorf("preview: %w", err)
	}
	return res, nil
}

// alternate times a and b in turn, n times after warm untimed pairs.
func alternate(warm, n int, a, b func() error) (la, lb latencies, err error) {
	for range warm {
		if err := a(); err != nil {
			return nil, nil, err
		}
		if err := b(); err != nil {
			return nil, nil, err
		}
	}
	la, lb = make(latencies, 0, n), make(latencies, 0, n)
	for range n {
		t0 := time.Now()
		if err := a(); err != nil {
			return nil, nil, err
		}
		t1 := time.Now()
		if err := b(); err != nil {
			return nil, nil, err
		}
		la, lb = append(la, t1.Sub(t0)), append(lb, time.Since(t1))
	}
	return la, lb, nil
}

func upstreamPhase(base string, mc *client.MCP, sz sizes, m map[string]float64) error {
	if err := waitUpstream(base, upstreamName, 30*time.Second); err != nil {
		return err
	}
	direct, err := startEchoMCP()
	if err != nil {
		return err
	}
	defer direct.close()
	call := client.Prepare(echoTool, map[string]any{"text": echoText})
	routed := func() error {
		r, err := mc.MustOK(call)
		if err == nil && r.Text != echoText {
			err = fmt.Errorf("%s answered %.120q, want %q", echoTool, r.Text, echoText)
		}
		return err
	}
	straight := func() error {
		text, err := direct.call(echoText)
		if err == nil && text != echoText {
			err = fmt.Errorf("echo-mcp-stdio answered %.120q, want %q", text, echoText)
		}
		return err
	}
	r, s, err := alternate(sz.warmup, sz.pairs, routed, straight)
	if err != nil {
		return err
	}
	m["upstream_routed_p50_ms"], m["upstream_direct_p50_ms"] = r.pct(50), s.pct(50)
	return nil
}

// waitUpstream polls /health/servers until the server name is running.
func waitUpstream(base, name string, limit time.Duration) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(limit)
	last := ""
	for time.Now().Before(deadline) {
		resp, err := hc.Get(base + "/health/servers")
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			last = string(b)
			var body struct {
				Servers map[string]string `json:"servers"`
			}
			if json.Unmarshal(b, &body) == nil && body.Servers[name] == "running" {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("upstream %q not running after %s; /health/servers: %.300s", name, limit, last)
}

func previewPhase(base string, mc *client.MCP, sz sizes, m map[string]float64) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	started, err := mc.MustOK(client.Prepare("process_start", map[string]any{"command": self + " http-serve", "name": "web"}))
	if err != nil {
		return fmt.Errorf("process_start: %w", err)
	}
	var proc struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(started.Text), &proc); err != nil || proc.ID == "" {
		return fmt.Errorf("process_start answered %.200q", started.Text)
	}
	port, err := waitListening(mc, proc.ID, 30*time.Second)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	get := func(url string) func() error {
		return func() error {
			resp, err := hc.Get(url)
			if err != nil {
				return err
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && (resp.StatusCode != http.StatusOK || string(b) != smallBody) {
				err = fmt.Errorf("GET %s: %d %.120q, want 200 %q", url, resp.StatusCode, b, smallBody)
			}
			return err
		}
	}
	p, s, err := alternate(sz.warmup, sz.pairs,
		get(fmt.Sprintf("%s/preview/%d/", base, port)), get(fmt.Sprintf("http://127.0.0.1:%d/", port)))
	if err != nil {
		return err
	}
	m["preview_p50_ms"], m["preview_direct_p50_ms"] = p.pct(50), s.pct(50)
	return nil
}

// waitListening polls process_output until the process says where it
// listens ("listening on PORT", as http-serve prints).
func waitListening(mc *client.MCP, id string, limit time.Duration) (int, error) {
	call := client.Prepare("process_output", map[string]any{"id": id})
	deadline := time.Now().Add(limit)
	for {
		r, err := mc.MustOK(call)
		if err != nil {
			return 0, fmt.Errorf("process_output: %w", err)
		}
		var out struct {
			Stdout string `json:"stdout"`
			Stderr string `json:"stderr"`
			State  string `json:"state"`
		}
		if err := json.Unmarshal([]byte(r.Text), &out); err != nil {
			return 0, fmt.Errorf("process_output answered %.200q", r.Text)
		}
		if rest, ok := strings.CutPrefix(out.Stdout, "listening on "); ok {
			return strconv.Atoi(strings.TrimSpace(rest))
		}
		if out.State != "" && out.State != "running" {
			return 0, fmt.Errorf("http-serve ended (%s) before it listened: %.300s", out.State, out.Stderr)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("http-serve did not say where it listens after %s", limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// smallBody is what `loadgen http-serve` answers to every GET.
const smallBody = "hello from loadgen http-serve\n"

// cmdHTTPServe is `loadgen http-serve`: the workspace server of the preview
// figure. It listens on a free loopback port, prints "listening on PORT" and
// answers every request with smallBody until it is killed (the daemon ends
// its processes with it).
func cmdHTTPServe(args []string) error {
	if len(args) != 0 {
		return fmt.Errorf("http-serve: no arguments")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("listening on %d\n", ln.Addr().(*net.TCPAddr).Port)
	return http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(smallBody)))
		io.WriteString(w, smallBody)
	}))
}

// cmdEchoMCPStdio is `loadgen echo-mcp-stdio`: a minimal MCP server on
// stdio with one tool, echo, that answers its "text" argument; one JSON
// line in, one out, encoding/json per line. It is the upstream of the
// routed-call figure, and, started by loadgen itself, the same call's
// floor.
func cmdEchoMCPStdio(args []string) error {
	if len(args) != 0 {
		return fmt.Errorf("echo-mcp-stdio: no arguments")
	}
	return echomcp.Serve(os.Stdin, os.Stdout)
}

// echoMCP is the cheapest client of `loadgen echo-mcp-stdio`: a line out,
// a line back, one call at a time.
type echoMCP struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	id  int
}

func startEchoMCP() (*echoMCP, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "echo-mcp-stdio")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &echoMCP{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

// call sends tools/call echo with text and returns the text of the answer.
func (e *echoMCP) call(text string) (string, error) {
	e.id++
	arg, _ := json.Marshal(text)
	if _, err := fmt.Fprintf(e.in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%s}}}`+"\n", e.id, arg); err != nil {
		return "", err
	}
	line, err := e.out.ReadBytes('\n')
	if err != nil {
		return "", fmt.Errorf("echo-mcp-stdio: %w", err)
	}
	var r struct {
		ID     int `json:"id"`
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(line, &r); err != nil || r.ID != e.id || len(r.Result.Content) != 1 {
		return "", fmt.Errorf("echo-mcp-stdio answered %.200q to call %d", line, e.id)
	}
	return r.Result.Content[0].Text, nil
}

func (e *echoMCP) close() {
	e.in.Close()
	e.cmd.Wait()
}

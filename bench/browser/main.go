// Command browser-peer measures the daemon's browser tools beside
// Playwright MCP (@playwright/mcp) on this machine, both driven by the same
// MCP client, and prints one table with the ratio and target of each row
// (docs/performance.md, "Browser"). bench/browser/peer.sh builds the daemon
// and installs Playwright MCP from bench/package-lock.json; run that.
//
// Both servers are processes of their own, started fresh for each round
// and reached over stdio MCP by the go-sdk client of this process:
//
//   - ours: agent-backend daemon --local-only --browser-allow-local
//     --browser-path CHROMIUM (the flag a user turns the tools on with to
//     browse a page this machine serves); its own defaults otherwise;
//   - Playwright MCP: node cli.js --headless --isolated --executable-path
//     CHROMIUM --viewport-size 1280x800 --output-dir DIR (our viewport, a
//     profile in memory, its files in the run's directory).
//
// Both load the same page, 200 links served by this process on 127.0.0.1,
// with the same Chromium. Rows, per server and round:
//
//   - start to first page: from the call that starts the browser to the
//     answer of the page (ours: browser.start, then browser.goto; Playwright
//     MCP: its first browser_navigate, which starts its browser);
//   - navigate + snapshot: browser.goto + browser.snapshot (ours),
//     browser_navigate + browser_snapshot (Playwright MCP), -runs times; the
//     round's median;
//   - memory: after the first page and a snapshot, the PSS of the server's
//     process and every process below it (its Chromium's), summed.
//
// Every snapshot is checked to hold the page's last link, so neither side
// can answer with less. Rounds alternate which server goes first; each
// figure is the median over rounds, shown with the lowest and highest round.
package main

import (
	"context"
	"errors"
	"flag"
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
	"syscall"
	"time"

	"github.com/agentbe/agentbe-daemon/bench/internal/figures"
	"github.com/agentbe/agentbe-daemon/bench/internal/procstat"
	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type options struct {
	bin, pwCLI, node, chromium string
	rounds, runs, links        int
	only                       string
	smoke, keep, procs         bool
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "", "our daemon's binary (agent-backend); required")
	flag.StringVar(&o.pwCLI, "pw", "", "Playwright MCP's cli.js (bench/node_modules/@playwright/mcp/cli.js); required")
	flag.StringVar(&o.node, "node", "node", "Node, which runs Playwright MCP")
	flag.StringVar(&o.chromium, "chromium", "/usr/bin/chromium", "the Chromium both servers run")
	flag.IntVar(&o.rounds, "rounds", 5, "measured rounds (each starts both servers afresh)")
	flag.IntVar(&o.runs, "runs", 20, "navigate + snapshot per server and round")
	flag.IntVar(&o.links, "links", 200, "links on the page")
	flag.BoolVar(&o.smoke, "smoke", false, "no warm-up round, and no verdicts: checks that everything works")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (the servers' logs)")
	flag.StringVar(&o.only, "only", "", "measure one server only (ours or playwright), for profiling; judges nothing")
	flag.BoolVar(&o.procs, "procs", false, "print each server's processes and their PSS, per round (stderr)")
	flag.Parse()
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "browser-peer:", err)
		os.Exit(1)
	}
}

func (o options) check() error {
	switch {
	case o.bin == "":
		return errors.New("-bin is required (bench/browser/peer.sh builds it)")
	case o.pwCLI == "":
		return errors.New("-pw is required: Playwright MCP's cli.js (bench/browser/peer.sh installs it)")
	case o.rounds < 1:
		return fmt.Errorf("-rounds %d: must be at least 1", o.rounds)
	case o.runs < 1:
		return fmt.Errorf("-runs %d: must be at least 1", o.runs)
	case o.links < 1 || o.links > 10000:
		return fmt.Errorf("-links %d: must be 1 to 10000", o.links)
	case o.only != "" && o.only != "ours" && o.only != "playwright":
		return fmt.Errorf("-only %q: must be ours or playwright", o.only)
	}
	for flagName, p := range map[string]string{"-bin": o.bin, "-pw": o.pwCLI, "-chromium": o.chromium} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s %s: %w", flagName, p, err)
		}
	}
	if _, err := exec.LookPath(o.node); err != nil {
		return fmt.Errorf("-node %s: %w", o.node, err)
	}
	return nil
}

// server is one side: how it is started and how its tools are called.
type server struct {
	name string
	// command is the server's command line; dir is its own directory.
	command func(dir string) *exec.Cmd
	// first starts the browser and loads url, as a user's first calls do.
	first func(ctx context.Context, c *conn, url string) error
	// navigate loads url; snapshot describes the page and returns the text.
	navigate func(ctx context.Context, c *conn, url string) error
	snapshot func(ctx context.Context, c *conn) (string, error)
}

// conn is a running server and the client's session with it.
type conn struct {
	cmd       *exec.Cmd
	cs        *mcp.ClientSession
	sessionID string // ours: browser.start's
}

func (c *conn) call(ctx context.Context, name string, args map[string]any) (string, error) {
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text.WriteString(t.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("%s: %s", name, clip.String(text.String(), 500))
	}
	return text.String(), nil
}

func ours(o options) *server {
	return &server{
		name: "ours",
		command: func(dir string) *exec.Cmd {
			ws := filepath.Join(dir, "workspace")
			_ = os.Mkdir(ws, 0o755)
			return exec.Command(o.bin, "daemon", "--local-only", "--root", ws,
				"--browser-allow-local", "--browser-path", o.chromium)
		},
		first: func(ctx context.Context, c *conn, url string) error {
			out, err := c.call(ctx, "browser.start", map[string]any{})
			if err != nil {
				return err
			}
			i := strings.Index(out, `"sessionId":"`)
			if i < 0 {
				return fmt.Errorf("browser.start answered without a sessionId: %s", clip.String(out, 200))
			}
			id := out[i+len(`"sessionId":"`):]
			c.sessionID = id[:strings.IndexByte(id, '"')]
			_, err = c.call(ctx, "browser.goto", map[string]any{"sessionId": c.sessionID, "url": url})
			return err
		},
		navigate: func(ctx context.Context, c *conn, url string) error {
			_, err := c.call(ctx, "browser.goto", map[string]any{"sessionId": c.sessionID, "url": url})
			return err
		},
		snapshot: func(ctx context.Context, c *conn) (string, error) {
			return c.call(ctx, "browser.snapshot", map[string]any{"sessionId": c.sessionID})
		},
	}
}

func playwright(o options) *server {
	navigate := func(ctx context.Context, c *conn, url string) error {
		_, err := c.call(ctx, "browser_navigate", map[string]any{"url": url})
		return err
	}
	return &server{
		name: "Playwright MCP",
		command: func(dir string) *exec.Cmd {
			cmd := exec.Command(o.node, o.pwCLI, "--headless", "--isolated", "--executable-path", o.chromium,
				"--viewport-size", fmt.Sprintf("%dx%d", viewportWidth, viewportHeight),
				"--output-dir", filepath.Join(dir, "output"),
				// As root, Chromium's sandbox cannot start (Chromium refuses
				// it, and Playwright MCP has no user to drop to).
				"--no-sandbox")
			cmd.Dir = dir
			return cmd
		},
		first:    navigate,
		navigate: navigate,
		snapshot: func(ctx context.Context, c *conn) (string, error) {
			return c.call(ctx, "browser_snapshot", map[string]any{})
		},
	}
}

// Our daemon's default viewport (tools/browser's DefaultViewportWidth and
// DefaultViewportHeight), given to Playwright MCP too.
const viewportWidth, viewportHeight = 1280, 800

// sample is one server's figures in one round.
type sample struct {
	startMs, navSnapMs, pssMiB float64
	// cpuMs is the CPU time (user + system) of the server's process tree
	// per navigate + snapshot.
	cpuMs float64
	procs int
	// others counts the processes outside the tree that ran the same
	// browser executable when the memory was read: the pages of the
	// executable they share are divided with them in PSS.
	others int
}

// run measures and writes the table to w (progress lines go to stderr).
func run(o options, w io.Writer) error {
	if err := o.check(); err != nil {
		return err
	}
	var err error
	// Each server runs in a directory of its own.
	if o.pwCLI, err = filepath.Abs(o.pwCLI); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "agentbe-browser-peer-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(os.Stderr, "keeping", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	base, stop, err := servePage(o.links)
	if err != nil {
		return err
	}
	defer stop()
	servers := []*server{ours(o), playwright(o)}
	switch o.only {
	case "ours":
		servers = servers[:1]
	case "playwright":
		servers = servers[1:]
	}
	results := map[string][]sample{}
	others := 0 // the most processes of the same browser outside a tree
	start := time.Now().UTC()
	load0 := figures.LoadAvg()
	// A warm-up round, not counted: the page cache holds Chromium, our
	// binary and Playwright's node_modules for both alike afterwards.
	first := 0
	if !o.smoke {
		first = -1
	}
	for round := first; round < o.rounds; round++ {
		order := slices.Clone(servers)
		if round%2 != 0 {
			slices.Reverse(order)
		}
		for _, s := range order {
			sd := filepath.Join(dir, fmt.Sprintf("%s-%d", strings.ReplaceAll(s.name, " ", "-"), round))
			if err := os.Mkdir(sd, 0o755); err != nil {
				return err
			}
			r, err := measure(o, s, sd, base)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w (its log: %s)", s.name, round+1, err, logTail(sd))
			}
			fmt.Fprintf(os.Stderr, "round %d %s: start %.0f ms, navigate+snapshot p50 %.1f ms (CPU %.1f ms), %d processes, %.1f MiB\n",
				round+1, s.name, r.startMs, r.navSnapMs, r.cpuMs, r.procs, r.pssMiB)
			if r.others > 0 {
				fmt.Fprintf(os.Stderr, "  (%d other processes ran the same browser executable: its shared pages were divided with them in PSS)\n", r.others)
			}
			if round >= 0 {
				results[s.name] = append(results[s.name], r)
				others = max(others, r.others)
			}
		}
	}
	fmt.Fprintf(w, "Playwright MCP (%s) vs our browser tools (%s), %s, %d rounds of %d navigate + snapshot, a %d-link page; %s–%s UTC; load average %s → %s\n\n",
		pwVersion(o.pwCLI), filepath.Base(o.bin), chromiumVersion(o.chromium), o.rounds, o.runs, o.links,
		start.Format("2006-01-02 15:04"), time.Now().UTC().Format("15:04"), load0, figures.LoadAvg())
	if o.only != "" {
		return nil // one side: the lines above are the figures
	}
	if others > 0 {
		fmt.Fprintf(w, "Memory read while up to %d other processes ran the same browser executable: PSS divided its shared pages with them, so both sides' memory reads low; measure on a machine where no other Chromium runs.\n\n", others)
	}
	printTable(w, results["Playwright MCP"], results["ours"], !o.smoke)
	return nil
}

// measure starts s in dir, takes one round's figures and stops it.
func measure(o options, s *server, dir, base string) (r sample, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := s.command(dir)
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return r, err
	}
	defer logf.Close()
	cmd.Stderr = logf
	// Killed with this process; its own group, so that what is left of it
	// can be killed whole.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	client := mcp.NewClient(&mcp.Implementation{Name: "agentbe-browser-peer", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		return r, err
	}
	c := &conn{cmd: cmd, cs: cs}
	pid := cmd.Process.Pid
	var tree []int
	defer func() {
		// Closing stdin ends both servers, and with them their browsers;
		// whatever is left of the tree seen is killed.
		_ = cs.Close()
		for _, p := range append(tree, descendants(pid)...) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}()

	t0 := time.Now()
	if err := s.first(ctx, c, base+"/"); err != nil {
		return r, err
	}
	r.startMs = figures.Ms(time.Since(t0))
	if err := snapshotOK(ctx, s, c, o.links); err != nil {
		return r, err
	}
	tree = descendants(pid)
	r.procs = len(tree) + 1
	var kib int64
	for _, p := range append([]int{pid}, tree...) {
		k := pssKiB(p)
		kib += k
		if o.procs {
			fmt.Fprintf(os.Stderr, "  %s pid %d: %s, %.1f MiB\n", s.name, p, procKind(p), float64(k)/1024)
		}
	}
	r.pssMiB = float64(kib) / 1024
	r.others = sameExecutable(append([]int{pid}, tree...), pid)

	times := make([]float64, 0, o.runs)
	cpu0 := cpuByProcess(pid)
	for i := range o.runs {
		t0 := time.Now()
		if err := s.navigate(ctx, c, fmt.Sprintf("%s/?i=%d", base, i)); err != nil {
			return r, err
		}
		if err := snapshotOK(ctx, s, c, o.links); err != nil {
			return r, err
		}
		times = append(times, figures.Ms(time.Since(t0)))
	}
	r.navSnapMs = figures.Median(times)
	cpu1 := cpuByProcess(pid)
	var total float64
	for p, c := range cpu1 {
		d := c - cpu0[p] // a process started since counts whole
		total += d
		if o.procs && d > 0 {
			fmt.Fprintf(os.Stderr, "  %s pid %d: %s, CPU %.1f ms per navigate + snapshot\n", s.name, p, procKind(p), d/float64(o.runs))
		}
	}
	r.cpuMs = total / float64(o.runs)
	return r, nil
}

// snapshotOK takes a snapshot and checks that it holds the page's last
// link: a snapshot cut short would make a side look faster than it is.
func snapshotOK(ctx context.Context, s *server, c *conn, links int) error {
	text, err := s.snapshot(ctx, c)
	if err != nil {
		return err
	}
	if want := fmt.Sprintf("Link %d", links); !strings.Contains(text, want) {
		return fmt.Errorf("its snapshot lacks %q (the page's last link): %s", want, clip.String(text, 300))
	}
	return nil
}

// page is the page both servers load: a title, a heading and links, each
// in a list item.
func page(links int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!doctype html><html><head><title>Links</title></head><body><h1>%d links</h1><ul>\n", links)
	for i := 1; i <= links; i++ {
		fmt.Fprintf(&b, "<li><a href=\"/page/%d\">Link %d</a></li>\n", i, i)
	}
	b.WriteString("</ul></body></html>\n")
	return b.String()
}

// servePage serves page on 127.0.0.1; stop ends the server.
func servePage(links int) (base string, stop func(), err error) {
	body := []byte(page(links))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(body)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// row is one line of the table: the peer's and our figure per round.
type row struct {
	name, unit string
	peer, ours []float64
	// target is what the ratio peer ÷ ours must reach; atMost says
	// instead that ours must not pass the peer's figure; 0: no target.
	target float64
	atMost bool
}

func printTable(w io.Writer, peer, ours []sample, judge bool) {
	get := func(s []sample, f func(sample) float64) []float64 {
		v := make([]float64, len(s))
		for i := range s {
			v[i] = f(s[i])
		}
		return v
	}
	rows := []row{
		{name: "navigate + snapshot p50", unit: "ms", target: 1.5,
			peer: get(peer, func(s sample) float64 { return s.navSnapMs }), ours: get(ours, func(s sample) float64 { return s.navSnapMs })},
		{name: "start to first page", unit: "ms", target: 1, atMost: true,
			peer: get(peer, func(s sample) float64 { return s.startMs }), ours: get(ours, func(s sample) float64 { return s.startMs })},
		{name: "memory per session (PSS of the process tree)", unit: "MiB", target: 1.5,
			peer: get(peer, func(s sample) float64 { return s.pssMiB }), ours: get(ours, func(s sample) float64 { return s.pssMiB })},
		{name: "CPU per navigate + snapshot (server's process tree)", unit: "ms",
			peer: get(peer, func(s sample) float64 { return s.cpuMs }), ours: get(ours, func(s sample) float64 { return s.cpuMs })},
		{name: "processes in the tree", unit: "",
			peer: get(peer, func(s sample) float64 { return float64(s.procs) }), ours: get(ours, func(s sample) float64 { return float64(s.procs) })},
	}
	fmt.Fprintln(w, "| row | Playwright MCP | ours | ratio | target | |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---|")
	pass, fail := 0, 0
	for _, r := range rows {
		p, q := figures.Median(r.peer), figures.Median(r.ours)
		ratio := p / q
		cell := func(v []float64, m float64) string {
			if r.unit == "" { // a count
				return fmt.Sprintf("%g (%g–%g)", m, slices.Min(v), slices.Max(v))
			}
			return fmt.Sprintf("%s %s (%s–%s)", figures.Num(m), r.unit, figures.Num(slices.Min(v)), figures.Num(slices.Max(v)))
		}
		target, verdict := "", ""
		switch {
		case r.target == 0:
		case r.atMost:
			target = "ours ≤ Playwright MCP's"
			verdict = map[bool]string{true: "pass", false: "FAIL"}[q <= p]
		default:
			target = fmt.Sprintf("≥ %g×", r.target)
			verdict = map[bool]string{true: "pass", false: "FAIL"}[ratio >= r.target]
		}
		if !judge && verdict != "" {
			verdict = "(smoke: not judged)"
		}
		switch verdict {
		case "pass":
			pass++
		case "FAIL":
			fail++
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.2f× | %s | %s |\n", r.name, cell(r.peer, p), cell(r.ours, q), ratio, target, verdict)
	}
	fmt.Fprintf(w, "\nratio: Playwright MCP ÷ ours (> 1: ours is faster or smaller); each figure the median over rounds, in brackets the lowest – highest round")
	if judge {
		fmt.Fprintf(w, ". targets: %d pass, %d FAIL", pass, fail)
	}
	fmt.Fprintln(w)
}

// descendants lists the processes below root (by /proc/PID/stat's ppid),
// at any depth.
func descendants(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := ppid(pid); ok {
			parent[pid] = pp
		}
	}
	var out []int
	for pid := range parent {
		for p, hops := parent[pid], 0; p > 1 && hops < 64; p, hops = parent[p], hops+1 {
			if p == root {
				out = append(out, pid)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// cpuByProcess is the CPU time (user + system, with that of reaped
// children) of root and each process below it, in ms, from /proc/PID/stat.
func cpuByProcess(root int) map[int]float64 {
	out := map[int]float64{}
	for _, pid := range append([]int{root}, descendants(root)...) {
		st, err := procstat.Read(pid)
		if err != nil {
			continue
		}
		out[pid] = float64((st.CPU + st.Children).Microseconds()) / 1000
	}
	return out
}

// ppid reads a process's parent from /proc/PID/stat.
func ppid(pid int) (int, bool) {
	st, err := procstat.Read(pid)
	return st.PPID, err == nil
}

// sameExecutable counts the processes outside tree that run an executable
// some process of tree but root runs (the browser's).
func sameExecutable(tree []int, root int) int {
	exes := map[string]bool{}
	in := map[int]bool{}
	for _, p := range tree {
		in[p] = true
		if p == root {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p)); err == nil {
			exes[exe] = true
		}
	}
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || in[pid] {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exes[exe] {
			n++
		}
	}
	return n
}

// procKind names a process: its command, and Chromium's --type= (renderer,
// gpu-process, utility with its --utility-sub-type, zygote).
func procKind(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	// Chromium's helpers rewrite their command line as one string with
	// spaces for separators.
	args := strings.Fields(strings.ReplaceAll(string(b), "\x00", " "))
	if len(args) == 0 {
		return "?"
	}
	kind := filepath.Base(args[0])
	for _, a := range args[1:] {
		if v, ok := strings.CutPrefix(a, "--type="); ok {
			kind += " " + v
		} else if v, ok := strings.CutPrefix(a, "--utility-sub-type="); ok {
			kind += " " + v
		}
	}
	return kind
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

// logTail is the end of a server's log, for an error.
func logTail(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "server.log"))
	return clip.String(strings.TrimSpace(string(b[max(0, len(b)-1500):])), 1500)
}

func pwVersion(cli string) string {
	b, err := os.ReadFile(filepath.Join(filepath.Dir(cli), "package.json"))
	if err != nil {
		return "?"
	}
	s := string(b)
	if i := strings.Index(s, `"version": "`); i >= 0 {
		s = s[i+len(`"version": "`):]
		return "@playwright/mcp " + s[:strings.IndexByte(s, '"')]
	}
	return "?"
}

func chromiumVersion(path string) string {
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return path
	}
	return strings.TrimSpace(string(out))
}

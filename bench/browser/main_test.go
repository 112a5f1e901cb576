package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// Bad options are refused before anything starts, naming the flag.
func TestOptionsRefused(t *testing.T) {
	ok := options{bin: "/bin/true", pwCLI: "/bin/true", node: "true", chromium: "/bin/true", rounds: 1, runs: 1, links: 1}
	if err := ok.check(); err != nil {
		t.Fatalf("good options refused: %v", err)
	}
	cases := []struct {
		name string
		edit func(*options)
		want string
	}{
		{"no binary", func(o *options) { o.bin = "" }, "-bin is required"},
		{"no playwright", func(o *options) { o.pwCLI = "" }, "-pw is required"},
		{"missing binary", func(o *options) { o.bin = "/nonexistent/agent-backend" }, "-bin /nonexistent/agent-backend"},
		{"missing chromium", func(o *options) { o.chromium = "/nonexistent/chromium" }, "-chromium /nonexistent/chromium"},
		{"missing node", func(o *options) { o.node = "/nonexistent/node" }, "-node /nonexistent/node"},
		{"no rounds", func(o *options) { o.rounds = 0 }, "-rounds 0: must be at least 1"},
		{"no runs", func(o *options) { o.runs = 0 }, "-runs 0: must be at least 1"},
		{"no links", func(o *options) { o.links = 0 }, "-links 0: must be 1 to 10000"},
		{"unknown side", func(o *options) { o.only = "sshd" }, `-only "sshd": must be ours or playwright`},
	}
	for _, c := range cases {
		o := ok
		c.edit(&o)
		err := run(o, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.want)
		}
	}
}

// The page has the links asked for, the last one named as snapshotOK
// looks for it.
func TestPage(t *testing.T) {
	p := page(200)
	if n := strings.Count(p, "<a href="); n != 200 {
		t.Errorf("%d links, want 200", n)
	}
	if !strings.Contains(p, ">Link 200</a>") || strings.Contains(p, "Link 201") {
		t.Errorf("the last link is not Link 200:\n%s", p[len(p)-200:])
	}
}

// The process tree is found at any depth, and its memory and CPU are read
// for each process of it.
func TestProcessTree(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & sh -c 'sleep 30 & wait' & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range descendants(cmd.Process.Pid) {
			if proc, err := os.FindProcess(p); err == nil {
				_ = proc.Kill()
			}
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var kids []int
	for range 200 { // the shells fork as they start
		if kids = descendants(cmd.Process.Pid); len(kids) >= 3 {
			break
		}
		exec.Command("sleep", "0.01").Run()
	}
	// sleep, sh (the inner one) and its sleep.
	if len(kids) < 3 {
		t.Fatalf("descendants of %d: %v, want at least 3 (two sleeps and a shell)", cmd.Process.Pid, kids)
	}
	for _, k := range kids {
		if pp, ok := ppid(k); !ok || (pp != cmd.Process.Pid && !contains(kids, pp)) {
			t.Errorf("pid %d's parent %d is outside the tree", k, pp)
		}
	}
	if kib := pssKiB(cmd.Process.Pid); kib <= 0 {
		t.Errorf("PSS of a running shell: %d KiB", kib)
	}
	cpu := cpuByProcess(cmd.Process.Pid)
	if _, ok := cpu[cmd.Process.Pid]; !ok || len(cpu) < 4 {
		t.Errorf("CPU read for %d processes (%v), want the shell and its 3 descendants", len(cpu), cpu)
	}
	if k := procKind(cmd.Process.Pid); k != "sh" {
		t.Errorf("procKind of the shell: %q", k)
	}
	// A sleep outside the tree runs an executable a process of the tree
	// (not its root) runs.
	outside := exec.Command("sleep", "30")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = outside.Process.Kill(); _ = outside.Wait() }()
	if n := sameExecutable(append([]int{cmd.Process.Pid}, kids...), cmd.Process.Pid); n < 1 {
		t.Errorf("sameExecutable: %d, want the sleep outside the tree counted", n)
	}
	if descendants(os.Getpid()) == nil {
		t.Error("no descendants of the test process, which started the shell")
	}
}

func contains(v []int, x int) bool {
	for _, e := range v {
		if e == x {
			return true
		}
	}
	return false
}

// The table judges each row the way its target reads, and a smoke run
// judges nothing.
func TestTableVerdicts(t *testing.T) {
	peer := []sample{{startMs: 1000, navSnapMs: 150, pssMiB: 500, cpuMs: 90, procs: 10}}
	ours := []sample{{startMs: 1100, navSnapMs: 90, pssMiB: 300, cpuMs: 60, procs: 9}}
	var b bytes.Buffer
	printTable(&b, peer, ours, true)
	out := b.String()
	for _, want := range []string{
		"| navigate + snapshot p50 | 150.0 ms (150.0–150.0) | 90.00 ms (90.00–90.00) | 1.67× | ≥ 1.5× | pass |",
		"| start to first page | 1000.0 ms (1000.0–1000.0) | 1100.0 ms (1100.0–1100.0) | 0.91× | ours ≤ Playwright MCP's | FAIL |",
		"| memory per session (PSS of the process tree) | 500.0 MiB (500.0–500.0) | 300.0 MiB (300.0–300.0) | 1.67× | ≥ 1.5× | pass |",
		"targets: 2 pass, 1 FAIL",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	printTable(&b, peer, ours, false)
	if strings.Contains(b.String(), "FAIL") || strings.Contains(b.String(), "| pass |") {
		t.Errorf("a smoke table judged:\n%s", b.String())
	}
}

// TestSmoke runs the driver as peer.sh --smoke does: both servers, through
// their MCP interface, one round, and checks that each row has figures for
// both. It needs Chromium, Node and Playwright MCP (cd bench && npm ci).
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two browsers; not with -short")
	}
	chromium := testenv.File(t, "/usr/bin/chromium", "apt-get install chromium")
	node := testenv.Command(t, "nodejs", "node")
	cli, _ := filepath.Abs("../node_modules/@playwright/mcp/cli.js")
	testenv.File(t, cli, "cd bench && npm ci")
	bin := filepath.Join(t.TempDir(), "agent-backend")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/agent-backend")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the daemon: %v\n%s", err, out)
	}
	// The daemon's browser sessions go in its TMPDIR, which Chromium (nobody,
	// when the test is root) must reach: one under /tmp, whatever TMPDIR is.
	t.Setenv("TMPDIR", testenv.SharedTempDir(t))
	var b bytes.Buffer
	err := run(options{bin: bin, pwCLI: cli, node: node, chromium: chromium, rounds: 1, runs: 2, links: 200, smoke: true}, &b)
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	figures := regexp.MustCompile(`\| [0-9.]+ (ms|MiB) \([0-9.]+–[0-9.]+\) \| [0-9.]+ (ms|MiB) \(`)
	for _, row := range []string{"navigate + snapshot p50", "start to first page", "memory per session", "CPU per navigate + snapshot"} {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "| "+row) {
				line = l
			}
		}
		if !figures.MatchString(line) || !strings.Contains(line, "(smoke: not judged)") && !strings.HasPrefix(row, "CPU") {
			t.Errorf("row %q: %q\n%s", row, line, out)
		}
	}
}

// peer.sh --help names its options and the driver's, and starts nothing.
func TestPeerScriptHelp(t *testing.T) {
	out, err := exec.Command("bash", "peer.sh", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("peer.sh --help: %v\n%s", err, out)
	}
	for _, want := range []string{"--smoke", "--rev REV", "-rounds N", "-runs N", "-links N", "-chromium PATH", "-only", "-procs", "-keep"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("peer.sh --help lacks %q:\n%s", want, out)
		}
	}
}

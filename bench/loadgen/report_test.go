package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// writeRounds writes each round as `loadgen run`, `floors` and `features`
// do, and returns the files.
func writeRounds(t *testing.T, rounds ...roundResult) []string {
	t.Helper()
	dir := t.TempDir()
	var files []string
	for i, r := range rounds {
		f := filepath.Join(dir, fmt.Sprintf("%s-%d.json", r.Name, i))
		if err := writeJSON(f, &r); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// row finds the table row that starts with "| what | figure |" and names
// floor, and returns its cells.
func row(t *testing.T, out, what, floor string) []string {
	t.Helper()
	for line := range strings.SplitSeq(out, "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) == 7 && cells[0] == "| "+what && cells[2] == floor {
			return cells
		}
	}
	t.Fatalf("no row %q against %q in:\n%s", what, floor, out)
	return nil
}

// The floor table shows every floor target of issue 34 with its figure,
// its floor, the ratio, the target and the verdict, the medians over
// rounds; and the spread table has each of them.
func TestReportFloorTargets(t *testing.T) {
	ours := func(read, exec, ssh, rss, idle float64) roundResult {
		return roundResult{Name: "ours", Metrics: map[string]float64{
			"mcp_read_p50_ms": read, "mcp_exec_true_p50_ms": exec, "ssh_exec_true_p50_ms": ssh,
			"rss_ready_mib": rss, "rss_idle_conn_kib": idle}}
	}
	floors := func(echo, fork float64) roundResult {
		return roundResult{Name: "floors", Metrics: map[string]float64{
			"echo_p50_ms": echo, "echo_proc_p50_ms": echo, "fork_true_p50_ms": fork, "fork_shell_p50_ms": 2 * fork}}
	}
	features := func(rss, routed, direct, preview, previewDirect float64) roundResult {
		return roundResult{Name: "features", Metrics: map[string]float64{
			"rss_ready_all_mib": rss, "upstream_routed_p50_ms": routed, "upstream_direct_p50_ms": direct,
			"preview_p50_ms": preview, "preview_direct_p50_ms": previewDirect}}
	}
	files := writeRounds(t,
		// Medians: read 0.3, exec 1.1, SSH exec 1.4, RSS 15.5 MiB, idle 45 KiB.
		ours(0.3, 1.1, 1.4, 15.5, 45), ours(0.2, 1.0, 1.3, 15, 40), ours(0.4, 1.2, 1.5, 17, 50),
		roundResult{Name: "reference", Metrics: map[string]float64{"mcp_read_p50_ms": 3}},
		// Medians: echo 0.25, fork/exec 1.
		floors(0.25, 1), floors(0.2, 0.9), floors(0.3, 1.1),
		// Medians: RSS 30 MiB, routed 0.2 against 0.1 (2×: the limit
		// passes), preview 0.5 against 0.25 (2×, over 1.5×).
		features(30, 0.2, 0.1, 0.5, 0.25), features(29, 0.19, 0.09, 0.4, 0.24), features(31, 0.3, 0.11, 0.6, 0.26))
	var b bytes.Buffer
	if err := report(&b, files, "ours", "reference", true); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	cases := []struct {
		what, floor             string
		figure, floorFig, ratio string
		target, verdict         string
	}{
		{"MCP read 4 KiB p50", "the same echo as its own process", "0.300 ms", "0.250 ms", "1.20×", "≤ 1.5×", "pass"},
		{"MCP exec `true` p50", "fork/exec `/bin/true`", "1.10 ms", "1.00 ms", "1.10×", "≤ 1.2×", "pass"},
		{"SSH exec `true` p50", "fork/exec `/bin/true`", "1.40 ms", "1.00 ms", "1.40×", "≤ 1.3×", "FAIL"},
		{"RSS at ready (no optional feature on)", "—", "15.5 MiB", "—", "—", "≤ 16.0 MiB", "pass"},
		{"RSS at ready (every optional feature on)", "—", "30.0 MiB", "—", "—", "", ""},
		{"RSS per idle WS+SSH connection (200)", "—", "45.0 KiB", "—", "—", "≤ 40.0 KiB", "FAIL"},
		{"routed upstream call p50 (`echo__echo` through /mcp)", "the same call straight to the server (its pipes)",
			"0.200 ms", "0.100 ms", "2.00×", "≤ 2×", "pass"},
		{"small GET through `/preview/` p50", "the same GET straight to the server", "0.500 ms", "0.250 ms", "2.00×", "≤ 1.5×", "FAIL"},
		{"MCP exec `true` p50", "fork/exec `bash -c true`", "1.10 ms", "2.00 ms", "0.55×", "", ""},
	}
	for _, c := range cases {
		got := row(t, out, c.what, c.floor)
		want := []string{"| " + c.what, c.figure, c.floor, c.floorFig, c.ratio, c.target, c.verdict + " |"}
		if c.verdict == "" {
			want[6] = " |"
		}
		if strings.Join(got, " | ") != strings.Join(want, " | ") {
			t.Errorf("row %q against %q:\n got %s\nwant %s", c.what, c.floor, strings.Join(got, " | "), strings.Join(want, " | "))
		}
	}
	// Judged above: read (in process, 1.2× of 3×, and as a process), exec,
	// RSS at ready, routed: pass; SSH exec, idle, preview: FAIL. The
	// executor rows have no figures here: n/a, counted in neither.
	if !strings.Contains(out, "floor targets: 5 pass, 3 fail\n") {
		t.Errorf("no floor count 5 pass, 3 fail in:\n%s", out)
	}
	for _, spread := range []string{
		"| small GET through `/preview/` p50 | 0.400 ms – 0.600 ms | the same GET straight to the server | 0.240 ms – 0.260 ms |",
		"| routed upstream call p50 (`echo__echo` through /mcp) | 0.190 ms – 0.300 ms | the same call straight to the server (its pipes) | 0.090 ms – 0.110 ms |",
		"| MCP exec `true` p50 | 1.00 ms – 1.20 ms | fork/exec `/bin/true` | 0.900 ms – 1.10 ms |",
		"| RSS at ready (every optional feature on) | 29.0 MiB – 31.0 MiB | — | — |",
		"| RSS per idle WS+SSH connection (200) | 40.0 KiB – 50.0 KiB | — | — |",
	} {
		if !strings.Contains(out, spread) {
			t.Errorf("spread table lacks %q:\n%s", spread, out)
		}
	}
}

// A smoke run judges nothing; a run without a features round (an older
// --rev) shows its rows as n/a rather than failing or passing them.
func TestReportSmokeAndMissing(t *testing.T) {
	files := writeRounds(t,
		roundResult{Name: "ours", Metrics: map[string]float64{"mcp_exec_true_p50_ms": 1, "rss_ready_mib": 20}},
		roundResult{Name: "reference", Metrics: map[string]float64{"mcp_exec_true_p50_ms": 10}},
		roundResult{Name: "floors", Metrics: map[string]float64{"fork_true_p50_ms": 1}})
	var b bytes.Buffer
	if err := report(&b, files, "ours", "reference", false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if got := row(t, out, "RSS at ready (no optional feature on)", "—")[6]; got != "(smoke) |" {
		t.Errorf("smoke verdict %q", got)
	}
	if strings.Contains(out, "floor targets:") || strings.Contains(out, "FAIL") || strings.Contains(out, "pass") {
		t.Errorf("a smoke run judged:\n%s", out)
	}
	b.Reset()
	if err := report(&b, files, "ours", "reference", true); err != nil {
		t.Fatal(err)
	}
	out = b.String()
	if got := row(t, out, "small GET through `/preview/` p50", "the same GET straight to the server"); got[1] != "—" || got[6] != "n/a |" {
		t.Errorf("preview without a features round: %q", got)
	}
	if got := row(t, out, "RSS at ready (no optional feature on)", "—")[6]; got != "FAIL |" {
		t.Errorf("RSS at ready 20 MiB against ≤ 16 MiB: %q", got)
	}
}

// The two servers of the features round, as the daemon and the load
// generator start them: echo-mcp-stdio behind its raw line client, and
// http-serve saying where it listens and answering the small body.
func TestFeatureServers(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "loadgen")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "echo-mcp-stdio")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e := &echoMCP{cmd: cmd, in: in, out: bufio.NewReader(out)}
	for _, text := range []string{"hello", "two\nlines", ""} {
		got, err := e.call(text)
		if err != nil || got != text {
			t.Errorf("call(%q) = %q, %v", text, got, err)
		}
	}
	e.close()

	srv := exec.Command(bin, "http-serve")
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	port, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		t.Fatalf("http-serve said %q, %v", line, err)
	}
	resp, err := http.Get("http://127.0.0.1:" + port + "/any/path")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != smallBody {
		t.Errorf("GET: %d %q, want 200 %q", resp.StatusCode, body, smallBody)
	}
}

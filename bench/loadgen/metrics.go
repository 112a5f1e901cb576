package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// metric describes one row of the comparison table.
type metric struct {
	Key    string
	Label  string
	Unit   string  // ms, ops/s, MiB/s, MiB, KiB, s
	Lower  bool    // lower is better (latency, memory, time)
	Target float64 // required ratio (>1 = we are better); 0 = none
	RefVM  string  // the reference's figure on a 2-core VM, the baseline its target was set against
}

// metrics is the table, in the order it is printed.
var metrics = []metric{
	{"mcp_read_p50_ms", "MCP read_text_file 4 KiB p50", "ms", true, 10, "≈3.2 ms"},
	{"mcp_read_p90_ms", "MCP read_text_file 4 KiB p90", "ms", true, 0, ""},
	{"mcp_read_p99_ms", "MCP read_text_file 4 KiB p99", "ms", true, 0, ""},
	{"mcp_read_seq_ops", "MCP read 4 KiB, 1 client, sequential", "calls/s", false, 0, ""},
	{"mcp_read_c8_ops", "MCP read 4 KiB, 8 concurrent clients", "calls/s", false, 14, "≈365 calls/s"},
	{"mcp_list100_p50_ms", "MCP list_directory (100 files) p50", "ms", true, 10, "≈5.2 ms"},
	{"mcp_exec_true_p50_ms", "MCP exec `true` p50", "ms", true, 7, "≈11.7 ms"},
	{"ssh_handshake_p50_ms", "WS+SSH handshake p50", "ms", true, 2, "≈4.8 ms"},
	{"ssh_exec_true_p50_ms", "SSH exec `true` p50", "ms", true, 3.5, "≈5.6 ms"},
	{"sftp_write4k_p50_ms", "SFTP 4 KiB create+write+close p50", "ms", true, 1.7, "≈2.0 ms"},
	{"sftp_read4k_p50_ms", "SFTP 4 KiB open+read+close p50", "ms", true, 1.7, "≈2.0 ms"},
	{"sftp_up_mibs", "SFTP 64 MiB upload", "MiB/s", false, 1.5, "≈145 MiB/s"},
	{"sftp_down_mibs", "SFTP 64 MiB download", "MiB/s", false, 1.5, "≈185 MiB/s"},
	{"rss_idle_conn_kib", "RSS per idle WS+SSH connection (200)", "KiB", true, 2, "≈100 KiB"},
	{"start_healthy_ms", "start to healthy", "ms", true, 20, "≈520 ms"},
	{"rss_ready_mib", "RSS at ready", "MiB", true, 5, "≈87 MiB"},
	{"rss_peak_mib", "peak RSS under MCP load", "MiB", true, 5, "≈200 MiB"},
}

// floorRow is one row of the table against the floors: a figure of ours
// beside what the same work costs without the daemon, measured in the same
// run, or a figure with an absolute target of its own.
type floorRow struct {
	What   string
	Source string // the round the figure comes from: "" is the daemon under test, or "floors", "features"
	Key    string
	Unit   string // ms, MiB, KiB
	// Floor names the floor; FloorKey is its figure, from FloorSource's
	// rounds. An empty FloorKey is a row without a floor.
	Floor, FloorSource, FloorKey string
	// Limit is the target for the ratio figure/floor (≤); Max the target
	// for the figure itself (≤, in Unit). Zero: shown, not judged.
	Limit, Max float64
}

// floorRows is the table against the floors, in the order it is printed:
// every floor target of issue 34 first, then the floors that explain the
// other figures.
var floorRows = []floorRow{
	{What: "MCP read 4 KiB p50", Key: "mcp_read_p50_ms", Unit: "ms",
		Floor: "net/http JSON-RPC echo (reads the file)", FloorSource: "floors", FloorKey: "echo_p50_ms", Limit: 3},
	{What: "MCP read 4 KiB p50", Key: "mcp_read_p50_ms", Unit: "ms",
		Floor: "the same echo as its own process", FloorSource: "floors", FloorKey: "echo_proc_p50_ms", Limit: 1.5},
	{What: "MCP exec `true` p50", Key: "mcp_exec_true_p50_ms", Unit: "ms",
		Floor: "fork/exec `/bin/true`", FloorSource: "floors", FloorKey: "fork_true_p50_ms", Limit: 1.2},
	{What: "SSH exec `true` p50", Key: "ssh_exec_true_p50_ms", Unit: "ms",
		Floor: "fork/exec `/bin/true`", FloorSource: "floors", FloorKey: "fork_true_p50_ms", Limit: 1.3},
	{What: "RSS at ready (no optional feature on)", Key: "rss_ready_mib", Unit: "MiB", Max: 16},
	{What: "RSS at ready (every optional feature on)", Source: "features", Key: "rss_ready_all_mib", Unit: "MiB"},
	{What: "RSS per idle WS+SSH connection (200)", Key: "rss_idle_conn_kib", Unit: "KiB", Max: 40},
	{What: "routed upstream call p50 (`echo__echo` through /mcp)", Source: "features", Key: "upstream_routed_p50_ms", Unit: "ms",
		Floor: "the same call straight to the server (its pipes)", FloorSource: "features", FloorKey: "upstream_direct_p50_ms", Limit: 2},
	{What: "small GET through `/preview/` p50", Source: "features", Key: "preview_p50_ms", Unit: "ms",
		Floor: "the same GET straight to the server", FloorSource: "features", FloorKey: "preview_direct_p50_ms", Limit: 1.5},
	{What: "MCP exec `true` p50", Key: "mcp_exec_true_p50_ms", Unit: "ms",
		Floor: "fork/exec `bash -c true`", FloorSource: "floors", FloorKey: "fork_shell_p50_ms"},
	{What: "SSH exec `true` p50", Key: "ssh_exec_true_p50_ms", Unit: "ms",
		Floor: "fork/exec `bash -c true`", FloorSource: "floors", FloorKey: "fork_shell_p50_ms"},
	{What: "SFTP 4 KiB create+write+close p50", Key: "sftp_write4k_p50_ms", Unit: "ms",
		Floor: "the same on the local file system", FloorSource: "floors", FloorKey: "fs_create4k_p50_ms"},
	{What: "SFTP 4 KiB open+read+close p50", Key: "sftp_read4k_p50_ms", Unit: "ms",
		Floor: "the same on the local file system", FloorSource: "floors", FloorKey: "fs_read4k_p50_ms"},
	{What: "executor software Run `true` p50", Source: "floors", Key: "executor_software_p50_ms", Unit: "ms",
		Floor: "fork/exec `bash -c true`", FloorSource: "floors", FloorKey: "fork_shell_p50_ms", Limit: 1.5},
	{What: "executor software Run `true` p50", Source: "floors", Key: "executor_software_p50_ms", Unit: "ms",
		Floor: "fork/exec `/bin/true`", FloorSource: "floors", FloorKey: "fork_true_p50_ms"},
	{What: "executor none Run `true` p50", Source: "floors", Key: "executor_none_p50_ms", Unit: "ms",
		Floor: "fork/exec `bash -c true`", FloorSource: "floors", FloorKey: "fork_shell_p50_ms"},
	{What: "executor bwrap Run `true` p50", Source: "floors", Key: "executor_bwrap_p50_ms", Unit: "ms",
		Floor: "bare `bwrap … bash -c true`", FloorSource: "floors", FloorKey: "bwrap_shell_p50_ms", Limit: 1.3},
	{What: "executor bwrap Run `true` p50", Source: "floors", Key: "executor_bwrap_p50_ms", Unit: "ms",
		Floor: "bare `bwrap … /bin/true`", FloorSource: "floors", FloorKey: "bwrap_true_p50_ms"},
}

// source is the name of the rounds the row's figure comes from, a being
// the daemon under test.
func (r floorRow) source(a string) string {
	if r.Source == "" {
		return a
	}
	return r.Source
}

// values are the row's figure, its floor's and their ratio, each the
// median over rounds (NaN where missing).
func (r floorRow) values(med func(name, key string) float64, a string) (x, floor, ratio float64) {
	x, floor, ratio = med(r.source(a), r.Key), math.NaN(), math.NaN()
	if r.FloorKey != "" {
		floor = med(r.FloorSource, r.FloorKey)
		ratio = x / floor
	}
	return x, floor, ratio
}

// judge gives the row's target text and verdict: "" for a row without a
// target, "(smoke)" when not judging, "n/a" when a figure is missing.
func (r floorRow) judge(x, ratio float64, judge bool) (target, verdict string) {
	var got, limit float64
	switch {
	case r.Limit > 0:
		target, got, limit = fmt.Sprintf("≤ %g×", r.Limit), ratio, r.Limit
	case r.Max > 0:
		target, got, limit = "≤ "+fmtVal(r.Max, r.Unit), x, r.Max
	default:
		return "", ""
	}
	switch {
	case !judge:
		return target, "(smoke)"
	case math.IsNaN(got) || math.IsInf(got, 0):
		return target, "n/a"
	case got <= limit:
		return target, "pass"
	default:
		return target, "FAIL"
	}
}

// latencies collects durations and answers percentiles in milliseconds.
type latencies []time.Duration

func (l latencies) pct(p float64) float64 {
	if len(l) == 0 {
		return math.NaN()
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	i = max(0, min(i, len(s)-1))
	return float64(s[i].Nanoseconds()) / 1e6
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

package main

import (
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

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// report reads round results and prints the comparison table: the median
// over rounds of each metric for a and b, ratio (>1 = a is better), and the
// metric's target (metrics.go). judge=false (smoke runs) prints no pass/fail.
func report(w io.Writer, files []string, a, b string, judge bool) error {
	runs := map[string][]map[string]float64{}
	var notes []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r roundResult
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		runs[r.Name] = append(runs[r.Name], r.Metrics)
		for _, n := range r.Notes {
			notes = append(notes, r.Name+": "+n)
		}
	}
	med := func(name, key string) float64 {
		var v []float64
		for _, m := range runs[name] {
			if x, ok := m[key]; ok && !math.IsNaN(x) {
				v = append(v, x)
			}
		}
		return median(v)
	}
	fmt.Fprintf(w, "%s: %d rounds, %s: %d rounds; each figure is the median over rounds.\n\n", a, len(runs[a]), b, len(runs[b]))
	fmt.Fprintf(w, "| metric | %s | %s | ratio | target | |\n|---|---:|---:|---:|---:|---|\n", a, b)
	pass, fail := 0, 0
	for _, mt := range metrics {
		x, y := med(a, mt.Key), med(b, mt.Key)
		ratio := y / x
		if !mt.Lower {
			ratio = x / y
		}
		target, verdict := "", ""
		if mt.Target > 0 {
			target = fmt.Sprintf("≥ %g×", mt.Target)
			switch {
			case !judge:
				verdict = "(smoke)"
			case math.IsNaN(ratio) || math.IsInf(ratio, 0):
				verdict = "n/a"
			case ratio >= mt.Target:
				verdict, pass = "pass", pass+1
			default:
				verdict, fail = "FAIL", fail+1
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", mt.Label, fmtVal(x, mt.Unit), fmtVal(y, mt.Unit), fmtRatio(ratio), target, verdict)
	}
	if judge {
		fmt.Fprintf(w, "\ntargets: %d pass, %d fail\n", pass, fail)
	}

	if fl := runs["floors"]; len(fl) > 0 {
		fmt.Fprintf(w, "\nAgainst the floors (same machine, same run; ratio = %s / floor, lower is better):\n\n", a)
		fmt.Fprintf(w, "| %s | figure | floor | figure | ratio | target | |\n|---|---:|---|---:|---:|---:|---|\n", a)
		row := func(what string, x float64, floorName string, f float64, limit float64) {
			r := x / f
			verdict := ""
			if limit > 0 {
				switch {
				case !judge:
					verdict = "(smoke)"
				case math.IsNaN(r):
					verdict = "n/a"
				case r <= limit:
					verdict = "pass"
				default:
					verdict = "FAIL"
				}
			}
			lim := ""
			if limit > 0 {
				lim = fmt.Sprintf("≤ %g×", limit)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", what, fmtVal(x, "ms"), floorName, fmtVal(f, "ms"), fmtRatio(r), lim, verdict)
		}
		fm := func(k string) float64 { return med("floors", k) }
		row("MCP read 4 KiB p50", med(a, "mcp_read_p50_ms"), "net/http JSON-RPC echo (reads the file)", fm("echo_p50_ms"), 3)
		row("MCP read 4 KiB p50", med(a, "mcp_read_p50_ms"), "the same echo as its own process", fm("echo_proc_p50_ms"), 1.5)
		row("MCP exec `true` p50", med(a, "mcp_exec_true_p50_ms"), "fork/exec `bash -c true`", fm("fork_shell_p50_ms"), 0)
		row("SSH exec `true` p50", med(a, "ssh_exec_true_p50_ms"), "fork/exec `bash -c true`", fm("fork_shell_p50_ms"), 0)
		row("SFTP 4 KiB create+write+close p50", med(a, "sftp_write4k_p50_ms"), "the same on the local file system", fm("fs_create4k_p50_ms"), 0)
		row("SFTP 4 KiB open+read+close p50", med(a, "sftp_read4k_p50_ms"), "the same on the local file system", fm("fs_read4k_p50_ms"), 0)
		row("executor software Run `true` p50", fm("executor_software_p50_ms"), "fork/exec `bash -c true`", fm("fork_shell_p50_ms"), 1.5)
		row("executor software Run `true` p50", fm("executor_software_p50_ms"), "fork/exec `/bin/true`", fm("fork_true_p50_ms"), 0)
		row("executor none Run `true` p50", fm("executor_none_p50_ms"), "fork/exec `bash -c true`", fm("fork_shell_p50_ms"), 0)
		row("executor bwrap Run `true` p50", fm("executor_bwrap_p50_ms"), "bare `bwrap … bash -c true`", fm("bwrap_shell_p50_ms"), 1.3)
		row("executor bwrap Run `true` p50", fm("executor_bwrap_p50_ms"), "bare `bwrap … /bin/true`", fm("bwrap_true_p50_ms"), 0)
	}
	for _, name := range []string{a, b} {
		var eofs, rounds int
		for _, m := range runs[name] {
			if m["ssh_exec_eof"] > 0 {
				eofs += int(m["ssh_exec_eof"])
				rounds++
			}
		}
		if eofs > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d SSH exec calls in %d rounds ended in EOF (the channel closed before the exec request was answered); they were retried and not timed", name, eofs, rounds))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\nnotes:\n- %s\n", strings.Join(notes, "\n- "))
	}
	if judge && len(runs[a]) > 1 {
		spread := func(name, key, unit string) string {
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, m := range runs[name] {
				if x, ok := m[key]; ok {
					lo, hi = math.Min(lo, x), math.Max(hi, x)
				}
			}
			if math.IsInf(lo, 0) {
				return "—"
			}
			return fmtVal(lo, unit) + " – " + fmtVal(hi, unit)
		}
		fmt.Fprintf(w, "\nSpread over rounds (lowest – highest):\n\n| metric | %s | %s |\n|---|---:|---:|\n", a, b)
		for _, mt := range metrics {
			fmt.Fprintf(w, "| %s | %s | %s |\n", mt.Label, spread(a, mt.Key, mt.Unit), spread(b, mt.Key, mt.Unit))
		}
	}
	return nil
}

func fmtVal(v float64, unit string) string {
	if math.IsNaN(v) {
		return "—"
	}
	switch unit {
	case "ms":
		switch {
		case v < 1:
			return fmt.Sprintf("%.3f ms", v)
		case v < 10:
			return fmt.Sprintf("%.2f ms", v)
		default:
			return fmt.Sprintf("%.1f ms", v)
		}
	case "MiB", "MiB/s":
		return fmt.Sprintf("%.1f %s", v, unit)
	case "KiB":
		return fmt.Sprintf("%.1f %s", v, unit)
	default:
		return fmt.Sprintf("%.0f %s", v, unit)
	}
}

func fmtRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "—"
	}
	if r >= 10 {
		return fmt.Sprintf("%.0f×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

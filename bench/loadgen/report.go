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

	if len(runs["floors"]) > 0 || len(runs["features"]) > 0 {
		fmt.Fprintf(w, "\nAgainst the floors (same machine, same run; ratio = %s / floor, lower is better; a target without a floor is the figure's own):\n\n", a)
		fmt.Fprintf(w, "| %s | figure | floor | figure | ratio | target | |\n|---|---:|---|---:|---:|---:|---|\n", a)
		pass, fail := 0, 0
		for _, fr := range floorRows {
			x, f, ratio := fr.values(med, a)
			target, verdict := fr.judge(x, ratio, judge)
			switch verdict {
			case "pass":
				pass++
			case "FAIL":
				fail++
			}
			floorName, floorVal, ratioText := "—", "—", "—"
			if fr.FloorKey != "" {
				floorName, floorVal, ratioText = fr.Floor, fmtVal(f, fr.Unit), fmtRatio(ratio)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", fr.What, fmtVal(x, fr.Unit), floorName, floorVal, ratioText, target, verdict)
		}
		if judge {
			fmt.Fprintf(w, "\nfloor targets: %d pass, %d fail\n", pass, fail)
		}
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
	if judge && (len(runs[a]) > 1 || len(runs["features"]) > 1) {
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
		if len(runs["floors"]) > 0 || len(runs["features"]) > 0 {
			fmt.Fprintf(w, "\nSpread over rounds against the floors (lowest – highest):\n\n| %s | spread | floor | spread |\n|---|---:|---|---:|\n", a)
			for _, fr := range floorRows {
				floorName, floorSpread := "—", "—"
				if fr.FloorKey != "" {
					floorName, floorSpread = fr.Floor, spread(fr.FloorSource, fr.FloorKey, fr.Unit)
				}
				fmt.Fprintf(w, "| %s | %s | %s | %s |\n", fr.What, spread(fr.source(a), fr.Key, fr.Unit), floorName, floorSpread)
			}
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

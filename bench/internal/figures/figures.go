// Package figures holds what the peer benchmarks (bench/sshd and
// bench/browser) print their rows with: medians, milliseconds, numbers at
// the precision the tables show, and the machine's load average.
package figures

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Median is the median of v, 0 for none.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Ms is d in milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Num prints v with three significant figures for small values, one
// decimal from 100 on.
func Num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// LoadAvg is the first three fields of /proc/loadavg, "?" when unreadable.
func LoadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

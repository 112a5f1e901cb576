// Package procstat reads what the benchmark programs (bench/loadgen,
// bench/browser, bench/sshd, bench/burst) measure a process by: its parent
// and CPU time from /proc/PID/stat, and its memory figures from
// /proc/PID/status.
package procstat

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Tick is one clock tick of /proc/PID/stat's times (USER_HZ, 100 on every
// Linux architecture Go runs on).
const Tick = 10 * time.Millisecond

// Stat is what the benchmarks read of /proc/PID/stat.
type Stat struct {
	PPID int
	// CPU is the user + system time of the process's own threads;
	// Children that of the children it has waited for.
	CPU, Children time.Duration
}

// Read reads /proc/PID/stat of pid.
func Read(pid int) (Stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, err
	}
	return parse(string(b))
}

// parse reads a /proc/PID/stat line. The command name (field 2) is in
// parentheses and may hold spaces and parentheses itself, so fields are
// counted from after the last closing one.
func parse(s string) (Stat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Stat{}, errors.New("/proc/PID/stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return Stat{}, fmt.Errorf("/proc/PID/stat: %d fields after the command name, want 15 or more", len(f))
	}
	// After the name: state ppid … utime stime cutime cstime (fields 14-17
	// of the line, 11-14 here).
	var n [5]int64
	for j, k := range []int{1, 11, 12, 13, 14} {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return Stat{}, fmt.Errorf("/proc/PID/stat: field %d: %w", k+3, err)
		}
		n[j] = v
	}
	return Stat{
		PPID:     int(n[0]),
		CPU:      time.Duration(n[1]+n[2]) * Tick,
		Children: time.Duration(n[3]+n[4]) * Tick,
	}, nil
}

// StatusKiB reads one figure of /proc/PID/status given in kB ("VmRSS",
// "VmHWM", "RssAnon", …).
func StatusKiB(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", key, pid)
}

package metrics

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"strconv"
	"strings"
)

// userHZ is the kernel's clock tick for /proc's times (USER_HZ, 100 on
// every Linux the daemon runs on; procfs, which client_golang reads them
// with, assumes the same).
const userHZ = 100

// The process collector's families, client_golang's process collector's
// names and HELP texts.
var (
	procCPU      = desc{name: "process_cpu_seconds_total", help: "Total user and system CPU time spent in seconds."}
	procOpenFDs  = desc{name: "process_open_fds", help: "Number of open file descriptors."}
	procMaxFDs   = desc{name: "process_max_fds", help: "Maximum number of open file descriptors."}
	procVsize    = desc{name: "process_virtual_memory_bytes", help: "Virtual memory size in bytes."}
	procMaxVsize = desc{name: "process_virtual_memory_max_bytes", help: "Maximum amount of virtual memory available in bytes."}
	procRSS      = desc{name: "process_resident_memory_bytes", help: "Resident memory size in bytes."}
	procStart    = desc{name: "process_start_time_seconds", help: "Start time of the process since unix epoch in seconds."}
	procNetIn    = desc{name: "process_network_receive_bytes_total", help: "Number of bytes received by the process over the network."}
	procNetOut   = desc{name: "process_network_transmit_bytes_total", help: "Number of bytes sent by the process over the network."}
)

// processCollector writes the daemon's own process figures from /proc/self,
// as client_golang's process collector does; a file it cannot read leaves
// its figures out of that scrape, as there.
type processCollector struct{}

// NewProcessCollector returns the process's CPU time, memory, descriptors,
// start time and network bytes (of its network namespace), read from
// /proc/self at each scrape.
func NewProcessCollector() Collector { return processCollector{} }

func (processCollector) names() []string {
	return []string{procCPU.name, procOpenFDs.name, procMaxFDs.name, procVsize.name, procMaxVsize.name,
		procRSS.name, procStart.name, procNetIn.name, procNetOut.name}
}

func (processCollector) collect(dst []family) []family {
	if st, ok := readStat(); ok {
		dst = append(dst, gaugeFamily(&procCPU, "counter", float64(st.utime+st.stime)/userHZ),
			gaugeFamily(&procVsize, "gauge", float64(st.vsize)),
			gaugeFamily(&procRSS, "gauge", float64(st.rss)*float64(os.Getpagesize())))
		if boot, ok := bootTime(); ok {
			dst = append(dst, gaugeFamily(&procStart, "gauge", float64(boot)+float64(st.start)/userHZ))
		}
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		// The descriptor ReadDir itself holds is counted, as procfs counts it.
		dst = append(dst, gaugeFamily(&procOpenFDs, "gauge", float64(len(ents))))
	}
	if files, space, ok := readLimits(); ok {
		dst = append(dst, gaugeFamily(&procMaxFDs, "gauge", files), gaugeFamily(&procMaxVsize, "gauge", space))
	}
	if in, out, ok := readNetstat(); ok {
		dst = append(dst, gaugeFamily(&procNetIn, "counter", in), gaugeFamily(&procNetOut, "counter", out))
	}
	return dst
}

// procStat is what the collector uses of /proc/self/stat.
type procStat struct {
	utime, stime, start, vsize, rss uint64
}

func readStat() (procStat, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime is field 14, stime 15, starttime 22,
	// vsize 23, rss 24.
	if len(f) < 22 {
		return procStat{}, false
	}
	var st procStat
	for _, x := range []struct {
		dst   *uint64
		field int
	}{{&st.utime, 14}, {&st.stime, 15}, {&st.start, 22}, {&st.vsize, 23}, {&st.rss, 24}} {
		v, err := strconv.ParseUint(f[x.field-3], 10, 64)
		if err != nil {
			return procStat{}, false
		}
		*x.dst = v
	}
	return st, true
}

// bootTime is /proc/stat's btime, seconds since the epoch.
func bootTime() (uint64, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// readLimits is the soft limits of open files and address space from
// /proc/self/limits; "unlimited" is the largest uint64, as procfs reads it.
func readLimits() (files, space float64, ok bool) {
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return 0, 0, false
	}
	var haveFiles, haveSpace bool
	for line := range strings.SplitSeq(string(b), "\n") {
		// "Max open files            1024                 1048576              files"
		var dst *float64
		var rest string
		switch {
		case strings.HasPrefix(line, "Max open files"):
			dst, rest, haveFiles = &files, line[len("Max open files"):], true
		case strings.HasPrefix(line, "Max address space"):
			dst, rest, haveSpace = &space, line[len("Max address space"):], true
		default:
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, 0, false
		}
		if f[0] == "unlimited" {
			*dst = float64(math.MaxUint64)
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, 0, false
		}
		*dst = float64(n)
	}
	return files, space, haveFiles && haveSpace
}

// readNetstat is IpExt's InOctets and OutOctets from /proc/self/net/netstat
// (the network namespace's, as procfs reads them): a header line of names,
// then a line of values.
func readNetstat() (in, out float64, ok bool) {
	f, err := os.Open("/proc/self/net/netstat")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var names []string
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "IpExt:") {
			continue
		}
		if names == nil {
			names = strings.Fields(line)
			continue
		}
		values := strings.Fields(line)
		for i, n := range names {
			if i >= len(values) {
				break
			}
			v, err := strconv.ParseFloat(values[i], 64)
			if err != nil {
				continue
			}
			switch n {
			case "InOctets":
				in = v
			case "OutOctets":
				out = v
			}
		}
		return in, out, true
	}
	return 0, 0, false
}

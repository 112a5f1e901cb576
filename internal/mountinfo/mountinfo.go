// Package mountinfo parses the kernel's mount table (proc(5)'s
// /proc/PID/mountinfo, read by its callers): the one parser of its lines,
// for the cgroup hierarchies sandbox finds and the bind mounts
// internal/resolvepath places.
package mountinfo

import (
	"strconv"
	"strings"
)

// Mount is one line of the table:
//
//	id parent maj:min root mountpoint options [optional...] - fstype source superoptions
type Mount struct {
	Dev   string // the filesystem's device, "maj:min"
	Root  string // the directory of that filesystem mounted, "/" for the whole
	Point string // where it is mounted
	// After the "-": empty on a line without it.
	FSType, Source, Super string
}

// Parse returns the mounts of the table in data, in its order, with the
// octal escapes of paths (\040 for a space) undone. A line of fewer than
// five fields is skipped.
func Parse(data []byte) []Mount {
	var out []Mount
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		m := Mount{Dev: f[2], Root: unescape(f[3]), Point: unescape(f[4])}
		for i := 5; i < len(f); i++ {
			if f[i] == "-" {
				if len(f) >= i+4 {
					m.FSType, m.Source, m.Super = f[i+1], f[i+2], f[i+3]
				}
				break
			}
		}
		out = append(out, m)
	}
	return out
}

// unescape undoes the table's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

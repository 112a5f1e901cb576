package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCutLineDoesNotSwallowTheNext: a write cut short (the disk filled
// up in the middle of a line: RLIMIT_FSIZE stands in for it, and a power
// cut leaves the same) leaves a partial line at the end of the log. The
// next line, once space returns, and the first line of the next start,
// begin on a line of their own, so every record after the cut parses;
// before, the next record was glued to the cut one and a line-by-line
// reader lost both.
func TestCutLineDoesNotSwallowTheNext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	l.Write(Record{Tool: "t1", Outcome: "ok"})
	waitUntil(t, func() bool { b, _ := os.ReadFile(path); return bytes.Count(b, []byte("\n")) == 1 })
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	// The disk fills 20 bytes into the next line (Go ignores SIGXFSZ:
	// the write returns what fit, then EFBIG).
	full := syscall.Rlimit{Cur: uint64(fi.Size()) + 20, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &full); err != nil {
		t.Fatal(err)
	}
	l.Write(Record{Tool: "t2", Outcome: "ok"})
	waitUntil(t, func() bool { return l.WriteErrors() == 1 })
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	l.Write(Record{Tool: "t3", Outcome: "ok"}) // space is back
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The next start finds the log ending in a cut line too (as a power
	// cut leaves it).
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"time":"2026-11-28T17:`)
	f.Close()
	l, err = Open(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	l.Write(Record{Tool: "t4", Outcome: "ok"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	data, _ := os.ReadFile(path)
	var tools []string
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var r Record
		if json.Unmarshal([]byte(line), &r) == nil {
			tools = append(tools, r.Tool)
		}
	}
	if strings.Join(tools, ",") != "t1,t3,t4" {
		t.Fatalf("records that parse: %v, want t1,t3,t4 (t2 was cut by the full disk); the log:\n%s", tools, data)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for range 5000 {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("condition not reached in 5 s")
}

package audit

import (
	"encoding/json"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestAttackAuditDropPoint drives the queue to its drop point with a writer
// that never returns: 8 goroutines write 20,000 lines; exactly the queue's
// DefaultQueue lines wait (one more is in the writer's hands), every other
// one is dropped and counted, no Write blocks, and the daemon's log hears
// of the drops once (rate-limited), naming the metric. Once the writer
// moves, the file says how many lines were lost.
func TestAttackAuditDropPoint(t *testing.T) {
	w := &stuck{release: make(chan struct{})}
	var logged syncbuf.Buffer
	l, err := Open(Options{Path: "-", Stderr: w, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 2500
	began := time.Now()
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				l.Write(Record{Tool: "t", Outcome: "ok"})
			}
		}()
	}
	wg.Wait()
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("20,000 writes took %v behind a stuck writer: Write blocks", d)
	}
	dropped := l.Dropped()
	// The writer took one line (or none yet) and blocks in it; the queue
	// holds DefaultQueue more.
	if kept := writers*each - int(dropped); kept < DefaultQueue || kept > DefaultQueue+1 {
		t.Errorf("kept %d of %d lines (dropped %d); want the queue's %d (+1 in the writer)", kept, writers*each, dropped, DefaultQueue)
	}
	if n := strings.Count(logged.String(), "lines are dropped"); n != 1 {
		t.Errorf("the daemon's log reported the drops %d times; want once (rate-limited):\n%s", n, logged.String())
	}
	for _, want := range []string{"agentbe_audit_dropped_total", "queue=4096"} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("the drop report lacks %q:\n%s", want, logged.String())
		}
	}
	// The first report covers every drop before it: as many as the total
	// it names (at least 1; more when writers dropped while it was being
	// made, which 8 goroutines on a loaded machine do).
	since, total := logField(logged.String(), "dropped_since_last_report"), logField(logged.String(), "dropped_total")
	if since < 1 || since != total || since > dropped {
		t.Errorf("the first drop report says dropped_since_last_report=%d, dropped_total=%d; want them equal, 1 to %d:\n%s", since, total, dropped, logged.String())
	}
	close(w.release)
	l.Write(Record{Tool: "after", Outcome: "ok"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The notes in the file add up to what was dropped before the writer
	// moved (the line written after may have been dropped too: the queue
	// was still full).
	var noted uint64
	for _, line := range strings.Split(w.buf.String(), "\n") {
		if !strings.Contains(line, `"audit.dropped"`) {
			continue
		}
		var note struct {
			Event   string `json:"event"`
			Dropped uint64 `json:"dropped"`
		}
		if err := json.Unmarshal([]byte(line), &note); err != nil || note.Event != "audit.dropped" {
			t.Fatalf("the drop note does not parse: %q: %v", line, err)
		}
		noted += note.Dropped
	}
	if noted < dropped || noted > l.Dropped() {
		t.Errorf("the file's drop notes say %d; want %d to %d", noted, dropped, l.Dropped())
	}
	t.Logf("drop point: %d lines queued; %d of %d dropped in %v", DefaultQueue, dropped, writers*each, time.Since(began))
}

// TestAttackAuditLinesBounded: every string a client chooses (a tool name
// nobody serves, X-Scope-Path, the token file's name for the caller, an
// SSH command, arguments) reaches a line cut, so one line stays under
// MaxLine even when the strings are megabytes of bytes JSON escapes six
// times over.
func TestAttackAuditLinesBounded(t *testing.T) {
	var buf syncbuf.Buffer
	l, err := Open(Options{Path: "-", Stderr: &buf})
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("\x01", 1<<20) // 6 MiB once escaped
	args, _ := json.Marshal(map[string]string{"k": strings.Repeat("y", 1<<20)})
	l.Write(Record{Face: huge, Remote: huge, Scope: huge, Caller: huge, Session: huge, Tool: huge, Command: huge, Outcome: huge, Args: args})
	l.Write(Record{Tool: "plain", Scope: strings.Repeat("a/", 1<<19), Outcome: "unknown"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines; want 2", len(lines))
	}
	for i, line := range lines {
		if len(line) > MaxLine {
			t.Errorf("line %d holds %d bytes; the bound is %d", i, len(line), MaxLine)
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Errorf("line %d does not parse: %v", i, err)
		}
	}
	if !strings.Contains(lines[1], `"scope":"a/a/`) || !strings.Contains(lines[1], "[1048576 bytes]") {
		t.Errorf("the long scope is not cut with its length: %.400s", lines[1])
	}
	t.Logf("line sizes: %d and %d bytes (bound %d)", len(lines[0]), len(lines[1]), MaxLine)
}

// TestAttackAuditQueueMemoryBounded: with the writer stuck, a flood of
// lines each naming a 64 KiB tool (a call of a tool nobody serves) holds at
// most the queue's lines, each cut: the heap grows by a few MiB, not by
// the 4096 × 64 KiB (256 MiB) the names would take whole.
func TestAttackAuditQueueMemoryBounded(t *testing.T) {
	w := &stuck{release: make(chan struct{})}
	l, err := Open(Options{Path: "-", Stderr: w})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { close(w.release); l.Close() }()
	name := strings.Repeat("x", 64<<10)
	before := heapInUse()
	for range 2 * DefaultQueue {
		l.Write(Record{Tool: name, Scope: name, Outcome: "unknown"})
	}
	grew := int64(heapInUse()) - int64(before)
	if grew > 64<<20 {
		t.Errorf("the stuck queue holds %d MiB of heap; want under 64 MiB", grew>>20)
	}
	if l.Dropped() < DefaultQueue-1 {
		t.Errorf("dropped %d of %d", l.Dropped(), 2*DefaultQueue)
	}
	t.Logf("a full queue of lines naming 64 KiB tools: heap +%.1f MiB", float64(grew)/(1<<20))
}

// logField is the value of key=N in the first log line that has it (the
// largest uint64, which no check accepts, if none).
func logField(log, key string) uint64 {
	i := strings.Index(log, " "+key+"=")
	if i < 0 {
		return ^uint64(0)
	}
	v := log[i+len(key)+2:]
	if j := strings.IndexAny(v, " \n"); j >= 0 {
		v = v[:j]
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return ^uint64(0)
	}
	return n
}

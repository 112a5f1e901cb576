package ratelog

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// lines decodes the JSON lines a handler wrote.
func lines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// TestEveryLimitsPerKindAndKeepsTheCount: a flood of one kind makes one
// line per interval, each line says how many were counted without one,
// and another kind is not held back by it.
func TestEveryLimitsPerKindAndKeepsTheCount(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&b, nil))
	e := &Every{Interval: 200 * time.Millisecond}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				e.Warn(log, "conns", "connection refused", "limit", "--max-connections")
			}
		}()
	}
	wg.Wait()
	e.Warn(log, "batch", "batch too large")
	got := lines(t, &b)
	if len(got) != 2 {
		t.Fatalf("8,000 refusals of one kind and one of another within the interval: %d lines, want 2: %s", len(got), b.String())
	}
	if got[0]["msg"] != "connection refused" || got[0]["limit"] != "--max-connections" || got[0][SinceKey] != float64(0) {
		t.Errorf("first line: %v", got[0])
	}
	if got[1]["msg"] != "batch too large" || got[1][SinceKey] != float64(0) {
		t.Errorf("another kind: %v", got[1])
	}
	time.Sleep(250 * time.Millisecond)
	b.Reset()
	e.Warn(log, "conns", "connection refused")
	got = lines(t, &b)
	if len(got) != 1 || got[0][SinceKey] != float64(7999) {
		t.Errorf("the next line after the interval: %v; want the 7,999 refusals without a line counted", got)
	}
}

// TestEveryZeroValue: the zero value limits at the package's interval.
func TestEveryZeroValue(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&b, nil))
	var e Every
	for range 100 {
		e.Warn(log, "k", "refused")
	}
	if got := lines(t, &b); len(got) != 1 {
		t.Errorf("100 refusals at once with the zero value: %d lines, want 1", len(got))
	}
}

package client

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

type recorder struct {
	mu      sync.Mutex
	entries []Entry
}

func (r *recorder) LogOp(e Entry) {
	r.mu.Lock()
	r.entries = append(r.entries, e)
	r.mu.Unlock()
}

// TestOperationsLog: standard mode logs what changes something, verbose
// everything; entries carry the spec's fields; a scope can have its own
// logger; the slog logger writes them.
func TestOperationsLog(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		mode LogMode
		ops  string
	}{
		{LogStandard, "write exec exec"},
		{LogVerbose, "write read exists exec exec"},
	} {
		rec := &recorder{}
		l, err := NewLocal(LocalOptions{Root: t.TempDir(), Isolation: "software", Log: LogOptions{Log: rec, Mode: tc.mode}})
		if err != nil {
			t.Fatal(err)
		}
		l.Write(ctx, "a.txt", []byte("x"))
		l.Read(ctx, "a.txt")
		l.Exists(ctx, "a.txt")
		l.Exec(ctx, "echo out", ExecOptions{})
		l.Exec(ctx, "echo err >&2; exit 2", ExecOptions{})
		l.Destroy()
		var ops []string
		for _, e := range rec.entries {
			ops = append(ops, e.Op)
		}
		if strings.Join(ops, " ") != tc.ops {
			t.Errorf("mode %d logged %v; want %s", tc.mode, ops, tc.ops)
		}
		last := rec.entries[len(rec.entries)-1]
		ok := rec.entries[len(rec.entries)-2]
		if last.Success || last.Err == nil || string(last.Stderr) != "err\n" || last.Command != "echo err >&2; exit 2" || last.Time.IsZero() || last.Workspace == "" {
			t.Errorf("failed exec entry: %+v", last)
		}
		if !ok.Success || string(ok.Stdout) != "out\n" || ok.Duration <= 0 {
			t.Errorf("exec entry: %+v", ok)
		}
		if rec.entries[0].Path != "a.txt" {
			t.Errorf("write entry: %+v", rec.entries[0])
		}
	}
	// A scope with its own logger, and the slog implementation.
	var buf bytes.Buffer
	m, _ := NewMemory(MemoryOptions{})
	defer m.Destroy()
	s, _ := m.Scope("proj", ScopeOptions{Log: SlogLogger(slog.New(slog.NewJSONHandler(&buf, nil)))})
	s.Write(ctx, "f.txt", []byte("x"))
	m.Write(ctx, "not-logged.txt", []byte("x"))
	var line map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &line); err != nil {
		t.Fatalf("slog output %q: %v", buf.String(), err)
	}
	if line["op"] != "write" || line["path"] != "f.txt" || line["success"] != true || !strings.HasSuffix(line["workspace"].(string), "/proj") {
		t.Errorf("slog line: %v", line)
	}
	if strings.Contains(buf.String(), "not-logged") {
		t.Error("the root's operation went to the scope's logger")
	}
}

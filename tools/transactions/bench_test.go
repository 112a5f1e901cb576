package transactions

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/testbin"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// benchSetup is setup for a benchmark.
func benchSetup(b *testing.B, files int) (*Manager, fsops.Workspace, sandbox.Executor, string) {
	b.Helper()
	testenv.Bwrap(b)
	root, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for i := range files {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%03d.txt", i)), []byte(fmt.Sprintf("line one of %d\nline two\n", i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ws.Close() })
	ex, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeBwrap, WorkspaceRoot: root})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ex.Close() })
	m, err := New(Options{Executor: ex, Dir: filepath.Join(b.TempDir(), "transactions"), MaxPending: 2})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m, ws, ex, root
}

// BenchmarkTransactionTrue: `true` as a plain bwrap exec and as a
// transaction (the trampoline's namespace, tmpfs and overlay, and reading
// an empty upper layer), alternating in one loop so that the noise of a
// busy machine falls on both: plain-ms and tx-ms per command, and their
// ratio (docs/performance.md).
func BenchmarkTransactionTrue(b *testing.B) {
	m, ws, ex, _ := benchSetup(b, 0)
	ctx := context.Background()
	var plain, tx time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		if _, err := ex.Run(ctx, sandbox.Request{Command: "true", Workspace: ws}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := m.Run(ctx, sandbox.Request{Command: "true", Workspace: ws}); err != nil {
			b.Fatal(err)
		}
		plain, tx, n = plain+t1.Sub(t0), tx+time.Since(t1), n+1
	}
	b.ReportMetric(ms(plain, n), "plain-ms")
	b.ReportMetric(ms(tx, n), "tx-ms")
	b.ReportMetric(float64(tx)/float64(plain), "ratio")
}

func ms(d time.Duration, n int) float64 { return float64(d) / float64(n) / 1e6 }

// BenchmarkTransactionTrueTrampoline: `true` as a plain bwrap exec and as
// a transaction through each trampoline a daemon may start, alternating in
// one loop: this test binary (self: 112 package inits), the agent-backend
// binary (agent-backend: what a daemon without the helper starts, 199
// inits) and agentbe-sandbox (helper, about 15). A root daemon would mount
// in place, so the trampoline is forced (sandbox.OverlayByTrampoline), as
// a daemon that is not root or runs --run-as takes it. Per command: plain-ms
// and each trampoline's ms and ratio to plain (docs/performance.md).
// AGENT_BACKEND_BIN and AGENTBE_SANDBOX_BIN name built binaries (a run as
// another user, which cannot build them).
func BenchmarkTransactionTrueTrampoline(b *testing.B) {
	testenv.Bwrap(b)
	defer sandbox.OverlayByTrampoline(sandbox.OverlayByTrampoline(true))
	open := func(p string) *sandbox.Trampoline {
		t, err := sandbox.OpenHelper(p, nil)
		if err != nil || t == nil {
			b.Fatalf("%s as the trampoline: %v", p, err)
		}
		b.Cleanup(func() { t.Close() })
		return t
	}
	tramps := []struct {
		name string
		t    *sandbox.Trampoline
	}{{"self", nil}, {"agent-backend", open(testbin.Path(b))}, {"helper", open(testbin.SandboxHelper(b))}}
	_, ws, plainEx, root := benchSetup(b, 0)
	ms := make([]*Manager, len(tramps))
	for i, tr := range tramps {
		ex, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeBwrap, WorkspaceRoot: root, Trampoline: tr.t})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { ex.Close() })
		if ms[i], err = New(Options{Executor: ex, Dir: filepath.Join(b.TempDir(), "transactions"), MaxPending: 2}); err != nil {
			b.Fatal(err)
		}
		m := ms[i]
		b.Cleanup(func() { m.Close() })
	}
	ctx := context.Background()
	var plain time.Duration
	took := make([]time.Duration, len(tramps))
	n := 0
	for b.Loop() {
		t0 := time.Now()
		if _, err := plainEx.Run(ctx, sandbox.Request{Command: "true", Workspace: ws}); err != nil {
			b.Fatal(err)
		}
		plain += time.Since(t0)
		for i, m := range ms {
			t0 := time.Now()
			if _, err := m.Run(ctx, sandbox.Request{Command: "true", Workspace: ws}); err != nil {
				b.Fatalf("%s: %v", tramps[i].name, err)
			}
			took[i] += time.Since(t0)
		}
		n++
	}
	b.ReportMetric(float64(plain)/float64(n)/1e6, "plain-ms")
	for i, tr := range tramps {
		b.ReportMetric(float64(took[i])/float64(n)/1e6, tr.name+"-ms")
		b.ReportMetric(float64(took[i])/float64(plain), tr.name+"-ratio")
	}
}

// BenchmarkTransactionEdit100: a command appending a line to each of 100
// files, run on an overlay alone ("command") and as a whole transaction
// (the change set read, with its 100 diffs, then discarded), alternating:
// extra-ms is what the change set costs beyond the command.
func BenchmarkTransactionEdit100(b *testing.B) {
	m, ws, ex, _ := benchSetup(b, 100)
	ctx := context.Background()
	const cmd = "for f in f*.txt; do echo added >> $f; done"
	dir := b.TempDir()
	var command, tx time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		d, err := sandbox.NewOverlayDir(dir, fmt.Sprint(n))
		if err != nil {
			b.Fatal(err)
		}
		res, err := ex.Run(ctx, sandbox.Request{Command: cmd, Workspace: ws, Overlay: &sandbox.Overlay{Dir: d, MaxBytes: DefaultMaxBytes, MaxFiles: DefaultMaxFiles}})
		if err != nil {
			b.Fatal(err)
		}
		res.Upper.Close()
		sandbox.RemoveOverlayDir(d)
		t1 := time.Now()
		r, err := m.Run(ctx, sandbox.Request{Command: cmd, Workspace: ws})
		if err != nil {
			b.Fatal(err)
		}
		if r.Changes.Modified != 100 {
			b.Fatalf("%d modified", r.Changes.Modified)
		}
		if err := m.Discard(ws, r.ID); err != nil {
			b.Fatal(err)
		}
		command, tx, n = command+t1.Sub(t0), tx+time.Since(t1), n+1
	}
	b.ReportMetric(ms(command, n), "command-ms")
	b.ReportMetric(ms(tx, n), "tx-ms")
	b.ReportMetric(ms(tx-command, n), "extra-ms")
}

package daemon

import (
	"errors"
	"fmt"

	"github.com/agentbe/agentbe-daemon/fsops/checkpoint"
	"github.com/agentbe/agentbe-daemon/internal/cpuburst"
	"github.com/agentbe/agentbe-daemon/internal/metrics"
	"github.com/agentbe/agentbe-daemon/tools/checkpoints"
)

// startCheckpoints opens the checkpoint store under --state-dir (outside
// the workspace: config checks it, and the store again) and serves its
// tools; with --checkpoints auto it installs the registry's hook that takes
// a checkpoint before each call that can change the workspace.
func startCheckpoints(w *wiring) (built, error) {
	cfg := w.cfg
	if cfg.Backend != "filesystem" {
		return built{}, errors.New("--checkpoints: the memory backend keeps no files to checkpoint (and loses them at exit)")
	}
	if cfg.StateDir == "" {
		return built{}, errors.New("--checkpoints: the store lies under --state-dir, which is empty")
	}
	st, err := checkpoint.Open(checkpoint.Options{Dir: cfg.CheckpointDir(), WorkspaceRoot: cfg.Root,
		MaxBytes: cfg.CheckpointMaxBytes, MaxCount: cfg.CheckpointMaxCount, MaxFiles: cfg.CheckpointMaxFiles,
		Burst: cpuburst.Hold, Durable: cfg.Fsync, NoJournal: !cfg.CheckpointJournal, Logger: w.log.With("component", "checkpoints")})
	if err != nil {
		return built{}, fmt.Errorf("--checkpoints: %w", err)
	}
	why := "--fsync: each checkpoint is on disk before it is answered for"
	if !st.Durable() {
		why = "no --fsync: a checkpoint survives a kill of the daemon; a power cut may lose the newest, and the next start leaves out any that came back damaged"
	}
	stats := st.Stats()
	w.log.Info("checkpoint store", "dir", st.Dir(), "mode", cfg.Checkpoints, "checkpoints", stats.Count, "bytes", stats.Bytes,
		"durable", st.Durable(), "why", why)
	p := checkpoints.New(checkpoints.Options{Store: st, Logger: w.log.With("component", "checkpoints")})
	collectors := []metrics.Collector{
		metrics.NewGaugeFunc("agentbe_checkpoint_store_bytes",
			"Bytes the checkpoint store holds (deduplicated content and manifests); the bound is --checkpoint-max-bytes.",
			func() float64 { return float64(st.Stats().Bytes) }),
		metrics.NewGaugeFunc("agentbe_checkpoints", "Checkpoints kept (every scope's); the bound is --checkpoint-max-count.",
			func() float64 { return float64(st.Stats().Count) }),
		metrics.NewCounterFunc("agentbe_checkpoint_walk_bursts_total",
			"Walks of the workspace (checkpoint create, diff to now, restore) that ran with GOMAXPROCS raised to every CPU the process may use (--max-procs auto: internal/cpuburst).",
			func() float64 { return float64(cpuburst.Raised()) }),
	}
	for i, g := range collectors {
		if err := w.opts.Registry.Register(g); err != nil {
			for _, done := range collectors[:i] {
				w.opts.Registry.Unregister(done)
			}
			st.Close()
			return built{}, fmt.Errorf("--checkpoints: register metrics: %w", err)
		}
	}
	if cfg.Checkpoints == "auto" {
		w.reg.SetBeforeChange(p.BeforeChange)
	}
	return built{
		tools: p.Tools(),
		health: func(b *healthBody) {
			b.Checkpoints = &checkpoints.Health{Mode: cfg.Checkpoints, Stats: st.Stats()}
		},
		close: func() error {
			if cfg.Checkpoints == "auto" {
				w.reg.SetBeforeChange(nil)
			}
			for _, g := range collectors {
				w.opts.Registry.Unregister(g)
			}
			return st.Close()
		},
	}, nil
}

package daemon

import (
	"cmp"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/internal/audit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/internal/resolvepath"
	"github.com/agentbe/agentbe-daemon/ssh/sshd"
	"github.com/agentbe/agentbe-daemon/tools/gateway"
	"github.com/agentbe/agentbe-daemon/tools/previews"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// unknownTool is the tool label of calls of a name no provider serves: a
// client's tool name never becomes a label value.
const unknownTool = "_unknown"

// toolMetrics are the per-tool call counters and latency histogram. The
// tool label is always a name the registry serves (or unknownTool), and
// outcome is one of registry.Record's few outcomes, so the series stay
// bounded whatever clients send.
type toolMetrics struct {
	calls    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newToolMetrics(reg prometheus.Registerer, auditLog *audit.Log) (*toolMetrics, error) {
	m := &toolMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentbe_tool_calls_total",
			Help: "Tool calls finished, on every face, by tool and outcome (ok, error, timeout, busy, unknown, panic).",
		}, []string{"tool", "outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentbe_tool_errors_total",
			Help: "Tool calls that did not end ok, by tool.",
		}, []string{"tool"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentbe_tool_call_duration_seconds",
			Help:    "Tool call latency, queue wait included, by tool.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300},
		}, []string{"tool"}),
	}
	cs := []prometheus.Collector{m.calls, m.errors, m.duration}
	if auditLog != nil {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "agentbe_audit_dropped_total",
			Help: "Audit log lines dropped because the writer's queue was full.",
		}, func() float64 { return float64(auditLog.Dropped()) }), prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "agentbe_audit_write_errors_total",
			Help: "Audit log lines lost because writing them failed (a full disk, a revoked file); the daemon's log says why.",
		}, func() float64 { return float64(auditLog.WriteErrors()) }))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register tool metrics: %w", err)
		}
	}
	return m, nil
}

func (m *toolMetrics) observe(reg *registry.Registry, rec registry.Record) {
	tool := rec.Tool
	if _, ok := reg.Lookup(tool); !ok || rec.Outcome == "unknown" {
		tool = unknownTool
	}
	m.calls.WithLabelValues(tool, rec.Outcome).Inc()
	if rec.Outcome != "ok" {
		m.errors.WithLabelValues(tool).Inc()
	}
	m.duration.WithLabelValues(tool).Observe(rec.Duration.Seconds())
}

// openAudit opens --audit-log (nil when it is off). A log inside the
// workspace is refused: the agent could read it, rewrite it, or replace it
// with a symlink the daemon would then append to. config.Validate refuses
// it first, with every other operator path; this holds for a Config that
// was not validated too.
func openAudit(cfg config.Config, log *slog.Logger) (*audit.Log, error) {
	if cfg.AuditLog == "" {
		return nil, nil
	}
	if cfg.AuditLog != "-" && cfg.Backend == "filesystem" {
		if inside, err := resolvepath.Within(cfg.Root, cfg.AuditLog); err != nil {
			return nil, fmt.Errorf("--audit-log %q: %w", cfg.AuditLog, err)
		} else if inside {
			return nil, fmt.Errorf("--audit-log %q is inside the workspace (--root %q), where the agent could read or rewrite it; put it outside, e.g. /var/log/agent-backend/audit.log", cfg.AuditLog, cfg.Root)
		}
	}
	l, err := audit.Open(audit.Options{Path: cfg.AuditLog, Secrets: []string{cfg.AuthToken, cfg.OperatorToken}, Logger: log.With("component", "audit")})
	if err != nil {
		return nil, fmt.Errorf("--audit-log %q: %w", cfg.AuditLog, err)
	}
	return l, nil
}

// newToolRegistry builds the registry every face serves, with the limits
// of the config and the audit log and metrics as its observers.
func newToolRegistry(cfg config.Config, d *Daemon) *registry.Registry {
	var reg *registry.Registry
	reg = registry.New(registry.Options{
		MaxConcurrent:  cfg.MaxConcurrentCalls,
		QueueWait:      cfg.ToolQueueWait,
		DefaultTimeout: cfg.ToolTimeout,
		Logger:         d.log.With("component", "registry"),
		Observe: func(rec registry.Record) {
			d.toolMetrics.observe(reg, rec)
			if d.audit != nil {
				d.audit.Tool(rec)
			}
		},
	})
	return reg
}

// auditSession logs an SSH exec, shell or SFTP session.
func (d *Daemon) auditSession(r sshd.SessionRecord) {
	d.audit.Write(audit.Entry{
		Time: r.Start, Face: "ssh", Remote: r.Remote, Scope: cmp.Or(r.Scope, d.cfg.ScopePath), Caller: r.Caller,
		Tool: "ssh." + r.Kind, Command: r.Command, Outcome: r.Outcome,
		DurationMS: float64(r.Duration.Microseconds()) / 1000, BytesIn: r.BytesIn, BytesOut: r.BytesOut,
	})
}

// auditPreview logs a connection --previews opened (when it closed) or
// refused: tool "ssh.forward" for `ssh -L`, "preview" for /preview/, the
// port as its command.
func (d *Daemon) auditPreview(r previews.Record) {
	face, tool := "ssh", "ssh.forward"
	if r.Face == "http" {
		face, tool = "preview", "preview"
	}
	outcome := r.Outcome
	if r.Err != nil {
		outcome = "refused: " + r.Err.Error()
	}
	d.audit.Write(audit.Entry{
		Time: r.Start, Face: face, Remote: r.Remote, Scope: cmp.Or(r.Scope, d.cfg.ScopePath), Caller: r.Name,
		Tool: tool, Command: "localhost:" + strconv.Itoa(r.Port), Outcome: outcome,
		DurationMS: float64(r.Duration.Microseconds()) / 1000, BytesIn: r.BytesIn, BytesOut: r.BytesOut,
	})
}

// auditApproval logs an operator's decision on a system.run request.
func (d *Daemon) auditApproval(p gateway.Pending, approved, always bool, remote string) {
	if d.audit == nil {
		return
	}
	outcome := "denied"
	if approved {
		outcome = "approved"
		if always {
			outcome = "approved-always"
		}
	}
	d.audit.Write(audit.Entry{Time: time.Now(), Face: "rest", Remote: remote, Tool: "approval", Command: strings.Join(p.Request.Argv, " "), Outcome: outcome})
}

// auditRun logs a program system.run started: the file that ran, by its
// absolute path (and a workspace program's digest), besides the call's own
// line, whose arguments name only what was asked.
func (d *Daemon) auditRun(call registry.Call, r gateway.Ran) {
	if d.audit == nil {
		return
	}
	d.audit.Write(audit.Entry{
		Time: r.Start, Face: call.Face, Remote: call.Remote, Scope: cmp.Or(call.Scope, d.cfg.ScopePath), Caller: call.Caller,
		Tool: "system.run.exec", Command: r.Command(), Outcome: r.Outcome, DurationMS: float64(r.Duration.Microseconds()) / 1000,
	})
}

// ReloadTokens reads the --tokens file again (on SIGHUP) and puts its set
// in force for new requests and connections; a file that does not parse
// changes nothing and is reported. Without --tokens it does nothing.
// Connections already open (/ssh, /gateway) keep the identity they were
// admitted with.
func (d *Daemon) ReloadTokens() (int, error) {
	if d.proto.tokens == nil {
		return 0, nil
	}
	set, err := httpguard.LoadTokens(d.cfg.TokensFile)
	if err != nil {
		return 0, err
	}
	d.proto.tokens.Store(set)
	return set.Len(), nil
}

// ReopenAuditLog opens --audit-log again by name (on SIGHUP, after
// logrotate moved it). Without --audit-log it does nothing.
func (d *Daemon) ReopenAuditLog() error {
	if d.audit == nil {
		return nil
	}
	return d.audit.Reopen()
}

// Tools is the registry every face serves.
func (d *Daemon) Tools() *registry.Registry { return d.proto.reg }

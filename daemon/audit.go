package daemon

import (
	"cmp"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/internal/audit"
	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/internal/resolvepath"
	"github.com/agentbe/agentbe-daemon/ssh/sshd"
	"github.com/agentbe/agentbe-daemon/tools/gateway"
	"github.com/agentbe/agentbe-daemon/tools/previews"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// auditSink is the daemon's one audit sink: each event a part reports in
// its own terms (a registry call, an SSH session, a forwarded connection,
// an operator's decision, a program system.run started) becomes one
// audit.Record, written through audit.Log.Write. Every hook it gives is nil
// without --audit-log, so no part builds a record for nobody.
type auditSink struct {
	log *audit.Log // nil without --audit-log
	// scope is --scope-path, the scope of a record whose caller named none.
	scope string
}

func (s auditSink) on() bool { return s.log != nil }

// write hands r to the log, with the static scope where r has none.
func (s auditSink) write(r audit.Record) {
	r.Scope = cmp.Or(r.Scope, s.scope)
	s.log.Write(r)
}

// toolCall records a finished tool call (the registry's observer); the
// registry gives the scope it ran in.
func (s auditSink) toolCall(r registry.Record) {
	if s.on() {
		s.log.Write(s.log.ToolCall(r))
	}
}

// session is sshd's hook: an SSH exec, shell, SFTP or scp session.
func (s auditSink) session() func(sshd.SessionRecord) {
	if !s.on() {
		return nil
	}
	return func(r sshd.SessionRecord) {
		s.write(audit.Record{
			Time: r.Start, Face: "ssh", Remote: r.Remote, Scope: r.Scope, Caller: r.Caller,
			Tool: "ssh." + r.Kind, Command: r.Command, Outcome: r.Outcome,
			DurationMS: audit.Millis(r.Duration), BytesIn: r.BytesIn, BytesOut: r.BytesOut,
		})
	}
}

// preview is the previews hook: a connection --previews opened (recorded
// when it closed) or refused; tool "ssh.forward" for `ssh -L`, "preview"
// for /preview/, the port as its command.
func (s auditSink) preview() func(previews.Record) {
	if !s.on() {
		return nil
	}
	return func(r previews.Record) {
		face, tool := "ssh", "ssh.forward"
		if r.Face == "http" {
			face, tool = "preview", "preview"
		}
		outcome := r.Outcome
		if r.Err != nil {
			outcome = "refused: " + r.Err.Error()
		}
		s.write(audit.Record{
			Time: r.Start, Face: face, Remote: r.Remote, Scope: r.Scope, Caller: r.Name,
			Tool: tool, Command: "localhost:" + strconv.Itoa(r.Port), Outcome: outcome,
			DurationMS: audit.Millis(r.Duration), BytesIn: r.BytesIn, BytesOut: r.BytesOut,
		})
	}
}

// approval is told of an operator's decision on a system.run request
// (/approvals, /gateway's tools.approve, an MCP client's elicitation).
func (s auditSink) approval() func(p gateway.Pending, approved, always bool, remote string) {
	if !s.on() {
		return nil
	}
	return func(p gateway.Pending, approved, always bool, remote string) {
		outcome := "denied"
		if approved {
			outcome = "approved"
			if always {
				outcome = "approved-always"
			}
		}
		// No scope: the decision is the operator's, not a caller's.
		s.log.Write(audit.Record{Time: time.Now(), Face: "rest", Remote: remote, Tool: "approval", Command: strings.Join(p.Request.Argv, " "), Outcome: outcome})
	}
}

// run is told of a program system.run started: the file that ran, by its
// absolute path (and a workspace program's digest), besides the call's own
// line, whose arguments name only what was asked.
func (s auditSink) run() func(call registry.Call, r gateway.Ran) {
	if !s.on() {
		return nil
	}
	return func(call registry.Call, r gateway.Ran) {
		s.write(audit.Record{
			Time: r.Start, Face: call.Face, Remote: call.Remote, Scope: call.Scope, Caller: call.Caller, Session: call.Session,
			Tool: "system.run.exec", Command: r.Command(), Outcome: r.Outcome, DurationMS: audit.Millis(r.Duration),
		})
	}
}

// openAudit opens --audit-log (nil when it is off). A log inside the
// workspace is refused: the agent could read it, rewrite it, or replace it
// with a symlink the daemon would then append to. config.Validate refuses
// it first, with every other operator path; this holds for a Config that
// was not validated too.
func openAudit(cfg config.Config, secrets *clip.Secrets, log *slog.Logger) (*audit.Log, error) {
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
	l, err := audit.Open(audit.Options{Path: cfg.AuditLog, Secrets: secrets, Logger: log.With("component", "audit")})
	if err != nil {
		return nil, fmt.Errorf("--audit-log %q: %w", cfg.AuditLog, err)
	}
	return l, nil
}

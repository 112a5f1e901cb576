package daemon

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/audit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/internal/metrics"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/tools/previews"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// unknownTool is the tool label of calls of a name no provider serves: a
// client's tool name never becomes a label value.
const unknownTool = "_unknown"

// toolMetrics are the per-tool call counters and latency histogram. The
// tool label is always a name the registry serves (or unknownTool), and
// outcome is one of registry.Record's few outcomes, so the series stay
// bounded whatever clients send; follow drops the series of tools no
// longer served, so they stay bounded over a long life too.
type toolMetrics struct {
	calls    *metrics.CounterVec
	errors   *metrics.CounterVec
	duration *metrics.HistogramVec
}

func newToolMetrics(reg *metrics.Registry, auditLog *audit.Log) (*toolMetrics, error) {
	m := &toolMetrics{
		calls: metrics.NewCounterVec("agentbe_tool_calls_total",
			"Tool calls finished, on every face, by tool and outcome (ok, error, timeout, busy, unknown, panic).", "tool", "outcome"),
		errors: metrics.NewCounterVec("agentbe_tool_errors_total", "Tool calls that did not end ok, by tool.", "tool"),
		duration: metrics.NewHistogramVec("agentbe_tool_call_duration_seconds", "Tool call latency, queue wait included, by tool.",
			[]float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300}, "tool"),
	}
	cs := []metrics.Collector{m.calls, m.errors, m.duration}
	if auditLog != nil {
		cs = append(cs, metrics.NewCounterFunc("agentbe_audit_dropped_total",
			"Audit log lines dropped because the writer's queue was full.",
			func() float64 { return float64(auditLog.Dropped()) }), metrics.NewCounterFunc("agentbe_audit_write_errors_total",
			"Audit log lines lost because writing them failed (a full disk, a revoked file); the daemon's log says why.",
			func() float64 { return float64(auditLog.WriteErrors()) }))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register tool metrics: %w", err)
		}
	}
	return m, nil
}

// follow keeps the series to the tools reg serves: after each change of
// its tools, the series of a tool it no longer serves are dropped (an
// upstream server or an extension that renames its tools over weeks
// would otherwise leave every name it ever served in /metrics). A tool
// served again starts its series from zero, as after a restart. The
// returned func stops following.
func (m *toolMetrics) follow(reg *registry.Registry) (stop func()) {
	return reg.Subscribe(func() {
		served := func(v []string) bool {
			if v[0] == unknownTool {
				return true
			}
			_, ok := reg.Lookup(v[0])
			return ok
		}
		m.calls.Retain(served)
		m.errors.Retain(served)
		m.duration.Retain(served)
	})
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

// newToolRegistry builds the registry every face serves, with the limits
// of the config and the audit sink and metrics as its observers.
func newToolRegistry(cfg config.Config, d *Daemon) *registry.Registry {
	var reg *registry.Registry
	reg = registry.New(registry.Options{
		MaxConcurrent:  cfg.MaxConcurrentCalls,
		QueueWait:      cfg.ToolQueueWait,
		DefaultTimeout: cfg.ToolTimeout,
		Logger:         d.log.With("component", "registry"),
		Observe: func(rec registry.Record) {
			d.toolMetrics.observe(reg, rec)
			d.sink.toolCall(rec)
		},
		CallContext: d.loopback.call,
	})
	// For the registry's life, which is the daemon's: nothing to stop.
	d.toolMetrics.follow(reg)
	return reg
}

// loopbackJudge judges a caller's connections to this machine through the
// network door (netguard.WithLoopbackJudge): a port that a workspace
// command listens on is reached only as /preview/ would reach it for the
// caller (previews.Reachable: its scope or below, and only a caller that
// may run commands), whichever way it goes out under the loosenings that
// admit loopback (--net-allow-private, --net-allow-cidrs,
// --net-allow-hosts): every tool call (http.request, http.download,
// extensions' http and postgres, a site's run_command) through the
// registry's CallContext, and /site/'s POSTs (a site's curl) through the
// site's CallerContext. The browser's connections are judged the same way
// per session (browser.Options.LocalPort is port). Without a workspace that runs
// commands there is nothing to judge.
type loopbackJudge struct {
	reach func() (*previews.Previews, error)
	root  func() string // the served workspace's host path
}

func newLoopbackJudge(d *Daemon) *loopbackJudge {
	// Built at first use: the executor is made after the registry.
	return &loopbackJudge{
		reach: sync.OnceValues(func() (*previews.Previews, error) {
			if d.w.exec == nil {
				return nil, nil
			}
			p, err := previews.New(previews.Options{Executor: d.w.exec, Logger: d.log.With("component", "previews")})
			if err != nil {
				d.log.Warn("connections to workspace commands' ports cannot be judged: a caller bound to a scope, or one that may not run commands, reaches no port of this machine through the tools", "err", err)
				return nil, err
			}
			return p, nil
		}),
		root: func() string { return d.w.ws.Root() },
	}
}

// port judges one connection to port of this machine for a caller
// working in within (the host path of its workspace or scope) that may
// run commands or not: previews.Reachable. Where the ports cannot be
// judged (previews cannot be built, or Reachable cannot read the
// workspace processes' sockets) it fails closed for every caller but one
// of the whole workspace that may run commands: every command is that
// caller's, so Reachable would admit it to every port, and it is not
// asked. It is the browser's Options.LocalPort too.
func (j *loopbackJudge) port(within string, exec bool, port int) error {
	p, err := j.reach()
	switch {
	case exec && within == j.root():
		return nil
	case err != nil:
		return fmt.Errorf("port %d: connections to this machine's ports cannot be judged (%v), so a caller bound to a scope or without commands reaches none", port, err)
	case p == nil:
		return nil
	}
	return p.Reachable(within, exec, port)
}

// context is ctx carrying port's judgement for the caller, which the
// network door applies to every connection it makes to this machine.
func (j *loopbackJudge) context(ctx context.Context, within string, exec bool) context.Context {
	if p, err := j.reach(); p == nil && err == nil {
		return ctx // no command runs: nothing to judge
	}
	if exec && within == j.root() {
		// port admits such a caller to every port: the common call (the
		// daemon's own token) carries no judge and allocates nothing.
		return ctx
	}
	return netguard.WithLoopbackJudge(ctx, func(port int) error { return j.port(within, exec, port) })
}

// call is the registry's CallContext.
func (j *loopbackJudge) call(ctx context.Context, call registry.Call) context.Context {
	within := ""
	if call.Workspace != nil {
		within = call.Workspace.Root()
	}
	return j.context(ctx, within, !call.NoExec && !call.ReadOnly)
}

// site is the site handler's CallerContext: root is the daemon's
// workspace, beneath which the caller's scope is opened.
func (j *loopbackJudge) site(root fsops.Workspace) func(context.Context, admit.Caller) context.Context {
	return func(ctx context.Context, c admit.Caller) context.Context {
		ws, release, err := c.Workspace(root)
		if err != nil {
			return j.context(ctx, "\x00", false) // no scope of its own: no workspace command's port
		}
		within := ws.Root()
		release()
		return j.context(ctx, within, c.MayRun("") == nil)
	}
}

// TokenReload is what ReloadTokens changed.
type TokenReload struct {
	// Tokens is how many entries the --tokens file holds; 0 without one.
	Tokens int
	// Rotated are the flags whose file now holds another token
	// (--auth-token-file, --operator-token-file, --metrics-token-file).
	Rotated []string
	// Ended is how many held connections the reload closed.
	Ended int
}

// ReloadTokens reads the daemon's credentials again (on SIGHUP): the
// --tokens file, and the files of --auth-token-file,
// --operator-token-file and --metrics-token-file. Each is read and
// checked as at start; when any of them fails, nothing changes and the
// error names the file. Otherwise the new set and tokens are put in force
// for new requests and connections, in this order: a new token joins the
// secrets the logs, the audit log, commands' environments and extensions
// never show; then it replaces the old one, which admits no one from
// then on; then what a token keeps open (a /ssh or /gateway connection,
// an MCP session) is judged again (admit.Rules.Rejudge) and closed,
// saying why, when its token was removed or replaced or its scope,
// readOnly or exec changed. A rotated-out token stays among the secrets.
// A token never changes roles: one that is or was another role's, or a
// --tokens entry's, is refused (tokenRoles, tokenEntries).
func (d *Daemon) ReloadTokens() (TokenReload, error) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	cur := d.tokenCfg
	next, err := cur.ReloadTokenFiles()
	if err != nil {
		return TokenReload{}, err
	}
	if d.roles == nil {
		d.roles = tokenRoles{}.add(cur)
	}
	if err := d.roles.check(next); err != nil {
		return TokenReload{}, err
	}
	var set *httpguard.TokenSet
	if d.w.tokens != nil {
		if set, err = httpguard.LoadTokens(d.cfg.TokensFile); err != nil {
			return TokenReload{}, err
		}
		if err := d.roles.add(next).checkSet(d.cfg.TokensFile, set); err != nil {
			return TokenReload{}, err
		}
		if d.entries.name == nil {
			d.entries.add(d.w.tokens.Load())
		}
		if err := d.entries.check(next); err != nil {
			return TokenReload{}, err
		}
	}
	d.secrets.Add(next.Secrets()...)
	var r TokenReload
	for _, t := range []struct {
		flag     string
		old, new string
		rule     httpguard.Token
	}{
		{"--auth-token-file", cur.AuthToken, next.AuthToken, d.admit.Token},
		{"--operator-token-file", cur.OperatorToken, next.OperatorToken, d.admit.Operator},
		{"--metrics-token-file", cur.MetricsToken, next.MetricsToken, d.admit.Scrape},
	} {
		if t.new == t.old {
			continue
		}
		if err := t.rule.Rotate(t.new); err != nil {
			return r, fmt.Errorf("%s: %w", t.flag, err) // a daemon built without the token: not reached
		}
		r.Rotated = append(r.Rotated, t.flag)
	}
	d.tokenCfg = next
	d.roles = d.roles.add(next)
	if set != nil {
		d.entries.add(set)
		d.w.tokens.Store(set)
		r.Tokens = set.Len()
	}
	if r.Ended = d.w.rules.Rejudge(); r.Ended > 0 {
		d.log.Info("token reload ended connections whose token was removed, replaced or changed", "connections", r.Ended)
	}
	return r, nil
}

// maxTokenRoles bounds the tokens a daemon remembers the role of: each
// reload that rotates adds at most three, so this is hundreds of
// rotations, and 32 bytes each.
const maxTokenRoles = 1024

// tokenRoles are the digests of the daemon's, the operator's and the
// scraper's tokens, in force now or at any earlier moment of this
// daemon's life (up to maxTokenRoles, the oldest forgotten first), each
// with the flag of its role. The holder of a token keeps it after a
// rotation (in a client's configuration, a script, an agent's memory):
// a token that came back as another role's would give that holder the
// role, so the agent's old token made the operator's would let the agent
// approve its own commands. A token may come back to its own role.
type tokenRoles []tokenRole

type tokenRole struct {
	sum  [32]byte
	flag string
}

// tokenFlags are the roles, by the flag of their file, with the token c
// gives each.
func tokenFlags(c config.Config) [3][2]string {
	return [3][2]string{{"--auth-token-file", c.AuthToken}, {"--operator-token-file", c.OperatorToken}, {"--metrics-token-file", c.MetricsToken}}
}

// check refuses c when one of its tokens is, or was, another role's. The
// error names both files, never the token.
func (rs tokenRoles) check(c config.Config) error {
	for _, f := range tokenFlags(c) {
		if f[1] == "" {
			continue
		}
		sum := sha256.Sum256([]byte(f[1]))
		for _, r := range rs {
			if r.sum == sum && r.flag != f[0] {
				return fmt.Errorf("%s holds a token that %s held: a token never changes roles, since whoever held it would get the new role; write a new token", f[0], r.flag)
			}
		}
	}
	return nil
}

// checkSet refuses a --tokens set (of the file named file) with an
// entry whose token is, or was, the agent's, the operator's or the
// scraper's: the entry's holder would get that role, and the role's
// holder the entry's scope.
func (rs tokenRoles) checkSet(file string, set *httpguard.TokenSet) error {
	for _, r := range rs {
		if name, ok := set.NameOf(r.sum); ok {
			return fmt.Errorf("--tokens %s: entry %q is the token of %s, now or before: a token never has two roles; give the entry a token of its own", file, name, r.flag)
		}
	}
	return nil
}

// maxTokenEntries bounds the --tokens entries a daemon remembers the
// digest of: a file of maxTokenFile (4 MiB) holds fewer, and each is 32
// bytes and a name.
const maxTokenEntries = 1 << 16

// tokenEntries are the digests of the --tokens entries in force now or
// at any earlier moment of this daemon's life (up to maxTokenEntries,
// the oldest forgotten first), each with its entry's name. The holder of
// an entry's token (a sub-agent with a scope, read-only) keeps it after
// the entry is removed: a token that came back as the agent's, the
// operator's or the scraper's would give that holder the role. An
// entry's token may come back as an entry (tokenRoles.checkSet judges
// the set against the roles).
type tokenEntries struct {
	name  map[[32]byte]string
	order [][32]byte // oldest first
}

// add remembers the entries of set.
func (te *tokenEntries) add(set *httpguard.TokenSet) {
	if te.name == nil {
		te.name = map[[32]byte]string{}
	}
	set.Each(func(name string, sum [32]byte) {
		if _, ok := te.name[sum]; !ok {
			te.order = append(te.order, sum)
		}
		te.name[sum] = name
	})
	if over := len(te.order) - maxTokenEntries; over > 0 {
		for _, sum := range te.order[:over] {
			delete(te.name, sum)
		}
		te.order = slices.Delete(te.order, 0, over)
	}
}

// check refuses c when one of its tokens is, or was, a --tokens entry's.
// The error names the file and the entry, never the token.
func (te *tokenEntries) check(c config.Config) error {
	for _, f := range tokenFlags(c) {
		if f[1] == "" {
			continue
		}
		if name, ok := te.name[sha256.Sum256([]byte(f[1]))]; ok {
			return fmt.Errorf("%s holds the token of --tokens entry %q, now or before: a token never has two roles, since whoever held it would get the new role; write a new token", f[0], name)
		}
	}
	return nil
}

// add is a copy of rs with c's tokens, each once; the oldest leave past
// maxTokenRoles.
func (rs tokenRoles) add(c config.Config) tokenRoles {
	rs = slices.Clone(rs)
	for _, f := range tokenFlags(c) {
		if f[1] == "" {
			continue
		}
		r := tokenRole{sum: sha256.Sum256([]byte(f[1])), flag: f[0]}
		if !slices.Contains(rs, r) {
			rs = append(rs, r)
		}
	}
	if over := len(rs) - maxTokenRoles; over > 0 {
		rs = slices.Delete(rs, 0, over)
	}
	return rs
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
func (d *Daemon) Tools() *registry.Registry { return d.w.reg }

package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/face/mcphttp"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/ssh/sshauth"
	"github.com/agentbe/agentbe-daemon/ssh/sshd"
	"github.com/agentbe/agentbe-daemon/tools/gateway"
	"github.com/agentbe/agentbe-daemon/tools/previews"
	"github.com/agentbe/agentbe-daemon/tools/registry"
	"github.com/agentbe/agentbe-daemon/tools/transactions"
	"github.com/agentbe/agentbe-daemon/tools/upstream"
)

// parts is the composition root as data: every provider, face and listener
// of the daemon, one row each, in the order New starts them (a row may use
// what the rows above it built: the workspace and executor, the admission
// rules, the previews, the approvals, the SSH configuration). Close ends
// them in the reverse order, and a row that fails to start ends the rows
// above it. The start functions are in wire.go, the checkpoints' in
// checkpoints.go.
//
// The order is also the order the providers appear in /health's
// "providers", so a new row goes where its tools should be listed.
var parts = []part{
	{name: "daemon", start: startDaemonRoutes, routes: []route{
		{pattern: routeHealth, get: true, admit: admitNone},
		{pattern: routeHealthServers, get: true, admit: admitNone},
		{pattern: routeMetrics, get: true, admit: admitScrape},
		{pattern: routeOtherwise, admit: admitNone},
	}},
	{name: "admission", check: checkTokens, start: startAdmission},
	{name: "workspace", check: checkWorkspace, start: startWorkspace},
	{name: "checkpoints", flag: "--checkpoints", on: func(c config.Config) bool { return c.Checkpoints == "manual" || c.Checkpoints == "auto" },
		start: startCheckpoints},
	{name: "transactions", flag: "--transactions", on: func(c config.Config) bool { return c.Transactions }, start: startTransactions},
	{name: "upstreams", flag: "--upstreams", on: func(c config.Config) bool { return c.Upstreams != "" },
		check: checkUpstreams, start: startUpstreams},
	{name: "gateway-tools", flag: "--gateway-tools", on: func(c config.Config) bool { return c.GatewayTools },
		check: checkApprovals, start: startGatewayTools, routes: []route{
			{pattern: routeApprovals, admit: admitOperator},
			{pattern: routeApprovals + "/", admit: admitOperator},
		}},
	{name: "processes", flag: "--process-tools", on: func(c config.Config) bool { return c.ProcessTools }, start: startProcs},
	{name: "watch", flag: "--watch-tools", on: func(c config.Config) bool { return c.WatchTools }, start: startWatch},
	{name: "browser", flag: "--browser-tools", on: func(c config.Config) bool { return c.BrowserTools || c.BrowserAllowLocal }, start: startBrowser},
	{name: "previews", flag: "--previews", on: func(c config.Config) bool { return c.Previews }, start: startPreviews,
		routes: []route{{pattern: routePreview, admit: admitCaller}}},
	{name: "extensions", flag: "--extensions", on: func(c config.Config) bool { return c.Extensions != "" },
		check: checkExtensions, start: startExtensions},
	{name: "site", flag: "--site", on: func(c config.Config) bool { return c.Site != "" }, check: checkSite, start: startSite,
		routes: []route{{pattern: routeSite, admit: admitCaller}}},
	{name: "mcp", start: startMCP, routes: []route{{pattern: routeMCP, admit: admitCaller}}},
	{name: "rest", start: startREST, routes: []route{
		{pattern: routeTools, admit: admitCaller},
		{pattern: routeExecute, admit: admitCaller},
	}},
	{name: "gateway", start: startGatewayFace, routes: []route{{pattern: routeGateway, admit: admitCaller}}},
	{name: "ssh", on: servesSSH, check: checkHostKey, start: startSSH},
	{name: "ssh-port", flag: "--ssh-listen", on: func(c config.Config) bool { return c.SSHListen != "" },
		check: checkSSHPortAuth, start: startSSHPort},
	{name: "ssh-ws", on: servesSSHWS, start: startSSHWS, routes: []route{{pattern: routeSSH, admit: admitCaller}}},
}

// A part is one row of the composition table: a provider, a face, a
// listener. Adding a provider is its own folder under tools/ and one row.
type part struct {
	// name names the part in errors; a part that publishes tools
	// publishes them as the registry's provider of this name.
	name string
	// flag is the flag that asks for the part, which names the errors of
	// publishing its tools ("" for a part that is always there).
	flag string
	// on reports whether cfg asks for the part (nil: always).
	on func(config.Config) bool
	// check validates the files cfg names for the part without starting
	// it (nil: it has none), the way start loads them: --check-config
	// runs every row's (Check), and New runs that of a part that is off,
	// so a bad file stops the start either way. A part that is on is not
	// checked: start loads and validates its files, once.
	check func(config.Config) error
	// start builds the part from what the rows above built (w), and sets
	// in w what the rows below use. On error it releases what it built
	// itself; New ends the rows above.
	start func(w *wiring) (built, error)
	// routes are the HTTP routes the part serves while it runs; its
	// built value has a handler for each. The route table of
	// docs/architecture.md lists every row's (TestRouteTable).
	routes []route
}

// built is what a started part leaves the daemon: the part's side of
// the contract every row keeps.
type built struct {
	// tools are published to the registry as the part's provider (nil: it
	// publishes none, or publishes its own as they change).
	tools []registry.Tool
	// handlers serve the part's routes, by pattern.
	handlers map[string]http.Handler
	// health fills the part's field of /health (nil: it has none).
	health func(*healthBody)
	// shutdown ends what a graceful shutdown must end itself: hijacked
	// connections (WebSockets), which the HTTP server does not track.
	shutdown func(context.Context) error
	// close releases what the part holds (nil: nothing).
	close func() error
}

// started is a part that runs.
type started struct {
	*part
	built
}

// admission says how a route's requests are admitted: the "admission"
// column of the route table in docs/architecture.md.
type admission string

const (
	// admitNone: answered without admission (liveness, the JSON 404).
	admitNone admission = "none"
	// admitGuard: the Origin and Host rules (admit.Rules.Guarded), applied
	// by the daemon when it mounts the route.
	admitGuard admission = "guard"
	// admitOperator: the guard, then the operator's token, which the
	// handler asks admit.Rules.IsOperator for.
	admitOperator admission = "operator"
	// admitScrape: the guard, then, with --metrics-token-file, the
	// scraper's token or a trusted caller's (admit.Rules.Scraped), applied
	// by the daemon when it mounts the route.
	admitScrape admission = "scrape"
	// admitCaller: the handler admits each request with internal/admit
	// (Origin and Host, the token, X-Root-Dir, X-Scope-Path, the body
	// rules) and serves the Caller.
	admitCaller admission = "caller"
)

// A route is one pattern of the daemon's mux.
type route struct {
	pattern string
	// get: only GET and HEAD, anything else answered 405 by the daemon
	// (onlyGET); otherwise the handler answers each method itself.
	get   bool
	admit admission
}

// wiring is what the parts share while New starts them: the daemon's own
// values, then what each row builds for the rows below (and for the
// daemon's lifecycle), each field under the row that sets it.
type wiring struct {
	cfg      config.Config
	opts     Options
	log      *slog.Logger
	d        *Daemon            // for the daemon's own routes
	reg      *registry.Registry // the tools every face serves
	guard    *httpguard.Guard
	operator admit.Rules // the guard with the operator's token
	audit    auditSink

	// admission: the --tokens set (nil without the flag; SIGHUP swaps it),
	// the rules every face and HTTP server admits with, and the requests in
	// flight per client address, one count for /mcp, /execute and
	// /gateway's messages.
	tokens   *atomic.Pointer[httpguard.TokenSet]
	rules    admit.Rules
	inflight *admit.Inflight
	// workspace: the root (closing it closes its scopes), the workspace
	// served (the root, or its --scope-path scope) and the executor (nil
	// for a memory workspace) with its configuration.
	root, ws fsops.Workspace
	exec     sandbox.Executor
	execCfg  sandbox.Config
	// transactions: exec's `transaction: true` (wiring.transact).
	tx *transactions.Manager
	// upstreams: for /health/servers.
	upstreams *upstream.Provider
	// gateway-tools: system.run's approvals, which /gateway decides too.
	approvals *gateway.Approvals
	// previews: the workspace's ports, which SSH forwards to.
	previews *previews.Previews
	// site: the MCP instructions a tool site gives.
	instructions string
	// mcp: stdio serves it too.
	mcp *mcphttp.Server
	// ssh: the one SSH configuration both listeners serve.
	sshConf *sshd.Config
	// ssh-port: the SSH port's server and its logins (SIGHUP reloads them).
	sshPort     *sshd.Server
	sshPortAuth *sshauth.Auth
}

// startParts starts the rows of table that cfg asks for, in order, and
// checks the files of those it does not. On an error it ends the parts it
// started, in reverse, and returns the error.
func startParts(w *wiring, table []part) ([]started, error) {
	var done []started
	fail := func(err error) ([]started, error) {
		if cerr := closeParts(done); cerr != nil {
			w.log.Warn("closing the parts started before the error", "err", cerr)
		}
		return nil, err
	}
	for i := range table {
		p := &table[i]
		if p.on != nil && !p.on(w.cfg) {
			if p.check != nil {
				if err := p.check(w.cfg); err != nil {
					return fail(err)
				}
			}
			continue
		}
		r, err := p.start(w)
		if err != nil {
			return fail(err)
		}
		done = append(done, started{p, r})
		for _, rt := range p.routes {
			if r.handlers[rt.pattern] == nil {
				return fail(fmt.Errorf("daemon: part %q serves no handler for its route %s", p.name, rt.pattern))
			}
		}
		if r.tools != nil {
			if err := w.reg.Set(p.name, r.tools); err != nil {
				if p.flag != "" {
					err = fmt.Errorf("%s: %w", p.flag, err)
				}
				return fail(err)
			}
		}
	}
	return done, nil
}

// closeParts closes parts in the reverse of their start order.
func closeParts(parts []started) error {
	var errs []error
	for i := len(parts) - 1; i >= 0; i-- {
		if c := parts[i].close; c != nil {
			errs = append(errs, c())
		}
	}
	return errors.Join(errs...)
}

// shutdownParts ends the parts' hijacked connections, in the reverse of
// their start order.
func shutdownParts(ctx context.Context, parts []started) error {
	var errs []error
	for i := len(parts) - 1; i >= 0; i-- {
		if s := parts[i].shutdown; s != nil {
			errs = append(errs, s(ctx))
		}
	}
	return errors.Join(errs...)
}

// checkParts runs every row's check, whether cfg asks for the part or not.
func checkParts(cfg config.Config, table []part) []error {
	var errs []error
	for _, p := range table {
		if p.check != nil {
			if err := p.check(cfg); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// Check validates the files cfg names that the daemon's parts load (the
// --tokens file, the --upstreams file, the --exec-approvals file, the
// --extensions directory and its files, the --site-env-file, the SSH
// port's keys, CA keys and password hash) with the code that loads them
// at start, without starting anything: the daemon's part of
// --check-config. cfg must have been validated. Each error names its flag
// and file.
func Check(cfg config.Config) []error { return checkParts(cfg, parts) }

// allRoutes is every route of every row, in table order.
func allRoutes(table []part) []route {
	var rs []route
	for _, p := range table {
		rs = append(rs, p.routes...)
	}
	return rs
}

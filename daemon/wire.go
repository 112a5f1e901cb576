package daemon

// The start and check functions of the rows of parts (parts.go), in the
// table's order.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/face/gatewayface"
	"github.com/agentbe/agentbe-daemon/face/mcphttp"
	"github.com/agentbe/agentbe-daemon/face/restface"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/internal/metrics"
	"github.com/agentbe/agentbe-daemon/internal/opfile"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/ssh/sshauth"
	"github.com/agentbe/agentbe-daemon/ssh/sshd"
	"github.com/agentbe/agentbe-daemon/ssh/sshws"
	"github.com/agentbe/agentbe-daemon/tools/browser"
	"github.com/agentbe/agentbe-daemon/tools/extensions"
	"github.com/agentbe/agentbe-daemon/tools/gateway"
	"github.com/agentbe/agentbe-daemon/tools/previews"
	"github.com/agentbe/agentbe-daemon/tools/procs"
	"github.com/agentbe/agentbe-daemon/tools/sites"
	"github.com/agentbe/agentbe-daemon/tools/transactions"
	"github.com/agentbe/agentbe-daemon/tools/upstream"
	"github.com/agentbe/agentbe-daemon/tools/watch"
	"github.com/agentbe/agentbe-daemon/tools/workspace"
)

// startDaemonRoutes serves the daemon's own routes: liveness, the
// upstream servers' states, metrics, and the JSON 404 of every other path.
func startDaemonRoutes(w *wiring) (built, error) {
	d := w.d
	m, err := metrics.Handler(w.opts.Registry)
	if err != nil {
		return built{}, fmt.Errorf("register metrics: %w", err)
	}
	return built{handlers: map[string]http.Handler{
		routeHealth:        http.HandlerFunc(d.serveHealth),
		routeHealthServers: http.HandlerFunc(d.serveHealthServers),
		routeMetrics:       m,
		routeOtherwise:     http.HandlerFunc(serveNotFound),
	}}, nil
}

// checkTokens loads the --tokens file as startAdmission does, and refuses
// an entry that is the token of --auth-token-file, --operator-token-file
// or --metrics-token-file (tokenRoles.checkSet).
func checkTokens(cfg config.Config) error {
	if cfg.TokensFile == "" {
		return nil
	}
	set, err := httpguard.LoadTokens(cfg.TokensFile)
	if err != nil {
		return err
	}
	return tokenRoles{}.add(cfg).checkSet(cfg.TokensFile, set)
}

// startAdmission loads the --tokens file (once; SIGHUP reloads it) and
// builds the rules every face and HTTP server of the daemon admits with.
func startAdmission(w *wiring) (built, error) {
	cfg := w.cfg
	if cfg.TokensFile != "" {
		set, err := httpguard.LoadTokens(cfg.TokensFile)
		if err != nil {
			return built{}, err
		}
		if err := (tokenRoles{}).add(cfg).checkSet(cfg.TokensFile, set); err != nil {
			return built{}, err
		}
		w.tokens = new(atomic.Pointer[httpguard.TokenSet])
		w.tokens.Store(set)
		w.log.Info("scoped tokens loaded", "file", cfg.TokensFile, "tokens", set.Len())
	}
	maxBody := cfg.MaxBodyBytes
	if maxBody == 0 {
		maxBody = mcphttp.DefaultMaxBodyBytes
	}
	w.rules = admit.Rules{Guard: w.guard, Token: httpguard.NewTokens(cfg.AuthToken, w.tokens), RootDir: cfg.Root, StaticScope: cfg.ScopePath, MaxBody: maxBody, Holds: admit.NewHolds()}
	w.inflight = admit.NewInflight(cmp.Or(cfg.MaxInflightPerIP, mcphttp.DefaultMaxInflightPerIP), 0)
	return built{}, nil
}

// checkWorkspace validates the --sandbox-helper file as startWorkspace
// opens it (a directory workspace only: the memory one runs no commands).
func checkWorkspace(cfg config.Config) error {
	if cfg.Backend == "memory" {
		return nil
	}
	t, err := sandbox.OpenHelper(cfg.SandboxHelper, nil)
	if err != nil {
		return err
	}
	return t.Close()
}

// startWorkspace builds the workspace (a directory, or memory), the
// executor for a directory (probing the isolation mode once), and the
// --scope-path scope the tools serve; the workspace tools are the
// registry's first provider.
func startWorkspace(w *wiring) (r built, err error) {
	cfg, log := w.cfg, w.log
	var root fsops.Workspace
	var ex sandbox.Executor
	var tramp *sandbox.Trampoline // nil: the daemon is its own trampoline
	netOn := false                // the executor's commands have the network (the memory backend has none to run)
	defer func() {
		if err != nil {
			if ex != nil {
				_ = ex.Close()
			}
			_ = tramp.Close()
			if root != nil {
				_ = root.Close()
			}
		}
	}()
	switch cfg.Backend {
	case "memory":
		root = fsops.NewMemory(cfg.Root, fsops.Options{MaxReadSize: cfg.MaxReadSize})
	default:
		opts := fsops.Options{MaxReadSize: cfg.MaxReadSize, Fsync: cfg.Fsync}
		if cfg.RunAs != "" {
			// What the file tools, SFTP and scp create is the user's whose
			// commands will change it.
			cred, _, err := sandbox.LookupRunAs(cfg.RunAs)
			if err != nil {
				return r, fmt.Errorf("--run-as: %w", err)
			}
			opts.Owner = &fsops.Owner{UID: int(cred.Uid), GID: int(cred.Gid)}
		}
		root, err = fsops.NewDir(cfg.Root, opts)
		if err != nil {
			return r, fmt.Errorf("--root %q: %w", cfg.Root, err)
		}
		execCfg, err := SandboxConfig(cfg, root.Root(), w.d.secrets, log.With("component", "sandbox"))
		if err != nil {
			return r, err
		}
		// The trampoline helper, validated and opened once; every executor
		// built from execCfg (the site's, the upstreams') starts it.
		if tramp, err = sandbox.OpenHelper(cfg.SandboxHelper, log.With("component", "sandbox")); err != nil {
			return r, err
		}
		execCfg.Trampoline = tramp
		mode := execCfg.Mode
		var netWhy string
		netOn, netWhy = cfg.ExecNetworkOn()
		ex, err = sandbox.New(execCfg)
		w.execCfg = execCfg
		if !netOn && cfg.ExecNetwork == "auto" && mode.TriesBwrap() &&
			(err != nil || !ex.Mode().Namespaced()) {
			// The network was ours to take, and bwrap failed without it:
			// some kernels and runtimes (gVisor, user.max_net_namespaces=0)
			// cannot give it a private network namespace. A sandbox that
			// shares the network still beats none at all.
			// The first executor is closed before the second is built: one
			// in software mode may have made the daemon a subreaper, which
			// must not reap the second one's probes.
			if ex != nil {
				_ = ex.Close()
				ex = nil
			}
			withNet := execCfg
			withNet.NoNetwork = false
			if ex2, err2 := sandbox.New(withNet); err2 == nil && ex2.Mode().Namespaced() {
				ex, err, netOn = ex2, nil, true
				netWhy = "bwrap cannot create a private network namespace here (it works only with the host's); commands can reach this daemon's port, which has no token: set one (--auth-token-file)"
			} else {
				if err2 == nil {
					_ = ex2.Close()
				}
				ex, err = sandbox.New(execCfg) // as it was: software mode, or the error
			}
		}
		if err != nil {
			return r, fmt.Errorf("--isolation %s: %w", cfg.Isolation, err)
		}
		log.Info("command isolation", "mode", ex.Mode(), "reason", ex.Reason(), "gaps", strings.Join(ex.Gaps(), "; "))
		exposed := !cfg.HasAuth() && !cfg.LocalOnly // commands with network could call our port
		switch {
		case !ex.Mode().CutsNetwork() && exposed:
			log.Warn("commands are host processes and can call this daemon's port, which has no token; scopes do not hold against them: set a token (--auth-token-file)", "isolation", ex.Mode())
		case !ex.Mode().CutsNetwork():
			// Only bwrap and landlock can take the network away.
		case !netOn:
			log.Info("commands have no network (bwrap: loopback only; landlock: no TCP)", "why", netWhy)
		case exposed:
			log.Warn("commands share the host's network", "why", netWhy)
		}
	}

	ws := root
	if cfg.ScopePath != "" {
		if ws, err = root.Scope(cfg.ScopePath); err != nil {
			return r, fmt.Errorf("--scope-path %q: %w", cfg.ScopePath, err)
		}
		// Commands run with the scope as their working directory, and SSH
		// clients send `cd "<scope>"` before anything else, so the static
		// scope must exist before the first command, not just the first write.
		if existed, _ := ws.Exists("."); !existed {
			if err := ws.Mkdir(".", true); err != nil {
				return r, fmt.Errorf("--scope-path %q: cannot create the scope directory: %w", cfg.ScopePath, err)
			}
			log.Info("created the scope directory, which did not exist", "scope", cfg.ScopePath, "path", ws.Root())
		}
	}
	w.root, w.ws, w.exec = root, ws, ex
	env := workspace.ExecEnv{Executor: ex, Timeout: cfg.ExecTimeout, NoNetwork: noNetworkNote(cfg, ex, netOn)}
	if cfg.Transactions {
		// Only then does exec's schema have `transaction`: a default
		// daemon's exec is the reference's, byte for byte.
		env.Transact = w.transact
	}
	return built{
		tools: workspace.Tools(ws, env),
		close: func() error {
			var errs []error
			if ex != nil {
				errs = append(errs, ex.Close()) // kills its processes
			}
			// After every executor that starts it: the rows below this one
			// (the site's, the upstreams') are closed before it.
			errs = append(errs, tramp.Close())
			return errors.Join(append(errs, root.Close())...)
		},
	}, nil
}

// transact is exec's `transaction: true` with --transactions, run by the
// transactions row's manager (which starts after the workspace's row, and
// whose start fails the daemon's where it cannot run).
func (w *wiring) transact(ctx context.Context, ws fsops.Workspace, req sandbox.Request) *mcp.CallToolResult {
	if w.tx == nil {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "Transactions are not available: the daemon's transactions did not start (--transactions)"}}}
	}
	return w.tx.Exec(ctx, ws, req)
}

// startTransactions: exec's transactions (tools/transactions, with
// --transactions), their directories under --state-dir. The manager runs
// in every isolation mode; outside bwrap the sandbox refuses each
// transaction, naming bwrap.
func startTransactions(w *wiring) (built, error) {
	if w.exec == nil {
		return built{}, errors.New("--transactions: this workspace cannot run commands (the memory backend)")
	}
	c := w.cfg
	m, err := transactions.New(transactions.Options{Executor: w.exec, Dir: filepath.Join(c.StateDir, "transactions"),
		MaxBytes: c.TransactionMaxBytes, MaxFiles: int64(c.TransactionMaxFiles), MaxPending: c.TransactionMaxPending, TTL: c.TransactionTTL,
		Logger: w.log.With("component", "transactions")})
	if err != nil {
		return built{}, err
	}
	g := metrics.NewGaugeFunc("agentbe_transactions_pending",
		"Transactions (exec with transaction: true) waiting to be applied or discarded.",
		func() float64 { return float64(m.Pending()) })
	if err := w.opts.Registry.Register(g); err != nil {
		m.Close()
		return built{}, fmt.Errorf("transactions: register metrics: %w", err)
	}
	w.tx = m
	return built{
		tools:  m.Tools(),
		health: func(b *healthBody) { b.Transactions = &transactionsHealth{Pending: m.Pending()} },
		close: func() error {
			w.opts.Registry.Unregister(g)
			return m.Close()
		},
	}, nil
}

// noNetworkNote is the line exec adds to a failed command whose output
// shows a network failure, when commands run without network (netOn false
// and a mode that cuts it): the start-up log says it to the operator, this
// says it to the agent, naming the setting that gives commands the network.
func noNetworkNote(cfg config.Config, ex sandbox.Executor, netOn bool) string {
	if netOn || ex == nil || !ex.Mode().CutsNetwork() {
		return ""
	}
	if cfg.ExecNetwork == "false" {
		return "[agentbe] This command ran without network access: the daemon runs commands with --exec-network=false. " +
			"The operator gives them network by restarting it with --exec-network=true."
	}
	return "[agentbe] This command ran without network access: the daemon serves its port without a token, and then gives commands no network (a command could call the daemon's port and leave its scope). " +
		"The operator gives them network by restarting it with a token (--auth-token-file FILE) or with --exec-network=true."
}

// loadUpstreams reads and checks the --upstreams file: the one code that
// does, for Check and for the start.
func loadUpstreams(cfg config.Config) (*upstream.Config, error) {
	ucfg, err := upstream.LoadConfig(cfg.Upstreams, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("--upstreams: %w", err)
	}
	ucfg.DefaultTimeout(cfg.ToolTimeout) // a server without "timeout" takes --tool-timeout
	return ucfg, nil
}

func checkUpstreams(cfg config.Config) error {
	if cfg.Upstreams == "" {
		return nil
	}
	_, err := loadUpstreams(cfg)
	return err
}

// startUpstreams starts the --upstreams servers as a provider of the
// registry. Each gets an executor built like the daemon's (same isolation
// mode, already probed; same policy, user and secrets), with its own network
// setting, read-only paths and environment, and without the per-command
// resource limits, which would end a long-lived server.
func startUpstreams(w *wiring) (built, error) {
	ucfg, err := loadUpstreams(w.cfg)
	if err != nil {
		return built{}, err
	}
	base := w.execCfg
	base.Mode = w.exec.Mode()
	base.Rlimits = sandbox.Rlimits{}
	p, err := upstream.Start(upstream.Options{Config: ucfg, Workspace: w.ws, Registry: w.reg, Sandbox: base, CacheDir: w.cfg.UpstreamCacheDir,
		Version: w.opts.Version, Logger: w.log.With("component", "upstream")})
	if err != nil {
		return built{}, fmt.Errorf("--upstreams %s: %w", w.cfg.Upstreams, err)
	}
	w.upstreams = p
	return built{
		health: func(b *healthBody) {
			b.Upstreams = p.Health()
			b.Servers = serverStates(b.Upstreams)
		},
		close: p.Close,
	}, nil
}

// loadApprovals reads and checks the --exec-approvals file (system.run's
// policy) for the workspace at root: the one code that does, for Check and
// for the start.
func loadApprovals(cfg config.Config, root string) (*gateway.Approvals, error) {
	a, err := gateway.LoadApprovals(cfg.ExecApprovals, cfg.ExecApprovalMode, cfg.ExecAsk, root, cfg.ExecApprovalTTL)
	if err != nil {
		return nil, fmt.Errorf("--exec-approvals: %w", err)
	}
	return a, nil
}

func checkApprovals(cfg config.Config) error {
	if cfg.ExecApprovals == "" {
		return nil
	}
	_, err := loadApprovals(cfg, cfg.Root)
	return err
}

// startGatewayTools serves http.*, fs.* and system.run, the last behind the
// approval policy, and the operator's /approvals.
func startGatewayTools(w *wiring) (built, error) {
	a, err := loadApprovals(w.cfg, w.ws.Root())
	if err != nil {
		return built{}, err
	}
	w.approvals = a
	cfg := w.cfg
	p := gateway.New(gateway.Options{Workspace: w.ws, Executor: w.exec, AllowDelete: cfg.FSDelete, Approvals: a,
		Net:       netguard.New(cfg.NetGuard(80, 443)),
		AskClient: cfg.ExecAskClient, Decided: w.audit.approval(), Ran: w.audit.run(),
		Logger: w.log.With("component", "gateway-tools")})
	// The operator's token, which only the operator's endpoints take.
	h := a.ApprovalsHandler(w.operator.IsOperator, w.audit.approval())
	return built{
		tools:    p.Tools(),
		handlers: map[string]http.Handler{routeApprovals: h, routeApprovals + "/": h},
		close:    p.Close,
	}, nil
}

func startProcs(w *wiring) (built, error) {
	if w.exec == nil {
		return built{}, errors.New("--process-tools: this workspace cannot run commands (the memory backend)")
	}
	m := procs.New(procs.Options{Executor: w.exec, Tokens: w.cfg.TokensFile != "", Logger: w.log.With("component", "processes")})
	return built{tools: m.Tools(), close: m.Close}, nil
}

func startWatch(w *wiring) (built, error) {
	if w.cfg.Backend != "filesystem" {
		return built{}, errors.New("--watch-tools: the memory backend has no files to watch")
	}
	m := watch.New(watch.Options{Tokens: w.cfg.TokensFile != ""})
	return built{tools: m.Tools(), close: m.Close}, nil
}

func startBrowser(w *wiring) (built, error) {
	cfg := w.cfg
	// --browser-allow-local: the door admits loopback hosts at any port,
	// and the provider plain http to them.
	ng := cfg.NetGuard(80, 443)
	ng.AllowLoopback = cfg.BrowserAllowLocal
	bo := browser.Options{BrowserPath: cfg.BrowserPath, AllowHTTP: cfg.BrowserAllowHTTP, AllowLocal: cfg.BrowserAllowLocal, Net: netguard.New(ng),
		MaxSessions: cfg.BrowserMaxSessions, Tokens: cfg.TokensFile != "", IdleTimeout: cfg.BrowserIdleTimeout, RunAs: cfg.BrowserRunAs, CommandsRunAs: cfg.RunAs,
		Logger: w.log.With("component", "browser")}
	if cfg.BrowserAllowLocal && w.exec != nil {
		// A loopback port a workspace command listens on is reached as
		// /preview/ would reach it: only a caller that may run commands,
		// and only its scope's (the daemon's one loopback judge).
		bo.LocalPort = w.d.loopback.port
	}
	if w.opts.browserTweak != nil {
		w.opts.browserTweak(&bo)
	}
	p, err := browser.New(bo)
	if err != nil {
		return built{}, fmt.Errorf("--browser-tools: %w", err)
	}
	if ok, why := p.Available(); !ok {
		// The daemon serves without it; the tools say the same.
		w.log.Warn("--browser-tools: the browser tools are served but cannot start a browser", "why", why)
	}
	return built{
		tools:  p.Tools(),
		health: func(b *healthBody) { h := p.Health(); b.Browser = &h },
		close:  p.Close, // kills every browser
	}, nil
}

// startPreviews serves the workspace's ports: /preview/{port}/, and SSH's
// direct-tcpip channels (startSSH's Forward).
func startPreviews(w *wiring) (built, error) {
	if w.exec == nil {
		return built{}, errors.New("--previews: this workspace cannot run commands (the memory backend), so no process of it listens on a port")
	}
	p, err := previews.New(previews.Options{Executor: w.exec, Opened: w.audit.preview(), Logger: w.log.With("component", "previews")})
	if err != nil {
		return built{}, fmt.Errorf("--previews: %w", err)
	}
	w.previews = p
	// Bodies are streamed to the workspace's server, not held: the tool
	// faces' body limit does not apply (the 30 s read bound of
	// reserveGate does).
	rules := w.rules
	rules.MaxBody = 0
	return built{
		handlers: map[string]http.Handler{routePreview: p.Proxy(routePreview, previewAdmit(rules, w.ws))},
		// Proxied WebSockets are hijacked connections too; closing their
		// connections to the workspace ends them.
		shutdown: func(context.Context) error { return p.Close() },
		close:    p.Close,
	}, nil
}

// previewAdmit is /preview/'s admission: the tool faces' rules (Origin and
// Host, token, root and scope headers), then a token that may run commands
// (a server in the workspace acts as its commands do), then the caller's
// workspace, whose commands' ports it reaches.
func previewAdmit(rules admit.Rules, root fsops.Workspace) func(http.ResponseWriter, *http.Request) (previews.Caller, bool) {
	return func(w http.ResponseWriter, r *http.Request) (previews.Caller, bool) {
		c, ref := rules.Admit(r)
		if ref == nil {
			ref = c.MayRun("it may not reach the workspace's servers either")
		}
		if ref != nil {
			ref.Write(w)
			return previews.Caller{}, false
		}
		ws, release, err := c.Workspace(root)
		if err != nil {
			admit.WriteJSONError(w, http.StatusBadRequest, "Invalid scope", err.Error())
			return previews.Caller{}, false
		}
		within := ws.Root()
		release()
		return previews.Caller{Face: "http", Within: within, Remote: c.Remote, Scope: c.Scope, Name: c.Name,
			Hold: func(ctx context.Context) (context.Context, func()) { return rules.Hold(ctx, c) }}, true
	}
}

// checkExtensions judges the --extensions directory and its *.star files
// as Start does (extensions.CheckDir), for --check-config.
func checkExtensions(cfg config.Config) error {
	if cfg.Extensions == "" {
		return nil
	}
	if err := extensions.CheckDir(cfg.Extensions); err != nil {
		return fmt.Errorf("--extensions: %w", err)
	}
	return nil
}

func startExtensions(w *wiring) (built, error) {
	o := ExtensionsOptions(w.cfg, w.d.secrets)
	o.Registry, o.Workspace, o.Executor, o.Logger = w.reg, w.ws, w.exec, w.log.With("component", "extensions")
	p, err := extensions.Start(o)
	if err != nil {
		return built{}, fmt.Errorf("--extensions: %w", err)
	}
	return built{
		health: func(b *healthBody) { b.Extensions = p.Health() },
		close:  p.Close,
	}, nil
}

// checkSite judges the --site's README.md (its front page, whose tools
// run) as sites.New does, and reads the --site-env-file as the start
// does, for --check-config.
func checkSite(cfg config.Config) error {
	var errs []error
	if cfg.Site != "" {
		readme := filepath.Join(cfg.Site, "README.md")
		if err := opfile.CheckModes(readme); err != nil {
			errs = append(errs, fmt.Errorf("--site: %s: %w", readme, err))
		}
	}
	if cfg.SiteEnvFile != "" {
		if _, err := sites.LoadEnvFile(cfg.SiteEnvFile); err != nil {
			errs = append(errs, fmt.Errorf("--site-env-file: %w", err))
		}
	}
	return errors.Join(errs...)
}

// startSite serves the --site directory: its own confined workspace and an
// executor built like the daemon's (same mode, policy, user and limits) but
// rooted there, the read_page and run_command tools, and /site/.
func startSite(w *wiring) (r built, err error) {
	cfg, log := w.cfg, w.log
	var env map[string]string
	if cfg.SiteEnvFile != "" {
		if env, err = sites.LoadEnvFile(cfg.SiteEnvFile); err != nil {
			return r, fmt.Errorf("--site-env-file: %w", err)
		}
	}
	siteWS, err := fsops.NewDir(cfg.Site, fsops.Options{MaxReadSize: cfg.MaxReadSize})
	if err != nil {
		return r, fmt.Errorf("--site %q: %w", cfg.Site, err)
	}
	ecfg := w.execCfg
	ecfg.Mode = sandbox.ModeSoftware
	if w.exec != nil {
		ecfg.Mode = w.exec.Mode()
	}
	ecfg.WorkspaceRoot = siteWS.Root()
	ecfg.Logger = log.With("component", "site-sandbox")
	siteExec, err := sandbox.New(ecfg)
	if err != nil {
		_ = siteWS.Close()
		return r, fmt.Errorf("--site: %w", err)
	}
	siteNet := cfg.NetGuard(80, 443)
	siteNet.Timeout, siteNet.MaxBodyBytes = cfg.ToolTimeout, sites.DefaultMaxOutput // as sites.New's own door
	site, err := sites.New(sites.Options{Workspace: siteWS, Executor: siteExec, Timeout: cfg.ToolTimeout, Env: env, Net: netguard.New(siteNet),
		CallerContext: w.d.loopback.site(w.ws), Logger: log.With("component", "site")})
	if err != nil {
		_ = siteExec.Close()
		_ = siteWS.Close()
		return r, fmt.Errorf("--site: %w", err)
	}
	w.instructions = sites.Instructions
	log.Info("serving the tool site", "dir", siteWS.Root(), "at", routeSite, "isolation", siteExec.Mode())
	return built{
		tools: site.Tools(),
		// The site's pages and commands behind the tool faces' admission
		// (guard, token, root and scope headers), which the site's
		// handler applies itself with its own rules for a POST (a JSON
		// body, a token that may run commands): `site serve` builds the
		// same handler.
		handlers: map[string]http.Handler{routeSite: site.HandlerAt(strings.TrimSuffix(routeSite, "/"), w.rules)},
		close:    func() error { return errors.Join(site.Close(), siteExec.Close(), siteWS.Close()) },
	}, nil
}

// startMCP serves MCP over HTTP (/mcp) and, with --local-only, stdio.
func startMCP(w *wiring) (built, error) {
	cfg := w.cfg
	s, err := mcphttp.New(mcphttp.Options{
		Admit:              &w.rules,
		Workspace:          w.ws,
		Registry:           w.reg,
		MaxBodyBytes:       cfg.MaxBodyBytes,
		MaxStdioLineBytes:  cfg.MaxStdioLineBytes,
		MaxBatch:           cfg.MaxBatch,
		MaxReplyBytes:      cfg.MaxReplyBytes,
		MaxInflightPerIP:   cfg.MaxInflightPerIP,
		Inflight:           w.inflight,
		Sessions:           cfg.MCPSessions,
		SessionIdleTimeout: cfg.MCPSessionIdle,
		MaxSessions:        cfg.MCPMaxSessions,
		Version:            w.opts.Version,
		Instructions:       w.instructions,
		Logger:             w.log.With("component", "mcp"),
	})
	if err != nil {
		return built{}, err
	}
	w.mcp = s
	return built{handlers: map[string]http.Handler{routeMCP: s.Handler()}, close: s.Close}, nil
}

// startREST serves GET /tools and POST /execute.
func startREST(w *wiring) (built, error) {
	h := restface.New(restface.Options{Registry: w.reg, Workspace: w.ws, Admit: w.rules, MaxReply: w.cfg.MaxReplyBytes, Inflight: w.inflight})
	return built{handlers: map[string]http.Handler{routeTools: h.ToolsHandler(), routeExecute: h.ExecuteHandler()}}, nil
}

// startGatewayFace serves /gateway; with --gateway-tools, the operator's
// token decides system.run's approvals there too.
func startGatewayFace(w *wiring) (built, error) {
	cfg := w.cfg
	o := gatewayface.Options{Registry: w.reg, Workspace: w.ws, Admit: w.rules,
		MaxMessage: cfg.GatewayMaxMessage, MaxBatch: cfg.GatewayMaxBatch, MaxInFlight: cfg.GatewayMaxInFlight,
		Rate: float64(cfg.GatewayRate), Burst: cfg.GatewayBurst, MaxReply: cfg.MaxReplyBytes, Keepalive: cfg.Keepalive, Inflight: w.inflight, Logger: w.log.With("component", "gateway")}
	if a := w.approvals; a != nil {
		decided := w.audit.approval()
		o.Operator = w.operator.Operator
		o.Approve = func(id string, approved, always bool) (any, error) {
			d, err := a.Decide(id, approved, always)
			if err == nil && decided != nil {
				decided(d, approved, d.Always, "gateway")
			}
			return d, err
		}
	}
	s := gatewayface.New(o)
	return built{handlers: map[string]http.Handler{routeGateway: s}, shutdown: s.Shutdown}, nil
}

// servesSSHWS reports whether the daemon serves /ssh.
func servesSSHWS(c config.Config) bool { return !c.DisableSSHWS && !c.LocalOnly }

// servesSSH reports whether the daemon serves SSH at all (/ssh or the SSH
// port), and so needs the SSH configuration.
func servesSSH(c config.Config) bool { return servesSSHWS(c) || c.SSHListen != "" }

// startSSH builds the one SSH configuration both listeners serve (the SSH
// port and /ssh, which differ only in authentication and keepalive): the
// host key, loaded once; the sessions over the workspace and executor; the
// limits of the flags, with one count of channels and one set of SFTP's
// server-wide slots for the daemon; the hooks.
func startSSH(w *wiring) (built, error) {
	cfg := w.cfg
	log := w.log.With("component", "ssh")
	key, err := sshd.LoadOrCreateHostKey(cfg.SSHHostKey)
	if err != nil {
		return built{}, fmt.Errorf("--ssh-host-key %q: %w", cfg.SSHHostKey, err)
	}
	// What a user compares with the fingerprint OpenSSH shows on first
	// connection.
	log.Info("SSH host key", "path", cfg.SSHHostKey, "fingerprint", gossh.FingerprintSHA256(key.PublicKey()))
	w.sshConf, err = sshd.NewConfig(sshd.Config{
		Workspace:    w.ws,
		Root:         cfg.Root,
		Executor:     w.exec,
		HostKey:      key,
		MaxConns:     cfg.MaxSSHConns,
		LoginTimeout: cfg.SSHLoginGraceTime,
		MaxAuthTries: cfg.SSHMaxAuthTries,
		Channels:     sshd.NewChannelPool(cfg.SSHMaxChannels, cfg.SSHMaxChannelsPerIP),
		EnvAllowlist: cfg.SSHEnvAllowlist,
		Forward:      forward(w.previews),
		SessionEnded: w.audit.session(),
		Logger:       log,
	})
	return built{}, err
}

// forward serves the SSH core's direct-tcpip channels through previews
// (nil without --previews: the core refuses them).
func forward(p *previews.Previews) sshd.ForwardFunc {
	if p == nil {
		return nil
	}
	return func(ctx context.Context, r sshd.ForwardRequest) (net.Conn, error) {
		port, err := previews.Target(r.Host, r.Port)
		if err != nil {
			return nil, err
		}
		return p.Dial(ctx, previews.Caller{Face: "ssh", Within: r.Within, Remote: r.Remote, Scope: r.Scope, Name: r.Caller}, port)
	}
}

// sshAuthOptions are the SSH port's login files and rules, as the
// configuration gives them: the one place they are read from it, for
// Check and for the start.
func sshAuthOptions(cfg config.Config) sshauth.Options {
	return sshauth.Options{AuthorizedKeys: cfg.SSHAuthorizedKeys, PasswordHashFile: cfg.SSHPasswordHashFile,
		TrustedUserCAKeys: cfg.SSHTrustedUserCAKeys, CertPrincipals: cfg.SSHCertPrincipals}
}

// checkSSHPortAuth loads the SSH port's key, CA and password files: a line
// that does not parse fails the check as it fails the start.
// checkHostKey is --check-config's look at the SSH host key: one the
// start would refuse (not a key, not a regular file, writable by others)
// is refused here too, naming --ssh-host-key; a missing one is created at
// start (config.Preflight checks its directory).
func checkHostKey(cfg config.Config) error {
	if !servesSSH(cfg) || cfg.SSHHostKey == "" {
		return nil
	}
	return sshd.CheckHostKey(cfg.SSHHostKey)
}

func checkSSHPortAuth(cfg config.Config) error {
	if cfg.SSHListen == "" {
		return nil
	}
	_, err := sshauth.New(sshAuthOptions(cfg))
	return err
}

// startSSHPort builds the SSH port's server: the one SSH configuration
// (startSSH) with the port's authentication (keys, CA-signed certificates,
// password) and SSH keepalive, and counts its login attempts. Listening
// is Serve's.
func startSSHPort(w *wiring) (built, error) {
	cfg := w.cfg
	attempts := metrics.NewCounterVec("agentbe_ssh_auth_attempts_total",
		"Login attempts on the SSH port (--ssh-listen), by method (publickey, password) and outcome (accepted, refused).",
		"method", "outcome")
	if err := w.opts.Registry.Register(attempts); err != nil {
		return built{}, fmt.Errorf("register ssh metrics: %w", err)
	}
	o := sshAuthOptions(cfg)
	o.Logger = w.log.With("component", "ssh-port")
	o.Attempt = func(method, outcome string) { attempts.WithLabelValues(method, outcome).Inc() }
	// When a file changes (SIGHUP, or noticed at a login), the open
	// connections are judged again: one whose key, certificate or
	// password no longer logs in is closed.
	var port atomic.Pointer[sshd.Server]
	o.Changed = func() {
		if srv := port.Load(); srv != nil {
			if n := srv.Rejudge(); n > 0 {
				w.log.Info("ssh: connections closed whose login the changed files no longer admit", "connections", n)
			}
		}
	}
	auth, err := sshauth.New(o)
	if err != nil {
		return built{}, err
	}
	t := sshd.Transport{KeepaliveInterval: cfg.Keepalive, Logger: w.log.With("component", "ssh-port"), Recheck: auth.Recheck}
	if cfg.SSHAuthorizedKeys != "" || cfg.SSHTrustedUserCAKeys != "" {
		t.PublicKeyCallback = auth.PublicKey
		t.VerifiedPublicKeyCallback = auth.VerifiedPublicKey
	}
	if cfg.SSHPasswordHashFile != "" {
		t.PasswordCallback = auth.Password
	}
	srv, err := w.sshConf.Server(t)
	if err != nil {
		return built{}, fmt.Errorf("--ssh-listen: %w", err)
	}
	port.Store(srv)
	w.sshPort, w.sshPortAuth = srv, auth
	return built{
		health:   func(b *healthBody) { h := auth.Health(); b.SSHAuth = &h },
		shutdown: srv.Shutdown,
		close:    srv.Close,
	}, nil
}

// startSSHWS serves /ssh: the same SSH configuration; the WebSocket token
// admits, and WebSocket pings keep alive.
func startSSHWS(w *wiring) (built, error) {
	cfg := w.cfg
	s, err := sshws.New(sshws.Options{SSH: w.sshConf, Admit: &w.rules, KeepaliveInterval: cfg.Keepalive})
	if err != nil {
		return built{}, err
	}
	return built{handlers: map[string]http.Handler{routeSSH: s}, shutdown: s.Shutdown, close: s.Close}, nil
}

package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/face/gatewayface"
	"github.com/agentbe/agentbe-daemon/face/mcphttp"
	"github.com/agentbe/agentbe-daemon/face/restface"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
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
	"github.com/agentbe/agentbe-daemon/tools/registry"
	"github.com/agentbe/agentbe-daemon/tools/sites"
	"github.com/agentbe/agentbe-daemon/tools/upstream"
	"github.com/agentbe/agentbe-daemon/tools/watch"
	"github.com/agentbe/agentbe-daemon/tools/workspace"
)

// protocols holds what the config asks for: the workspace (scoped when
// --scopePath is set), the executor (nil for a memory workspace) and the
// protocol servers (ssh nil when disabled or in stdio mode).
type protocols struct {
	root fsops.Workspace // closing it closes its scopes too
	ws   fsops.Workspace // root, or the --scopePath scope of it
	exec sandbox.Executor
	mcp  *mcphttp.Server
	ssh  *sshws.Server
	// reg holds the tools every face serves (/mcp, stdio, /tools and
	// /execute, /gateway): built in New (tools.go) before build.
	reg     *registry.Registry
	rest    *restface.Handler
	gateway *gatewayface.Server
	// sshConf is the one SSH configuration (nil when no SSH is served):
	// the sessions, limits, host key and hooks both listeners serve,
	// the count of open channels (--ssh-max-channels) and SFTP's
	// server-wide slots included. Built once in build.
	sshConf *sshd.Config
	// sshPort serves --ssh-listen (nil without it): sshConf with the
	// port's authentication and SSH keepalive.
	sshPort     *sshd.Server
	sshPortAuth *sshauth.Auth
	// gwtools serves --gateway-tools (nil without the flag), approvals its
	// system.run policy.
	gwtools  *gateway.Provider
	procs    *procs.Manager     // --process-tools
	previews *previews.Previews // --previews
	// previewHTTP serves /preview/{port}/ (nil without --previews).
	previewHTTP http.Handler
	watch       *watch.Manager    // --watch-tools
	browser     *browser.Provider // --browser-tools
	approvals   *gateway.Approvals
	// extensions serves the --extensions directory (nil without the flag).
	extensions *extensions.Provider
	// upstreams runs the --upstreams servers (nil without the flag).
	upstreams *upstream.Provider
	// site is the --site tool site (nil without the flag), with the
	// workspace and executor of its own directory.
	site     *sites.Site
	siteWS   fsops.Workspace
	siteExec sandbox.Executor
	siteHTTP http.Handler
	// execCfg is the executor's configuration, the base of each upstream's.
	execCfg sandbox.Config
	// tokens is the --tokens file's set (nil pointer value without the
	// flag); every face's token rule shares this pointer, and SIGHUP swaps
	// the set (ReloadTokens).
	tokens *atomic.Pointer[httpguard.TokenSet]
}

func (p *protocols) build(cfg config.Config, opts Options, guard *httpguard.Guard) (err error) {
	defer func() {
		if err != nil {
			_ = p.close()
		}
	}()
	log := opts.Logger
	if cfg.TokensFile != "" {
		set, err := httpguard.LoadTokens(cfg.TokensFile)
		if err != nil {
			return err
		}
		p.tokens = new(atomic.Pointer[httpguard.TokenSet])
		p.tokens.Store(set)
		log.Info("scoped tokens loaded", "file", cfg.TokensFile, "tokens", set.Len())
	}
	var root fsops.Workspace
	switch cfg.Backend {
	case "memory":
		root = fsops.NewMemory(cfg.Root, fsops.Options{MaxReadSize: cfg.MaxReadSize})
		p.root = root
	default:
		root, err = fsops.NewDir(cfg.Root, fsops.Options{MaxReadSize: cfg.MaxReadSize, Fsync: cfg.Fsync})
		if err != nil {
			return fmt.Errorf("--root %q: %w", cfg.Root, err)
		}
		p.root = root
		mode, err := sandbox.ParseMode(cfg.Isolation)
		if err != nil {
			return err
		}
		shell, err := sandbox.ParseShell(cfg.Shell)
		if err != nil {
			return err
		}
		netOn, netWhy := cfg.ExecNetworkOn()
		execCfg := sandbox.Config{
			Mode:          mode,
			MinMode:       sandbox.Mode(cfg.IsolationMin),
			Shell:         shell,
			WorkspaceRoot: root.Root(),
			NoNetwork:     !netOn,
			Policy:        sandbox.PolicyConfig{Disabled: !cfg.BlockDangerous, Allow: cfg.AllowCommands},
			MaxProcesses:  int64(cfg.ExecMaxProcesses),
			Rlimits: sandbox.Rlimits{
				FileSize:     cfg.ExecMaxFileSize,
				CPUSeconds:   int64(cfg.ExecMaxCPU / time.Second),
				AddressSpace: cfg.ExecMaxMemory,
			},
			MaxConcurrent:  cfg.ExecMaxConcurrent,
			DefaultTimeout: cfg.ExecTimeout,
			OutputLimit:    cfg.ExecOutputLimit,
			RunAs:          cfg.RunAs,
			Secrets:        []string{cfg.AuthToken},
			Logger:         log.With("component", "sandbox"),
		}
		p.exec, err = sandbox.New(execCfg)
		p.execCfg = execCfg
		if !netOn && cfg.ExecNetwork == "auto" && mode.TriesBwrap() &&
			(err != nil || !p.exec.Mode().Namespaced()) {
			// The network was ours to take, and bwrap failed without it:
			// some kernels and runtimes (gVisor, user.max_net_namespaces=0)
			// cannot give it a private network namespace. A sandbox that
			// shares the network still beats none at all.
			// The first executor is closed before the second is built: one
			// in software mode may have made the daemon a subreaper, which
			// must not reap the second one's probes.
			if p.exec != nil {
				_ = p.exec.Close()
				p.exec = nil
			}
			withNet := execCfg
			withNet.NoNetwork = false
			if ex, err2 := sandbox.New(withNet); err2 == nil && ex.Mode().Namespaced() {
				p.exec, err, netOn = ex, nil, true
				netWhy = "bwrap cannot create a private network namespace here (it works only with the host's); commands can reach this daemon's port, which has no token: set one (--auth-token-file)"
			} else {
				if err2 == nil {
					_ = ex.Close()
				}
				p.exec, err = sandbox.New(execCfg) // as it was: software mode, or the error
			}
		}
		if err != nil {
			return fmt.Errorf("--isolation %s: %w", cfg.Isolation, err)
		}
		log.Info("command isolation", "mode", p.exec.Mode(), "reason", p.exec.Reason(), "gaps", strings.Join(p.exec.Gaps(), "; "))
		exposed := !cfg.HasAuth() && !cfg.LocalOnly // commands with network could call our port
		switch {
		case !p.exec.Mode().CutsNetwork() && exposed:
			log.Warn("commands are host processes and can call this daemon's port, which has no token; scopes do not hold against them: set a token (--auth-token-file)", "isolation", p.exec.Mode())
		case !p.exec.Mode().CutsNetwork():
			// Only bwrap and landlock can take the network away.
		case !netOn:
			log.Info("commands have no network (bwrap: loopback only; landlock: no TCP)", "why", netWhy)
		case exposed:
			log.Warn("commands share the host's network", "why", netWhy)
		}
	}

	p.root, p.ws = root, root
	if cfg.ScopePath != "" {
		if p.ws, err = root.Scope(cfg.ScopePath); err != nil {
			return fmt.Errorf("--scopePath %q: %w", cfg.ScopePath, err)
		}
		// Commands run with the scope as their working directory, and SSH
		// clients send `cd "<scope>"` before anything else, so the static
		// scope must exist before the first command, not just the first write.
		if existed, _ := p.ws.Exists("."); !existed {
			if err := p.ws.Mkdir(".", true); err != nil {
				return fmt.Errorf("--scopePath %q: cannot create the scope directory: %w", cfg.ScopePath, err)
			}
			log.Info("created the scope directory, which did not exist", "scope", cfg.ScopePath, "path", p.ws.Root())
		}
	}

	// The tool registry: the workspace tools are its first provider.
	reg := p.reg
	if err := reg.Set("workspace", workspace.Tools(p.ws, workspace.ExecEnv{Executor: p.exec, Timeout: cfg.ExecTimeout})); err != nil {
		return err
	}
	if cfg.Upstreams != "" {
		if err := p.startUpstreams(cfg, opts); err != nil {
			return err
		}
	}
	if cfg.GatewayTools {
		if err := p.startGatewayTools(cfg, opts); err != nil {
			return err
		}
	}
	if cfg.ProcessTools {
		if p.exec == nil {
			return errors.New("--process-tools: this workspace cannot run commands (the memory backend)")
		}
		p.procs = procs.New(procs.Options{Executor: p.exec, Logger: log.With("component", "processes")})
		if err := p.reg.Set("processes", p.procs.Tools()); err != nil {
			return fmt.Errorf("--process-tools: %w", err)
		}
	}
	if cfg.WatchTools {
		if cfg.Backend != "filesystem" {
			return errors.New("--watch-tools: the memory backend has no files to watch")
		}
		p.watch = watch.New(watch.Options{})
		if err := p.reg.Set("watch", p.watch.Tools()); err != nil {
			return fmt.Errorf("--watch-tools: %w", err)
		}
	}
	if cfg.BrowserTools {
		bo := browser.Options{BrowserPath: cfg.BrowserPath, AllowHTTP: cfg.BrowserAllowHTTP, Net: netguard.New(cfg.NetGuard(80, 443)),
			MaxSessions: cfg.BrowserMaxSessions, IdleTimeout: cfg.BrowserIdleTimeout, RunAs: cfg.BrowserRunAs, CommandsRunAs: cfg.RunAs,
			Logger: log.With("component", "browser")}
		if opts.browserTweak != nil {
			opts.browserTweak(&bo)
		}
		if p.browser, err = browser.New(bo); err != nil {
			return fmt.Errorf("--browser-tools: %w", err)
		}
		if ok, why := p.browser.Available(); !ok {
			// The daemon serves without it; the tools say the same.
			log.Warn("--browser-tools: the browser tools are served but cannot start a browser", "why", why)
		}
		if err := p.reg.Set("browser", p.browser.Tools()); err != nil {
			return fmt.Errorf("--browser-tools: %w", err)
		}
	}
	if cfg.Previews {
		if p.exec == nil {
			return errors.New("--previews: this workspace cannot run commands (the memory backend), so no process of it listens on a port")
		}
		if p.previews, err = previews.New(previews.Options{Executor: p.exec, Opened: opts.previewOpened,
			Logger: log.With("component", "previews")}); err != nil {
			return fmt.Errorf("--previews: %w", err)
		}
	}
	if cfg.Extensions != "" {
		if p.extensions, err = extensions.Start(extensions.Options{Dir: cfg.Extensions, Registry: p.reg, Workspace: p.ws, Executor: p.exec,
			Net: netguard.New(cfg.NetGuard(80, 443)), PostgresNet: netguard.New(cfg.NetGuard(extensions.DefaultPostgresPort)),
			Secrets: []string{cfg.AuthToken}, Logger: log.With("component", "extensions")}); err != nil {
			return fmt.Errorf("--extensions: %w", err)
		}
	}
	instructions := ""
	if cfg.Site != "" {
		if err := p.startSite(cfg, opts); err != nil {
			return err
		}
		instructions = sites.Instructions
	}
	p.mcp, err = mcphttp.New(mcphttp.Options{
		Tokens:             p.tokens,
		Workspace:          p.ws,
		Registry:           reg,
		RootDir:            cfg.Root,
		StaticScope:        cfg.ScopePath,
		AuthToken:          cfg.AuthToken,
		AllowedOrigins:     cfg.AllowedOrigins,
		Guard:              guard,
		MaxBodyBytes:       cfg.MaxBodyBytes,
		MaxBatch:           cfg.MaxBatch,
		MaxReplyBytes:      cfg.MaxReplyBytes,
		MaxInflightPerIP:   cfg.MaxInflightPerIP,
		Sessions:           cfg.MCPSessions,
		SessionIdleTimeout: cfg.MCPSessionIdle,
		MaxSessions:        cfg.MCPMaxSessions,
		Version:            opts.Version,
		Instructions:       instructions,
		Logger:             log.With("component", "mcp"),
	})
	if err != nil {
		return err
	}

	maxBody := cfg.MaxBodyBytes
	if maxBody == 0 {
		maxBody = mcphttp.DefaultMaxBodyBytes
	}
	rules := admit.Rules{Guard: guard, Token: httpguard.NewTokens(cfg.AuthToken, p.tokens), RootDir: cfg.Root, StaticScope: cfg.ScopePath, MaxBody: maxBody}
	p.rest = restface.New(restface.Options{Registry: p.reg, Workspace: p.ws, Admit: rules})
	gw := gatewayface.Options{Registry: p.reg, Workspace: p.ws, Admit: rules,
		MaxMessage: cfg.GatewayMaxMessage, MaxBatch: cfg.GatewayMaxBatch, MaxInFlight: cfg.GatewayMaxInFlight,
		Rate: float64(cfg.GatewayRate), Burst: cfg.GatewayBurst, Logger: log.With("component", "gateway")}
	if p.approvals != nil {
		gw.Operator = httpguard.NewToken(cfg.OperatorToken)
		gw.Approve = func(id string, approved, always bool) (any, error) {
			d, err := p.approvals.Decide(id, approved, always)
			if err == nil && opts.approvalDecided != nil {
				opts.approvalDecided(d, approved, d.Always, "gateway")
			}
			return d, err
		}
	}
	p.gateway = gatewayface.New(gw)
	if p.previews != nil {
		// Bodies are streamed to the workspace's server, not held: the
		// tool faces' body limit does not apply (the 30 s read bound of
		// reserveGate does).
		pr := rules
		pr.MaxBody = 0
		p.previewHTTP = p.previews.Proxy(routePreview, p.previewAdmit(pr))
	}
	if p.site != nil {
		// The site's pages and commands behind the tool faces' admission
		// (guard, token, root and scope headers), which the site's
		// handler applies itself with its own rules for a POST (a JSON
		// body, a token that may run commands): `site serve` builds the
		// same handler.
		p.siteHTTP = p.site.HandlerAt(strings.TrimSuffix(routeSite, "/"), rules)
	}

	serveWS := !cfg.DisableSSHWS && !cfg.LocalOnly
	if !serveWS && cfg.SSHListen == "" {
		return nil
	}
	if err := p.buildSSH(cfg, opts); err != nil {
		return err
	}
	if cfg.SSHListen != "" {
		if err := p.startSSHPort(cfg, opts); err != nil {
			return err
		}
	}
	if serveWS {
		// /ssh: the same configuration; the WebSocket token admits, and
		// WebSocket pings keep alive.
		if p.ssh, err = sshws.New(sshws.Options{SSH: p.sshConf, Tokens: p.tokens, AuthToken: cfg.AuthToken,
			AllowedOrigins: cfg.AllowedOrigins, Guard: guard, KeepaliveInterval: cfg.SSHKeepalive}); err != nil {
			return err
		}
	}
	return nil
}

// buildSSH builds the one SSH configuration both listeners serve (the SSH
// port and /ssh, which differ only in authentication and keepalive): the
// host key, loaded once; the sessions over the workspace and executor; the
// limits of the flags, with one count of channels and one set of SFTP's
// server-wide slots for the daemon; the hooks.
func (p *protocols) buildSSH(cfg config.Config, opts Options) error {
	log := opts.Logger.With("component", "ssh")
	key, err := sshd.LoadOrCreateHostKey(cfg.SSHHostKey)
	if err != nil {
		return fmt.Errorf("--ssh-host-key %q: %w", cfg.SSHHostKey, err)
	}
	// What a user compares with the fingerprint OpenSSH shows on first
	// connection.
	log.Info("SSH host key", "path", cfg.SSHHostKey, "fingerprint", gossh.FingerprintSHA256(key.PublicKey()))
	p.sshConf, err = sshd.NewConfig(sshd.Config{
		Workspace:    p.ws,
		Executor:     p.exec,
		HostKey:      key,
		MaxConns:     cfg.MaxSSHConns,
		LoginTimeout: cfg.SSHLoginGraceTime,
		MaxAuthTries: cfg.SSHMaxAuthTries,
		Channels:     sshd.NewChannelPool(cfg.SSHMaxChannels, cfg.SSHMaxChannelsPerIP),
		EnvAllowlist: cfg.SSHEnvAllowlist,
		Forward:      p.forward(),
		SessionEnded: opts.sessionEnded,
		Logger:       log,
	})
	return err
}

func (p *protocols) mcpHandler() http.Handler {
	if p.mcp == nil {
		return nil
	}
	return p.mcp.Handler()
}

func (p *protocols) sshHandler() http.Handler {
	if p.ssh == nil {
		return nil
	}
	return p.ssh
}

// isolation is the executor's mode, why it was chosen and what it does
// not confine, for /health.
func (p *protocols) isolation() (mode, reason string, gaps []string) {
	if p.exec == nil {
		return "unavailable", "the memory backend cannot run commands", nil
	}
	return string(p.exec.Mode()), p.exec.Reason(), p.exec.Gaps()
}

func (p *protocols) serveStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	return p.mcp.ServeStdio(ctx, in, out)
}

// shutdown closes WebSockets with 1001 and kills their processes; the HTTP
// server does not track hijacked connections, so this is done here.
func (p *protocols) shutdown(ctx context.Context) error {
	var errs []error
	if p.previews != nil {
		// Proxied WebSockets are hijacked connections too; closing their
		// connections to the workspace ends them.
		errs = append(errs, p.previews.Close())
	}
	if p.gateway != nil {
		errs = append(errs, p.gateway.Shutdown(ctx))
	}
	if p.sshPort != nil {
		errs = append(errs, p.sshPort.Shutdown(ctx))
	}
	if p.ssh != nil {
		errs = append(errs, p.ssh.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// startSSHPort builds the SSH port's server: the one SSH configuration
// (buildSSH) with the port's authentication (keys, CA-signed certificates,
// password) and SSH keepalive. Listening is Serve's.
func (p *protocols) startSSHPort(cfg config.Config, opts Options) (err error) {
	p.sshPortAuth, err = sshauth.New(sshauth.Options{AuthorizedKeys: cfg.SSHAuthorizedKeys, PasswordHashFile: cfg.SSHPasswordHashFile,
		TrustedUserCAKeys: cfg.SSHTrustedUserCAKeys, CertPrincipals: cfg.SSHCertPrincipals,
		Logger: opts.Logger.With("component", "ssh-port"), Attempt: opts.sshAuthAttempt})
	if err != nil {
		return err
	}
	t := sshd.Transport{KeepaliveInterval: cfg.SSHKeepalive, Logger: opts.Logger.With("component", "ssh-port")}
	if cfg.SSHAuthorizedKeys != "" || cfg.SSHTrustedUserCAKeys != "" {
		t.PublicKeyCallback = p.sshPortAuth.PublicKey
	}
	if cfg.SSHPasswordHashFile != "" {
		t.PasswordCallback = p.sshPortAuth.Password
	}
	if p.sshPort, err = p.sshConf.Server(t); err != nil {
		return fmt.Errorf("--ssh-listen: %w", err)
	}
	return nil
}

// startUpstreams starts the --upstreams servers as a provider of the
// registry. Each gets an executor built like the daemon's (same isolation
// mode, already probed; same policy, user and secrets), with its own network
// setting, read-only paths and environment, and without the per-command
// resource limits, which would end a long-lived server.
func (p *protocols) startUpstreams(cfg config.Config, opts Options) error {
	ucfg, err := upstream.LoadConfig(cfg.Upstreams, os.LookupEnv)
	if err != nil {
		return fmt.Errorf("--upstreams: %w", err)
	}
	base := p.execCfg
	base.Mode = p.exec.Mode()
	base.Rlimits = sandbox.Rlimits{}
	p.upstreams, err = upstream.Start(upstream.Options{Config: ucfg, Workspace: p.ws, Registry: p.reg, Sandbox: base, CacheDir: cfg.UpstreamCacheDir,
		Version: opts.Version, Logger: opts.Logger.With("component", "upstream")})
	if err != nil {
		return fmt.Errorf("--upstreams %s: %w", cfg.Upstreams, err)
	}
	return nil
}

// startGatewayTools serves http.*, fs.* and system.run, the last behind the
// approval policy.
func (p *protocols) startGatewayTools(cfg config.Config, opts Options) (err error) {
	if p.approvals, err = gateway.LoadApprovals(cfg.ExecApprovals, cfg.ExecApprovalMode, cfg.ExecAsk, p.ws.Root(), cfg.ExecApprovalTTL); err != nil {
		return fmt.Errorf("--exec-approvals: %w", err)
	}
	p.gwtools = gateway.New(gateway.Options{Workspace: p.ws, Executor: p.exec, AllowDelete: cfg.FSDelete, Approvals: p.approvals,
		Net:       netguard.New(cfg.NetGuard(80, 443)),
		AskClient: cfg.ExecAskClient, Decided: opts.approvalDecided, Ran: opts.systemRan,
		Logger: opts.Logger.With("component", "gateway-tools")})
	if err := p.reg.Set("gateway-tools", p.gwtools.Tools()); err != nil {
		return fmt.Errorf("--gateway-tools: %w", err)
	}
	return nil
}

// startSite serves the --site directory: its own confined workspace and an
// executor built like the daemon's (same mode, policy, user and limits) but
// rooted there, and the read_page and run_command tools.
func (p *protocols) startSite(cfg config.Config, opts Options) (err error) {
	var env map[string]string
	if cfg.SiteEnvFile != "" {
		if env, err = sites.LoadEnvFile(cfg.SiteEnvFile); err != nil {
			return fmt.Errorf("--site-env-file: %w", err)
		}
	}
	if p.siteWS, err = fsops.NewDir(cfg.Site, fsops.Options{MaxReadSize: cfg.MaxReadSize}); err != nil {
		return fmt.Errorf("--site %q: %w", cfg.Site, err)
	}
	ecfg := p.execCfg
	ecfg.Mode = sandbox.ModeSoftware
	if p.exec != nil {
		ecfg.Mode = p.exec.Mode()
	}
	ecfg.WorkspaceRoot = p.siteWS.Root()
	ecfg.Logger = opts.Logger.With("component", "site-sandbox")
	if p.siteExec, err = sandbox.New(ecfg); err != nil {
		return fmt.Errorf("--site: %w", err)
	}
	siteNet := cfg.NetGuard(80, 443)
	siteNet.Timeout, siteNet.MaxBodyBytes = cfg.ToolTimeout, sites.DefaultMaxOutput // as sites.New's own door
	p.site, err = sites.New(sites.Options{Workspace: p.siteWS, Executor: p.siteExec, Timeout: cfg.ToolTimeout, Env: env, Net: netguard.New(siteNet),
		Logger: opts.Logger.With("component", "site")})
	if err != nil {
		return fmt.Errorf("--site: %w", err)
	}
	if err := p.reg.Set("site", p.site.Tools()); err != nil {
		return fmt.Errorf("--site: %w", err)
	}
	opts.Logger.Info("serving the tool site", "dir", p.siteWS.Root(), "at", routeSite, "isolation", p.siteExec.Mode())
	return nil
}

// forward serves the SSH core's direct-tcpip channels through previews
// (nil without --previews: the core refuses them).
func (p *protocols) forward() sshd.ForwardFunc {
	if p.previews == nil {
		return nil
	}
	return func(ctx context.Context, r sshd.ForwardRequest) (net.Conn, error) {
		port, err := previews.Target(r.Host, r.Port)
		if err != nil {
			return nil, err
		}
		return p.previews.Dial(ctx, previews.Caller{Face: "ssh", Within: r.Within, Remote: r.Remote, Scope: r.Scope, Name: r.Caller}, port)
	}
}

// previewAdmit is /preview/'s admission: the tool faces' rules (Origin and
// Host, token, root and scope headers), then a token that may run commands
// (a server in the workspace acts as its commands do), then the caller's
// workspace, whose commands' ports it reaches.
func (p *protocols) previewAdmit(rules admit.Rules) func(http.ResponseWriter, *http.Request) (previews.Caller, bool) {
	return func(w http.ResponseWriter, r *http.Request) (previews.Caller, bool) {
		c, ref := rules.Admit(r)
		if ref == nil {
			ref = c.MayRun("it may not reach the workspace's servers either")
		}
		if ref != nil {
			ref.Write(w)
			return previews.Caller{}, false
		}
		ws, release, err := c.Workspace(p.ws)
		if err != nil {
			admit.WriteJSONError(w, http.StatusBadRequest, "Invalid scope", err.Error())
			return previews.Caller{}, false
		}
		within := ws.Root()
		release()
		return previews.Caller{Face: "http", Within: within, Remote: c.Remote, Scope: c.Scope, Name: c.Name}, true
	}
}

func (p *protocols) close() error {
	var errs []error
	if p.previews != nil {
		errs = append(errs, p.previews.Close())
	}
	if p.sshPort != nil {
		errs = append(errs, p.sshPort.Close())
	}
	if p.gwtools != nil {
		errs = append(errs, p.gwtools.Close())
	}
	if p.procs != nil {
		errs = append(errs, p.procs.Close())
	}
	if p.watch != nil {
		errs = append(errs, p.watch.Close())
	}
	if p.browser != nil {
		errs = append(errs, p.browser.Close()) // kills every browser
	}
	if p.extensions != nil {
		errs = append(errs, p.extensions.Close())
	}
	if p.upstreams != nil {
		errs = append(errs, p.upstreams.Close())
	}
	if p.site != nil {
		errs = append(errs, p.site.Close())
	}
	if p.siteExec != nil {
		errs = append(errs, p.siteExec.Close())
	}
	if p.siteWS != nil {
		errs = append(errs, p.siteWS.Close())
	}
	if p.mcp != nil {
		errs = append(errs, p.mcp.Close())
	}
	if p.ssh != nil {
		errs = append(errs, p.ssh.Close())
	}
	if p.exec != nil {
		errs = append(errs, p.exec.Close())
	}
	if p.root != nil {
		errs = append(errs, p.root.Close())
	}
	return errors.Join(errs...)
}

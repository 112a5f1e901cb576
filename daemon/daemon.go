// Package daemon is the composition root: it builds the tool registry
// (tools.go) with its one audit sink (audit.go), then the rows of one table,
// parts (parts.go: the admission rules, the workspace and executor, each
// provider the config enables, the faces, the SSH listeners; their start
// functions are in wire.go, the checkpoints' in checkpoints.go), started in order and closed in reverse, and
// runs the process: an HTTP server on one port (the rows' routes, which
// TestRouteTable holds to docs/architecture.md and to the mux) and the SSH port
// (--ssh-listen), or MCP over stdio (--local-only), with logging, metrics
// and a graceful shutdown. It implements no protocol itself: each route
// belongs to a face (face/), to ssh/sshws or to a provider's handler, files
// to fsops and processes to sandbox. What it does own is the HTTP
// perimeter: every endpoint but /health, /health/servers and the JSON 404
// of a path no route serves is admitted by internal/admit, once per
// request (a face, /site/ and /preview/ with the daemon's admit.Rules; a
// guard or operator route, /approvals, through handleWork, which applies
// the Origin and Host rules; /metrics through admit.Rules.Scraped), and the
// listener caps connections in total and per client address
// (connlimit.go).
package daemon

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/audit"
	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/internal/metrics"
	"github.com/agentbe/agentbe-daemon/ssh/sshauth"
	"github.com/agentbe/agentbe-daemon/ssh/sshd"
	"github.com/agentbe/agentbe-daemon/tools/browser"
	"github.com/agentbe/agentbe-daemon/tools/checkpoints"
	"github.com/agentbe/agentbe-daemon/tools/extensions"
	"github.com/agentbe/agentbe-daemon/tools/registry"
	"github.com/agentbe/agentbe-daemon/tools/upstream"
)

// Options are the daemon's injected dependencies.
type Options struct {
	Logger   *slog.Logger      // nil = discard
	Registry *metrics.Registry // nil = a fresh registry
	Version  string            // reported by /health
	// Notifier tells systemd READY=1 once the listener accepts connections
	// and STOPPING=1 when a graceful shutdown begins; nil = not under
	// systemd.
	Notifier *Notifier
	// SSHListener is the SSH port's socket, bound by Listen before New;
	// nil: Serve binds --ssh-listen itself.
	SSHListener net.Listener
	// TokenRef is how a user's shell names the bearer token in use
	// (config.Config.TokenRef: a file, an environment variable, never the
	// value), for the start-up line telling how to connect (connect.go).
	TokenRef string
	// Terminal, when set, also gets that line as a plain block (stderr
	// when it is a terminal); nil: the log line only.
	Terminal io.Writer

	// browserTweak, when set, changes the browser provider's options (tests
	// admit their loopback server and choose where its sessions live).
	browserTweak func(*browser.Options)
}

// Daemon is one running workspace server. Create it with New, run it with
// Serve or ServeStdio, and Close it (idempotent).
type Daemon struct {
	cfg     config.Config
	opts    Options
	log     *slog.Logger
	started time.Time
	metrics *httpMetrics
	// toolMetrics and the audit sink observe every tool call (tools.go);
	// audit is nil without --audit-log, and sink writes to it (audit.go).
	toolMetrics *toolMetrics
	audit       *audit.Log
	sink        auditSink
	handler     http.Handler
	mux         *http.ServeMux
	// guard is the Origin and Host rule of every endpoint that does work
	// (internal/httpguard), which every face's admit.Rules hold; admit
	// holds it with the operator's token, for the endpoints that are no
	// face (handleWork, /approvals).
	guard *httpguard.Guard
	admit admit.Rules
	// secrets are the tokens held in clear, which the log, the audit log,
	// commands' environments and extensions never show; ReloadTokens adds
	// the new ones before they admit anyone.
	secrets *clip.Secrets
	// reloadMu serializes ReloadTokens; tokenCfg holds the tokens in
	// force, which the next reload compares with its files'; roles are
	// the tokens in force now and before, each with its role, so that a
	// reload never moves a token to another role (tokenRoles).
	reloadMu sync.Mutex
	tokenCfg config.Config
	roles    tokenRoles
	// entries are the --tokens entries in force now and before, so that
	// a reload never makes one's token a role's (tokenEntries).
	entries tokenEntries
	// loopback judges callers' connections to workspace commands' ports
	// (tools.go).
	loopback *loopbackJudge

	// w is what the parts built (parts.go), and parts those that run, in
	// start order.
	w     wiring
	parts []started
	certs *certReloader // nil unless --tls-cert is set

	// conns is the connection limiter of the running Serve (nil before).
	conns atomic.Pointer[connLimiter]
	// sshAddr is the SSH port's address once Serve listens on it.
	sshAddr atomic.Value

	closeOnce sync.Once
	closeErr  error
}

// New builds the workspace, the executor and the protocol servers for cfg,
// which must have been validated: every row of parts (parts.go) that cfg
// asks for, in order.
func New(cfg config.Config, opts Options) (*Daemon, error) { return newDaemon(cfg, opts, parts) }

// newDaemon is New with the composition table given (a test adds a row).
func newDaemon(cfg config.Config, opts Options, table []part) (*Daemon, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	secrets := clip.NewSecrets(cfg.Secrets()...)
	opts.Logger = clipped(opts.Logger, secrets)
	if opts.Registry == nil {
		opts.Registry = metrics.NewRegistry()
	}
	d := &Daemon{cfg: cfg, opts: opts, log: opts.Logger, started: time.Now(), secrets: secrets, tokenCfg: cfg}
	d.loopback = newLoopbackJudge(d)
	if err := opts.Registry.Register(metrics.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("register go collector: %w", err)
	}
	if err := opts.Registry.Register(metrics.NewProcessCollector()); err != nil {
		return nil, fmt.Errorf("register process collector: %w", err)
	}
	m, err := newHTTPMetrics(opts.Registry)
	if err != nil {
		return nil, err
	}
	d.metrics = m
	open := metrics.NewGaugeFunc("agentbe_http_connections_open",
		"TCP connections held now (WebSockets included, reserve slots excluded); the cap is --max-connections.", func() float64 {
			if l := d.conns.Load(); l != nil {
				n, _ := l.counts()
				return float64(n)
			}
			return 0
		})
	if err := opts.Registry.Register(open); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	if cfg.TLSCert != "" && !cfg.LocalOnly {
		if d.certs, err = newCertReloader(cfg.TLSCert, cfg.TLSKey); err != nil {
			return nil, err
		}
	}
	if d.audit, err = openAudit(cfg, d.secrets, d.log); err != nil {
		return nil, err
	}
	d.sink = auditSink{log: d.audit, scope: cfg.ScopePath}
	if d.toolMetrics, err = newToolMetrics(opts.Registry, d.audit); err != nil {
		_ = d.closeAudit()
		return nil, err
	}
	d.guard = httpguard.New(httpguard.Options{AuthToken: cfg.AuthToken, AllowedOrigins: cfg.AllowedOrigins, Logger: d.log})
	d.admit = admit.Rules{Guard: d.guard, Operator: httpguard.NewToken(cfg.OperatorToken), Scrape: httpguard.NewToken(cfg.MetricsToken)}
	d.w = wiring{cfg: cfg, opts: opts, log: d.log, d: d, reg: newToolRegistry(cfg, d), guard: d.guard, operator: d.admit, audit: d.sink}
	if d.parts, err = startParts(&d.w, table); err != nil {
		_ = d.closeAudit()
		return nil, err
	}
	// /health's details go to a caller with every right (admit.Rules.Trusted):
	// the faces' token rule, beside the operator's.
	d.admit.Token = d.w.rules.Token
	// /health is the liveness probe and does no work: it answers whatever
	// name it is reached by (a probe may use any). Every other endpoint is
	// admitted once per request by internal/admit: the faces, /site/ and
	// /preview/ admit their own requests with the daemon's rules (Origin
	// and Host first of all), so they are mounted as they are; anything
	// else goes through handleWork, which applies the Origin and Host
	// rules.
	d.mux = http.NewServeMux()
	d.mount(d.parts)
	d.handler = instrument(admit.BodyDeadline(admit.ReplyDeadline(reserveGate(d.mux), replyStallTimeout), bodyTimeout), d.log, m)
	return d, nil
}

// mount puts the routes of the parts that run on the mux, each behind the
// methods and the admission its row names: a route admitted by the guard
// (or the guard and the operator's token) through handleWork, the others
// as their handler is.
func (d *Daemon) mount(parts []started) {
	for _, p := range parts {
		for _, r := range p.routes {
			h := p.handlers[r.pattern]
			if r.get {
				h = onlyGET(h)
			}
			switch r.admit {
			case admitGuard, admitOperator:
				d.handleWork(r.pattern, h)
			case admitScrape:
				d.mux.Handle(r.pattern, d.admit.Scraped(h))
			default:
				d.mux.Handle(r.pattern, h)
			}
		}
	}
}

// serveNotFound answers every path no route serves.
func serveNotFound(w http.ResponseWriter, r *http.Request) {
	if admit.IsUpgrade(r) {
		admit.WriteJSONError(w, http.StatusBadRequest, "Bad Request", "WebSocket upgrades are served only at /ssh, /gateway and, with --previews, /preview/{port}/")
		return
	}
	admit.WriteJSONError(w, http.StatusNotFound, "Not Found", fmt.Sprintf("no endpoint at %s; see /health, /mcp, /ssh, /metrics", r.URL.Path))
}

// handleWork mounts an endpoint that does work (or reveals what the
// workspace is doing) and is no face behind the Origin and Host rules
// (admit.Rules.Guarded), so a new such endpoint gets them by construction.
// A face admits its own requests instead (internal/admit) and is mounted
// with mux.Handle: TestAdmissionAnswers and TestGuardOncePerRequest hold
// each to the rules.
func (d *Daemon) handleWork(pattern string, h http.Handler) {
	d.mux.Handle(pattern, d.admit.Guarded(h))
}

// Handler is the daemon's whole HTTP surface, with logging and metrics.
func (d *Daemon) Handler() http.Handler { return d.handler }

// livenessBody is /health's answer to a caller that is not
// admit.Rules.Trusted: the fields docs/protocol.md requires of it without
// a token, and the upstream servers' states by name, which the execution
// service's clients read there and /health/servers answers anyway.
type livenessBody struct {
	Status     string            `json:"status"`
	Version    string            `json:"version"`
	RootDir    string            `json:"rootDir"`
	Transports map[string]bool   `json:"transports"`
	Servers    map[string]string `json:"servers,omitempty"`
}

// healthBody is /health's answer to a trusted caller (admit.Rules.Trusted):
// the reference daemon's fields plus ours.
type healthBody struct {
	Status          string          `json:"status"`
	Version         string          `json:"version"`
	RootDir         string          `json:"rootDir"`
	Transports      map[string]bool `json:"transports"`
	Backend         string          `json:"backend"`
	Isolation       string          `json:"isolation"`
	IsolationReason string          `json:"isolationReason,omitempty"`
	// IsolationGaps are what the effective mode does not confine
	// (sandbox.Executor.Gaps; docs/security.md lists them per mode).
	IsolationGaps []string `json:"isolationGaps,omitempty"`
	// Fsync says writes are durable before they are acknowledged (--fsync).
	Fsync bool `json:"fsync"`
	// Previews says /preview/ and SSH forwarding serve the workspace's
	// ports (--previews).
	Previews      bool    `json:"previews"`
	UptimeSeconds float64 `json:"uptimeSeconds"`
	// Tools is how many tools the registry serves; Providers says, per
	// provider, its state and how many of them it serves.
	Tools     int                     `json:"tools"`
	Providers []registry.ProviderInfo `json:"providers"`
	// Upstreams is each --upstreams server's state (absent without the flag).
	Upstreams []upstream.Health `json:"upstreams,omitempty"`
	// Servers is the execution service's view of the same servers, name →
	// state (running, starting, restarting, stopped, failed), as
	// /health/servers answers it (absent without --upstreams).
	Servers map[string]string `json:"servers,omitempty"`
	// Extensions is each --extensions file's state (absent without the flag).
	Extensions []extensions.Health `json:"extensions,omitempty"`
	// Browser is the browser provider's state and its sessions (absent
	// without --browser-tools).
	Browser *browser.Health `json:"browser,omitempty"`
	// SSHAuth is the state of the SSH port's key, CA and password files
	// (absent without --ssh-listen); its error names each file that admits
	// nothing because it does not load.
	SSHAuth *sshauth.Health `json:"sshAuth,omitempty"`
	// Transactions is how many transactions (exec with transaction: true)
	// are pending (absent for a workspace that cannot run commands).
	Transactions *transactionsHealth `json:"transactions,omitempty"`
	// Checkpoints is the checkpoint store's mode, size and bounds (absent
	// without --checkpoints).
	Checkpoints *checkpoints.Health `json:"checkpoints,omitempty"`
}

type transactionsHealth struct {
	Pending int `json:"pending"`
}

// serveHealthServers is the execution service's health view,
// {"servers":{"name":"running"|...}}: each --upstreams server by its state
// (running, starting, restarting, stopped, failed); empty without the flag.
func (d *Daemon) serveHealthServers(w http.ResponseWriter, _ *http.Request) {
	servers := map[string]string{}
	if d.w.upstreams != nil {
		servers = serverStates(d.w.upstreams.Health())
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{"servers": servers})
}

// serverStates is each upstream server's state by its name, the seed's
// {"servers": {"fs": "running"}} of /health and /health/servers.
func serverStates(hs []upstream.Health) map[string]string {
	servers := make(map[string]string, len(hs))
	for _, h := range hs {
		servers[h.Name] = h.State
	}
	return servers
}

// serveHealth answers liveness to every caller, whatever name it reached
// the daemon by and without a token (a probe's), and the daemon's details
// (isolation, providers, upstream servers' errors, the operator's files)
// only to a caller with every right (admit.Rules.Trusted).
func (d *Daemon) serveHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	transports := map[string]bool{
		"mcp":    true,
		"ssh-ws": servesSSHWS(d.cfg),
		"ssh":    false,
	}
	if !d.admit.Trusted(r) {
		live := livenessBody{Status: "ok", Version: d.opts.Version, RootDir: d.cfg.Root, Transports: transports}
		if d.w.upstreams != nil {
			live.Servers = serverStates(d.w.upstreams.Health())
		}
		_ = json.NewEncoder(w).Encode(live)
		return
	}
	mode, reason, gaps := d.isolation()
	body := healthBody{
		Status:          "ok",
		Version:         d.opts.Version,
		RootDir:         d.cfg.Root,
		Transports:      transports,
		Backend:         d.cfg.Backend,
		Isolation:       mode,
		IsolationReason: reason,
		IsolationGaps:   gaps,
		Fsync:           d.cfg.Fsync,
		Previews:        d.w.previews != nil,
		UptimeSeconds:   time.Since(d.started).Seconds(),
		Tools:           len(d.w.reg.List()),
		Providers:       d.w.reg.Providers(),
	}
	if body.Providers == nil {
		body.Providers = []registry.ProviderInfo{}
	}
	for _, p := range d.parts {
		if p.health != nil {
			p.health(&body)
		}
	}
	_ = json.NewEncoder(w).Encode(body)
}

// isolation is the executor's mode, why it was chosen and what it does
// not confine, for /health.
func (d *Daemon) isolation() (mode, reason string, gaps []string) {
	if d.w.exec == nil {
		return "unavailable", "the memory backend cannot run commands", nil
	}
	return string(d.w.exec.Mode()), d.w.exec.Reason(), d.w.exec.Gaps()
}

// Serve answers HTTP on ln until ctx is cancelled, then shuts down gracefully:
// it stops accepting, lets in-flight requests finish for up to the configured
// shutdown timeout, closes WebSockets and kills their processes, then cuts
// whatever remains. It returns nil after a shutdown caused by ctx.
func (d *Daemon) Serve(ctx context.Context, ln net.Listener) error {
	nofile, err := raiseNoFile()
	if err != nil {
		d.log.Warn("cannot raise the descriptor limit", "err", err)
	}
	maxConns, perIP := d.cfg.MaxConns, d.cfg.MaxConnsPerIP
	if maxConns <= 0 {
		maxConns = 1024
	}
	if perIP <= 0 || perIP > maxConns {
		perIP = maxConns
	}
	maxConns, perIP, lowered := connCaps(maxConns, perIP, nofile)
	if lowered != "" {
		d.log.Warn("connection cap lowered to fit the descriptor limit", "why", lowered)
	}
	d.log.Info("connection limits", "rlimit_nofile", nofile, "max_connections", maxConns,
		"max_connections_per_ip", perIP, "reserve", reserveConns, "idle_timeout", idleTimeout)
	d.warnDescriptors(nofile, maxConns)
	lim := newConnLimiter(ln, maxConns, perIP, d.log, func(limit string) {
		d.metrics.connRefused.WithLabelValues(limit).Inc()
	})
	mem := newMemoryReturner(d.log)
	lim.opened, lim.closed = mem.opened, mem.closed
	mem.run(time.Second)
	defer mem.close()
	d.conns.Store(lim)
	ln = lim
	srv := &http.Server{
		Handler:           d.handler,
		ReadHeaderTimeout: admit.HeaderTimeout,
		IdleTimeout:       idleTimeout,
		ConnState:         lim.ConnState,
		ConnContext:       connContext,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
		// Request contexts must outlive the start of a shutdown so in-flight
		// calls can finish; srv.Close cancels them when the grace period ends.
		BaseContext: func(net.Listener) context.Context { return context.Background() },
	}
	scheme := "http"
	if d.certs != nil {
		ln = tls.NewListener(ln, d.certs.tlsConfig())
		scheme = "https"
	}
	errc := make(chan error, 2)
	if d.w.sshPort == nil && d.opts.SSHListener != nil {
		d.opts.SSHListener.Close()
	}
	if d.w.sshPort != nil {
		sshLn := d.opts.SSHListener
		if sshLn == nil {
			if sshLn, err = net.Listen("tcp", d.cfg.SSHListen); err != nil {
				return config.ListenError("--ssh-listen", d.cfg.SSHListen, err)
			}
		}
		go func() {
			if err := d.w.sshPort.Serve(sshLn); err != nil && !errors.Is(err, sshd.ErrShuttingDown) && !errors.Is(err, net.ErrClosed) {
				errc <- fmt.Errorf("ssh port: %w", err)
			}
		}()
		d.sshAddr.Store(sshLn.Addr().String())
		d.log.Info("SSH port listening", "addr", sshLn.Addr().String(), "auth", d.w.sshPortAuth.Describe())
		if d.cfg.ConventionalSSH {
			d.log.Warn("--conventional-ssh and --ssh-port are deprecated: the daemon serves SSH itself; use --ssh-listen ADDR:PORT", "ssh_listen", d.cfg.SSHListen)
		}
	}
	d.log.Info("listening", "addr", ln.Addr().String(), "root", d.cfg.Root,
		"mcp", scheme+"://"+ln.Addr().String()+routeMCP, "ssh_ws", servesSSHWS(d.cfg),
		"auth", d.cfg.HasAuth(), "tls", d.certs != nil)
	if urls := pasteableURLs(scheme, ln.Addr(), routeMCP, net.InterfaceAddrs); urls != nil {
		d.log.Info("listening on every address; the MCP endpoint is reachable at", "urls", strings.Join(urls, " "))
	}
	d.logConnect(scheme, ln.Addr())
	// Ready: everything the start needed has run, and nothing is served yet
	// (the socket, bound by Listen, holds what arrives until Serve).
	releasePages(d.log, slog.LevelInfo, "ready")
	go func() { errc <- srv.Serve(ln) }()
	notifyErr := func(err error) { d.log.Warn("systemd notification failed", "err", err) }
	if err := d.opts.Notifier.Notify("READY=1\nSTATUS=serving " + scheme + "://" + ln.Addr().String()); err != nil {
		notifyErr(err)
	}
	wdCtx, stopWatchdog := context.WithCancel(ctx)
	wdDone := make(chan struct{})
	go func() { defer close(wdDone); d.opts.Notifier.runWatchdog(wdCtx, notifyErr) }()
	defer func() { stopWatchdog(); <-wdDone }()

	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}

	d.log.Info("shutting down", "grace", d.cfg.ShutdownTimeout)
	if err := d.opts.Notifier.Notify("STOPPING=1"); err != nil {
		notifyErr(err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), d.cfg.ShutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := shutdownParts(sctx, d.parts); err != nil {
			d.log.Warn("closing protocol servers", "err", err)
		}
	}()
	err = srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		d.log.Warn("grace period over; cutting the remaining connections", "grace", d.cfg.ShutdownTimeout)
		err = srv.Close()
	}
	wg.Wait()
	if e := <-errc; e != nil && !errors.Is(e, http.ErrServerClosed) {
		err = errors.Join(err, e)
	}
	d.log.Info("stopped")
	return err
}

// ReloadTLS reads the certificate and key files again (on SIGHUP). Without
// --tls-cert it does nothing. On failure the old certificate stays in use.
func (d *Daemon) ReloadTLS() error {
	if d.certs == nil {
		return nil
	}
	return d.certs.Reload()
}

// closeAudit flushes and closes the audit log, if any.
func (d *Daemon) closeAudit() error {
	if d.audit == nil {
		return nil
	}
	return d.audit.Close()
}

// ListenAndServe listens on the configured address and calls Serve.
func (d *Daemon) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", d.cfg.Addr())
	if err != nil {
		return d.cfg.PortListenError(err)
	}
	return d.Serve(ctx, ln)
}

// sameSocket reports whether addr (host:port) asks for the port bind:port
// takes: the same port on the same host, or with either host unspecified.
func sameSocket(addr, bind string, port int) bool {
	host, p, err := net.SplitHostPort(addr)
	if err != nil || p != strconv.Itoa(port) {
		return false
	}
	unspecified := func(h string) bool { ip := net.ParseIP(h); return h == "" || ip != nil && ip.IsUnspecified() }
	return host == bind || unspecified(host) || unspecified(bind)
}

// Listeners are the sockets a daemon serves: --bind:--port, and the SSH
// port with --ssh-listen (else nil).
type Listeners struct {
	HTTP, SSH net.Listener
}

// Close closes both (for a start that fails after Listen).
func (l Listeners) Close() {
	for _, ln := range []net.Listener{l.HTTP, l.SSH} {
		if ln != nil {
			ln.Close()
		}
	}
}

// Listen binds cfg's listening addresses, first thing at start: a port
// that is taken or needs privileges is then the first and only error line,
// not one after the start-up log and the providers' start. Its error is
// config.ListenError's one line. Serve the result with New (SSHListener:
// SSH) and Serve (HTTP).
func Listen(cfg config.Config) (Listeners, error) {
	var l Listeners
	var err error
	if l.HTTP, err = net.Listen("tcp", cfg.Addr()); err != nil {
		return Listeners{}, cfg.PortListenError(err)
	}
	if cfg.SSHListen != "" {
		if l.SSH, err = net.Listen("tcp", cfg.SSHListen); err != nil {
			l.Close()
			if errors.Is(err, syscall.EADDRINUSE) && sameSocket(cfg.SSHListen, cfg.Bind, cfg.Port) {
				return Listeners{}, fmt.Errorf("--ssh-listen: %s is in use by this daemon's own --port %d (HTTP); give the SSH port another", cfg.SSHListen, cfg.Port)
			}
			return Listeners{}, config.ListenError("--ssh-listen", cfg.SSHListen, err)
		}
	}
	return l, nil
}

// ServeStdio serves MCP on in/out until in reaches EOF or ctx is cancelled.
// Nothing but MCP messages is ever written to out.
func (d *Daemon) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	d.log.Info("serving MCP over stdio", "root", d.cfg.Root, "backend", d.cfg.Backend)
	if nofile, err := raiseNoFile(); err == nil {
		d.warnDescriptors(nofile, 0)
	}
	return d.w.mcp.ServeStdio(ctx, in, out)
}

// SSHAddr is the address the SSH port listens on ("" before Serve, or
// without --ssh-listen).
func (d *Daemon) SSHAddr() string {
	a, _ := d.sshAddr.Load().(string)
	return a
}

// ReloadSSHKeys reads the SSH port's authorized_keys, CA and password hash
// files again (on SIGHUP). A file that does not load admits nothing until
// it does (sshauth.Auth.Reload). Without --ssh-listen it does nothing.
func (d *Daemon) ReloadSSHKeys() error {
	if d.w.sshPortAuth == nil {
		return nil
	}
	return d.w.sshPortAuth.Reload()
}

// Close ends the parts in the reverse of their start order (the executor,
// killing its processes, among the last), then the audit log. It is
// idempotent.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() { d.closeErr = errors.Join(closeParts(d.parts), d.closeAudit()) })
	return d.closeErr
}

// maxListedURLs bounds the URLs logged for a wildcard bind (a host with
// many interfaces or addresses).
const maxListedURLs = 8

// pasteableURLs returns, for a listener on every address (0.0.0.0 or ::),
// URLs of route a user can paste: loopback first, then the machine's
// other interface addresses (IPv4 before IPv6, link-local left out). For
// a listener on one address it returns nil: that address is in the log
// already.
func pasteableURLs(scheme string, addr net.Addr, route string, interfaceAddrs func() ([]net.Addr, error)) []string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok || !ta.IP.IsUnspecified() {
		return nil
	}
	port := strconv.Itoa(ta.Port)
	urls := []string{scheme + "://" + net.JoinHostPort("127.0.0.1", port) + route}
	addrs, _ := interfaceAddrs()
	var v4, v6 []string
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() || ipn.IP.IsUnspecified() {
			continue
		}
		u := scheme + "://" + net.JoinHostPort(ipn.IP.String(), port) + route
		if ipn.IP.To4() != nil {
			v4 = append(v4, u)
		} else {
			v6 = append(v6, u)
		}
	}
	urls = append(urls, v4...)
	urls = append(urls, v6...)
	if len(urls) > maxListedURLs {
		urls = urls[:maxListedURLs]
	}
	return urls
}

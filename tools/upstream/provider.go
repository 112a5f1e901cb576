package upstream

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// Options configure a Provider.
type Options struct {
	Config    *Config
	Workspace fsops.Workspace // the daemon's root workspace
	Registry  *registry.Registry
	// Sandbox is the daemon's executor configuration; each server gets an
	// executor of its own from it, with the server's network, read-only
	// paths and environment.
	Sandbox sandbox.Config
	// Getenv reads the daemon's environment for passEnv (os.LookupEnv when
	// nil).
	Getenv func(string) (string, bool)
	// CacheDir holds each server's package cache (packages.go), outside
	// the workspace; "" is the user's cache directory's agentbe/upstreams.
	CacheDir string
	Version  string
	Logger   *slog.Logger

	timing     *timing // tests
	maxMessage int     // tests; DefaultMaxMessage when 0
}

// Provider runs the configured servers and serves their tools.
type Provider struct {
	ws      fsops.Workspace
	reg     *registry.Registry
	getenv  func(string) (string, bool)
	version string
	log     *slog.Logger
	timing  timing

	cacheRoot  string // the servers' package caches
	maxMessage int    // DefaultMaxMessage, or the test's
	servers    []*server
	closeOnce  sync.Once
}

// Start builds each enabled server's executor and starts its supervisor; it
// returns without waiting for the servers to come up (their state is in
// Health, their tools appear in the registry when listed). It fails only
// when an executor cannot be built (e.g. --isolation bwrap without bwrap).
func Start(opts Options) (*Provider, error) {
	if opts.Config == nil || opts.Workspace == nil || opts.Registry == nil {
		return nil, errors.New("upstream: Options.Config, Workspace and Registry are required")
	}
	p := &Provider{ws: opts.Workspace, reg: opts.Registry, getenv: opts.Getenv, version: opts.Version, log: opts.Logger, timing: defaultTiming}
	if p.getenv == nil {
		p.getenv = os.LookupEnv
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if opts.timing != nil {
		p.timing = *opts.timing
	}
	p.maxMessage = DefaultMaxMessage
	if opts.maxMessage > 0 {
		p.maxMessage = opts.maxMessage
	}
	var err error
	if p.cacheRoot, err = packageCacheRoot(opts.CacheDir, opts.Workspace.Root()); err != nil {
		return nil, err
	}
	for _, sc := range opts.Config.Servers {
		if sc.Disabled {
			p.log.Info("upstream disabled in the config; not started", "server", sc.Name)
			continue
		}
		s, err := p.newServer(sc, opts.Sandbox)
		if err != nil {
			for _, built := range p.servers {
				built.exe.Close()
			}
			return nil, err
		}
		p.servers = append(p.servers, s)
	}
	for _, s := range p.servers {
		go s.run()
	}
	return p, nil
}

func (p *Provider) newServer(sc Server, base sandbox.Config) (*server, error) {
	log := p.log.With("server", sc.Name)
	if sc.Cwd != "" {
		if err := p.ws.Mkdir(sc.Cwd, true); err != nil {
			return nil, fmt.Errorf("upstream %s: cwd %q: %w", sc.Name, sc.Cwd, err)
		}
	}
	// The server runs in, and is bound to, its cwd (the one cwd rule,
	// fsops.WorkDir) for its whole life: its scope closes with p.ws.
	bound, _, err := fsops.WorkDir(p.ws, sc.Cwd)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: cwd %q: %w", sc.Name, sc.Cwd, err)
	}
	dir := bound.Root()
	cfg := base
	cfg.NoNetwork = base.NoNetwork || !sc.Network
	lookPath := func(name string) (string, error) { return sandbox.LookPath(name, sc.Env) }
	cfg.ReadOnlyPaths = append(slices.Clone(base.ReadOnlyPaths), readOnlyPaths(&sc, p.ws.Root(), lookPath)...)
	cacheDir, err := serverCacheDir(p.cacheRoot, sc.Name)
	if err != nil {
		return nil, err
	}
	cfg.WritablePaths = append(slices.Clone(base.WritablePaths), cacheDir)
	cfg.Env = cacheEnv(cacheDir)
	maps.Copy(cfg.Env, sc.Env)
	cfg.MaxConcurrent = 1 // the one long-lived process
	cfg.Logger = log
	exe, err := sandbox.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", sc.Name, err)
	}
	log.Info("upstream configured", "isolation", exe.Mode(), "network", !cfg.NoNetwork, "read_only", cfg.ReadOnlyPaths, "cache", cacheDir)
	return &server{
		cfg: sc, p: p, exe: exe, dir: dir, ws: bound, log: log, stderr: newStderrSink(log),
		sem: make(chan struct{}, sc.MaxConcurrent), cache: newResultCache(sc.Cache), stop: make(chan struct{}), done: make(chan struct{}),
		relist: make(chan struct{}, 1), state: StateStarting,
	}, nil
}

// Health reports every started server, in configuration order.
func (p *Provider) Health() []Health {
	out := make([]Health, len(p.servers))
	for i, s := range p.servers {
		out[i] = s.health()
	}
	return out
}

// Close stops every server (stdin closed, SIGTERM, SIGKILL after 5 s, all
// at once) and waits for them; their tools leave the registry.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() {
		for _, s := range p.servers {
			close(s.stop)
		}
		for _, s := range p.servers {
			<-s.done
			s.exe.Close()
		}
	})
	return nil
}

package browser

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/netguard"
)

// Defaults of Options.
const (
	DefaultIdleTimeout = 30 * time.Minute
	DefaultMaxSessions = 4
	// DefaultJSHeapMiB is the JavaScript heap a renderer may hold.
	DefaultJSHeapMiB = 512
	// RendererProcessLimit caps a session's renderer processes: tabs and
	// frames beyond it share them (a page opening popups adds no process).
	RendererProcessLimit    = 4
	DefaultViewportWidth    = 1280
	DefaultViewportHeight   = 800
	DefaultStartTimeout     = 30 * time.Second
	DefaultLockWait         = 30 * time.Second
	DefaultNavigateTimeout  = 30 * time.Second
	DefaultMaxSnapshotBytes = 100_000
	DefaultMaxExtractBytes  = 200_000
	// MaxScreenshotHeight and MaxScreenshotWidth bound a full-page
	// screenshot (CSS pixels), and MaxScreenshotPixels its area (Chromium
	// holds the whole bitmap: 4 bytes a pixel); a larger page is cut and
	// the result says so.
	MaxScreenshotHeight = 16384
	MaxScreenshotWidth  = 4096
	MaxScreenshotPixels = 24 << 20
	// MaxScreenshotBytes bounds a screenshot's PNG.
	MaxScreenshotBytes = 10 << 20
	// MaxTextPerNode cuts the text of one snapshot line.
	MaxTextPerNode = 200
	// MaxTypeChars bounds the text of one act of type "type".
	MaxTypeChars = 10_000
	// MaxSelectorLen bounds a CSS selector.
	MaxSelectorLen = 1000
	// MaxURLLen bounds a URL given to browser.goto.
	MaxURLLen = 8192
)

// Options configure the provider.
type Options struct {
	// BrowserPath is Chromium's executable; "" looks for chromium,
	// chromium-browser, google-chrome and google-chrome-stable on PATH.
	BrowserPath string
	// Net is the network door whose rules every request of the browser
	// passes (netguard.New(netguard.Options{}) when nil).
	Net *netguard.Client
	// AllowHTTP admits http:// URLs besides https:// (--browser-allow-http).
	AllowHTTP bool
	// AllowLocal admits pages this machine serves (--browser-allow-local):
	// http as well as https for a host written as this machine
	// (netguard.LoopbackHost), whose addresses and ports Net must admit
	// (netguard.Options.AllowLoopback). Without it browser.goto to such a
	// host is refused with LocalRefusal.
	AllowLocal bool
	// LocalPort, when set, judges each connection a session's browser
	// opens to a loopback port under AllowLocal, for the session's caller:
	// within is the host path of the workspace (or scope) it started the
	// session in, exec whether it may run commands. An error refuses the
	// connection. The daemon gives previews.Reachable: a port a workspace
	// command listens on is reached only as /preview/ would reach it.
	LocalPort func(within string, exec bool, port int) error
	// IdleTimeout closes a session no action used for that long
	// (DefaultIdleTimeout when 0).
	IdleTimeout time.Duration
	// MaxSessions caps the sessions open at once (DefaultMaxSessions when 0).
	MaxSessions int
	// Tokens says the daemon admits several tokens (--tokens): then one
	// token holds at most its share of MaxSessions (admit.CallerShare).
	Tokens bool
	// JSHeapMiB bounds the JavaScript heap of each of the session's
	// renderers (V8's --max-old-space-size; DefaultJSHeapMiB when 0): a
	// page that allocates without end crashes its own tab at the bound
	// instead of taking the host's memory.
	JSHeapMiB int
	// ViewportWidth and ViewportHeight are the tab's size in CSS pixels
	// (DefaultViewportWidth, DefaultViewportHeight when 0).
	ViewportWidth, ViewportHeight int
	// StartTimeout bounds a browser's start (DefaultStartTimeout when 0).
	StartTimeout time.Duration
	// LockWait is how long a call waits for its session's previous action
	// (DefaultLockWait when 0).
	LockWait time.Duration
	// NavigateTimeout bounds browser.goto's wait for the page's load
	// (DefaultNavigateTimeout when 0).
	NavigateTimeout time.Duration
	// MaxSnapshotBytes and MaxExtractBytes cap the text of browser.snapshot
	// and browser.extract (the defaults when 0).
	MaxSnapshotBytes, MaxExtractBytes int
	// RunAs is the user Chromium runs as when the daemon is root (""
	// means nobody; --browser-run-as). Chromium's own sandbox needs a user
	// that is not root; a user of its own keeps it apart from other
	// services that run as nobody.
	RunAs string
	// CommandsRunAs is the user the agent's commands run as (--run-as; ""
	// when they run as the daemon's user). Chromium's user must be another:
	// a process of Chromium's user can open /proc/<pid>/mem of Chromium's
	// processes (drive the browser past every check), read every session's
	// profile, and use the sessions' proxies. New refuses the same user for
	// both.
	CommandsRunAs string
	// TempDir holds the sessions' directories (os.TempDir() when "").
	TempDir string
	Logger  *slog.Logger
}

// LocalRefusal is why browser.goto refuses a page this machine serves
// (localhost, 127.0.0.0/8, [::1]) without AllowLocal: it names the one
// setting that admits it and the command line that sets it.
const LocalRefusal = "a page served on this machine (localhost, 127.0.0.0/8, [::1]) is refused by default; " +
	"the operator admits such pages, over http or https and at any port, with one flag: " +
	"agent-backend daemon --browser-tools --browser-allow-local (other flags as before). " +
	"Names that only resolve to this machine stay refused."

// httpOK reports whether plain http may reach host: with AllowHTTP, or
// with AllowLocal for a host written as this machine.
func (p *Provider) httpOK(host string) bool {
	return p.opts.AllowHTTP || (p.opts.AllowLocal && netguard.LoopbackHost(host))
}

// Provider owns the browser sessions and serves the browser.* tools.
type Provider struct {
	opts     Options
	log      *slog.Logger
	net      *netguard.Client
	execPath string // "" when no browser was found
	missing  string // why not
	runAs    *syscall.Credential
	// maxMessage bounds one DevTools message (MaxMessageBytes; a test
	// lowers it).
	maxMessage int

	mu         sync.Mutex
	sessions   map[string]*session // by id
	starting   int                 // sessions being launched (they count against the cap)
	startingBy map[string]int      // starting, by the caller's token
	closed     bool
	stop       chan struct{}
	reaper     sync.WaitGroup
}

// New builds the provider. A missing browser is not an error: the tools
// are served and say that no browser is installed.
func New(opts Options) (*Provider, error) {
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.JSHeapMiB <= 0 {
		opts.JSHeapMiB = DefaultJSHeapMiB
	}
	if opts.ViewportWidth <= 0 {
		opts.ViewportWidth = DefaultViewportWidth
	}
	if opts.ViewportHeight <= 0 {
		opts.ViewportHeight = DefaultViewportHeight
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.LockWait <= 0 {
		opts.LockWait = DefaultLockWait
	}
	if opts.NavigateTimeout <= 0 {
		opts.NavigateTimeout = DefaultNavigateTimeout
	}
	if opts.MaxSnapshotBytes <= 0 {
		opts.MaxSnapshotBytes = DefaultMaxSnapshotBytes
	}
	if opts.MaxExtractBytes <= 0 {
		opts.MaxExtractBytes = DefaultMaxExtractBytes
	}
	if opts.Net == nil {
		opts.Net = netguard.New(netguard.Options{})
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Provider{opts: opts, log: log, net: opts.Net, sessions: map[string]*session{}, startingBy: map[string]int{}, stop: make(chan struct{}), maxMessage: MaxMessageBytes}
	p.execPath, p.missing = findBrowser(opts.BrowserPath)
	if os.Geteuid() == 0 {
		name := opts.RunAs
		if name == "" {
			name = "nobody"
		}
		u, err := user.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("the daemon is root, and Chromium must run as another user (%q): %w", name, err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		if uid == 0 {
			return nil, fmt.Errorf("user %q is root; Chromium's sandbox needs an unprivileged user", name)
		}
		if opts.CommandsRunAs != "" {
			// An unknown user is the sandbox's to refuse.
			if cu, err := user.Lookup(opts.CommandsRunAs); err == nil && cu.Uid == u.Uid {
				return nil, fmt.Errorf("the browser's user %q (--browser-run-as) is uid %s, the user the agent's commands run as (--run-as %q): "+
					"a command could write the browser's memory (/proc/<pid>/mem), read every session's profile and use the sessions' proxies; "+
					"give Chromium a user of its own", name, u.Uid, opts.CommandsRunAs)
			}
		}
		p.runAs = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	if n := removeStaleSessions(opts.TempDir); n > 0 {
		log.Info("browser: removed the session directories that daemons killed before left", "directories", n)
	}
	p.reaper.Add(1)
	go p.reap()
	return p, nil
}

// findBrowser resolves the executable: the operator's path, or the usual
// names on PATH.
func findBrowser(path string) (execPath, missing string) {
	if path != "" {
		p, err := exec.LookPath(path)
		if err != nil {
			return "", fmt.Sprintf("--browser-path %q: %v", path, err)
		}
		return p, ""
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, ""
		}
	}
	return "", "no browser is installed: install chromium (apt-get install chromium) or give its path with --browser-path"
}

// Available reports whether a browser was found, and if not, why.
func (p *Provider) Available() (bool, string) { return p.execPath != "", p.missing }

// reap closes sessions idle for longer than IdleTimeout.
func (p *Provider) reap() {
	defer p.reaper.Done()
	tick := min(p.opts.IdleTimeout/4, time.Minute)
	t := time.NewTicker(max(tick, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		cutoff := time.Now().Add(-p.opts.IdleTimeout).UnixNano()
		var idle []*session
		p.mu.Lock()
		for id, s := range p.sessions {
			if s.lastUsed.Load() >= cutoff {
				continue
			}
			// A session busy with an action is not idle, however long it
			// runs: only one whose lock is free is taken.
			select {
			case s.lock <- struct{}{}:
				delete(p.sessions, id)
				idle = append(idle, s)
			default:
			}
		}
		p.mu.Unlock()
		for _, s := range idle {
			p.log.Info("browser session closed after being idle", "session", s.id, "idle", p.opts.IdleTimeout)
			s.shutdown()
			<-s.lock
		}
	}
}

// startSession returns the live session of key for owner (one is reused),
// or launches a new one within the cap.
func (p *Provider) startSession(key, owner string, headless bool, local localCaller) (*session, bool, error) {
	if p.execPath == "" {
		return nil, false, &errcode.Error{Code: errcode.InvalidConfiguration, Op: "browser.start", Msg: p.missing}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, false, errors.New("the browser provider is closing")
	}
	if key != "" {
		for _, s := range p.sessions {
			if s.key == key && s.owner == owner {
				p.mu.Unlock()
				return s, true, nil
			}
		}
	}
	if len(p.sessions)+p.starting >= p.opts.MaxSessions {
		p.mu.Unlock()
		return nil, false, &errcode.Error{Code: errcode.InvalidArgument, Op: "browser.start",
			Msg: fmt.Sprintf("%d browser sessions are open, the limit (--browser-max-sessions); close one with browser.close", p.opts.MaxSessions)}
	}
	token := ownerToken(owner)
	if held := p.heldBy(token); held >= admit.CallerShare(p.opts.MaxSessions, p.opts.Tokens) {
		p.mu.Unlock()
		return nil, false, &errcode.Error{Code: errcode.InvalidArgument, Op: "browser.start",
			Msg: admit.ShareRefusal(token, held, p.opts.MaxSessions, "browser sessions", "--browser-max-sessions")}
	}
	p.starting++
	p.startingBy[token]++
	p.mu.Unlock()

	s, err := p.launch(key, owner, headless, local)

	p.mu.Lock()
	defer p.mu.Unlock()
	p.starting--
	if p.startingBy[token]--; p.startingBy[token] == 0 {
		delete(p.startingBy, token)
	}
	if s != nil && s.tooLarge.Load() {
		// Its shutdown has begun (messageTooLarge), and launch's too when
		// it failed.
		return nil, false, p.tooLargeError("browser.start")
	}
	if err != nil {
		return nil, false, err
	}
	if p.closed {
		go s.shutdown()
		return nil, false, errors.New("the browser provider is closing")
	}
	p.sessions[s.id] = s
	p.log.Info("browser session started", "session", s.id, "key", key, "profile", s.profile)
	return s, false, nil
}

// tooLargeError is the error of a call whose session a DevTools message
// past the limit ended.
func (p *Provider) tooLargeError(op string) error {
	return &errcode.Error{Code: errcode.TooLarge, Op: op, Msg: errTooLarge(p.maxMessage).Error()}
}

// heldBy counts the sessions of token's callers, those starting included;
// p.mu is held.
func (p *Provider) heldBy(token string) int {
	n := p.startingBy[token]
	for _, s := range p.sessions {
		if ownerToken(s.owner) == token {
			n++
		}
	}
	return n
}

// session finds a session by id for owner.
func (p *Provider) session(id, owner, op string) (*session, error) {
	p.mu.Lock()
	s := p.sessions[id]
	p.mu.Unlock()
	if s == nil || s.owner != owner {
		return nil, &errcode.Error{Code: errcode.NotFound, Op: op,
			Msg: fmt.Sprintf("sessionId %q: no such browser session (closed, idle for longer than %s, or never started); start one with browser.start", clip.String(id, 64), p.opts.IdleTimeout)}
	}
	return s, nil
}

// closeSession ends a session and forgets it.
func (p *Provider) closeSession(id, owner string) error {
	p.mu.Lock()
	s := p.sessions[id]
	if s == nil || s.owner != owner {
		p.mu.Unlock()
		return &errcode.Error{Code: errcode.NotFound, Op: "browser.close", Msg: fmt.Sprintf("sessionId %q: no such browser session", clip.String(id, 64))}
	}
	delete(p.sessions, id)
	p.mu.Unlock()
	s.shutdown()
	p.log.Info("browser session closed", "session", id)
	return nil
}

// SessionInfo is what Health says about one session. /health tells it to
// any caller with the daemon's whole token, not only the session's, so it
// names a session by the first 8 characters of its id only, and leaves out
// the client's sessionKey.
type SessionInfo struct {
	IDPrefix    string    `json:"idPrefix"`
	Started     time.Time `json:"started"`
	IdleSeconds float64   `json:"idleSeconds"`
	Busy        bool      `json:"busy"`
	// Blocked counts the requests of the session the network rules refused.
	Blocked int64 `json:"blocked"`
}

// Health is the provider's state for /health.
type Health struct {
	Available   bool          `json:"available"`
	Browser     string        `json:"browser,omitempty"`
	Detail      string        `json:"detail,omitempty"`
	RunAs       string        `json:"runAs,omitempty"`
	MaxSessions int           `json:"maxSessions"`
	Sessions    []SessionInfo `json:"sessions"`
}

// Health describes the provider and its sessions.
func (p *Provider) Health() Health {
	h := Health{Available: p.execPath != "", Browser: p.execPath, Detail: p.missing, MaxSessions: p.opts.MaxSessions, Sessions: []SessionInfo{}}
	if p.runAs != nil {
		h.RunAs = strconv.Itoa(int(p.runAs.Uid))
	}
	p.mu.Lock()
	for _, s := range p.sessions {
		h.Sessions = append(h.Sessions, SessionInfo{IDPrefix: s.id[:8], Started: s.started,
			IdleSeconds: time.Since(time.Unix(0, s.lastUsed.Load())).Seconds(), Busy: len(s.lock) > 0, Blocked: s.blocked.Load()})
	}
	p.mu.Unlock()
	sort.Slice(h.Sessions, func(i, j int) bool { return h.Sessions[i].Started.Before(h.Sessions[j].Started) })
	return h
}

// Close kills every browser and removes every session's directory. It is
// idempotent; no session can start after it.
func (p *Provider) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	all := make([]*session, 0, len(p.sessions))
	for _, s := range p.sessions {
		all = append(all, s)
	}
	p.sessions = map[string]*session{}
	p.mu.Unlock()
	close(p.stop)
	p.reaper.Wait()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(s.shutdown)
	}
	wg.Wait()
	p.net.CloseIdleConnections()
	return nil
}

// randomID is a session id: 128 random bits, so ids cannot be guessed.
func randomID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// callCtx is a context for one action on s: it ends with the call's context
// or after d, and is derived from the session's chromedp context (which an
// action needs, and whose end would end the browser).
func callCtx(s *session, call context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(s.ctx, d)
	stop := context.AfterFunc(call, cancel)
	return ctx, func() { stop(); cancel() }
}

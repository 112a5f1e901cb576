package browser

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/css"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// session is one browser: its own Chromium process (group), profile
// directory and tab. Every action on it holds its lock (one at a time);
// its end (shutdown) does not wait for the lock, and the action running
// then fails.
type session struct {
	id, key, owner string
	dir            string   // the session's directory: HOME and, in it, the profile
	held           *os.File // dir, flocked while the session lives (holdSessionDir)
	profile        string

	lock chan struct{} // a mutex with a timeout: one action at a time

	proxy       *guardProxy // Chromium's only way out
	allocCancel context.CancelFunc
	forget      func() // unregisters Chromium from the subreaper (sandbox.StartOutside)
	ctxCancel   context.CancelFunc
	ctx         context.Context // the chromedp context of the tab
	pgid        atomic.Int64    // Chromium's process group

	lastUsed atomic.Int64 // unix nanoseconds of the last action's end
	started  time.Time

	// refs maps the refs of snapshots to DOM nodes for the page now shown;
	// a navigation of the main frame moves them to stale (see refs.go).
	refMu sync.Mutex
	refs  refTable

	blocked atomic.Int64 // requests the network rules refused

	// vetting bounds the checks of paused requests: at most cap(vetting)
	// resolve at once, and past maxPendingChecks waiting a request is
	// failed at once (a page that fires requests by the thousand gets
	// errors, not a daemon full of goroutines).
	vetting chan struct{}
	pending atomic.Int64

	// navStarted and navLoaded count the main frame's loads begun and
	// finished (act waits for one it started); mainFrame is its id.
	navStarted, navLoaded atomic.Int64
	mainFrame             atomic.Value // cdp.FrameID

	// limit bounds each DevTools message from Chromium (limit.go); it is
	// set by chromedp's ModifyCmdFunc, on the goroutine that starts the
	// browser. tooLarge is set when a message passed it.
	limit    atomic.Pointer[messageLimit]
	tooLarge atomic.Bool

	// dialogs are the JavaScript dialogs the page opened (and that were
	// answered) since a result last reported them (dialog.go).
	dialogMu sync.Mutex
	dialogs  dialogLog

	closeOnce sync.Once
	closed    atomic.Bool // set before the browser is ended
}

// errLocked says the session stayed busy for the whole wait.
var errLocked = errors.New("busy")

// acquire takes the session's lock, waiting at most wait (and no longer
// than ctx allows).
func (s *session) acquire(ctx context.Context, wait time.Duration) error {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case s.lock <- struct{}{}:
		return nil
	case <-t.C:
		return errLocked
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *session) release() {
	s.lastUsed.Store(time.Now().UnixNano())
	<-s.lock
}

// localDial is how a session's proxy connects: through the network door,
// which, under AllowLocal, passes a connection to this machine's loopback
// to Options.LocalPort for the session's caller first (a refusal is the
// door's, so the proxy answers 403 and counts it).
func (p *Provider) localDial(local localCaller) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if !p.opts.AllowLocal || p.opts.LocalPort == nil {
		return p.net.Dial
	}
	judge := func(port int) error { return p.opts.LocalPort(local.within, local.exec, port) }
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return p.net.Dial(netguard.WithLoopbackJudge(ctx, judge), network, addr)
	}
}

// launch starts Chromium for a new session and sets the tab up: requests
// intercepted and checked, downloads denied, the viewport fixed.
func (p *Provider) launch(sessionKey, owner string, headless bool, local localCaller) (s *session, err error) {
	id, err := randomID()
	if err != nil {
		return nil, err
	}
	s = &session{id: id, key: sessionKey, owner: owner, lock: make(chan struct{}, 1), started: time.Now(), vetting: make(chan struct{}, 16)}
	s.lastUsed.Store(time.Now().UnixNano())
	s.refs.reset()
	if s.dir, err = os.MkdirTemp(p.opts.TempDir, sessionDirPrefix); err != nil {
		return nil, fmt.Errorf("making the session's directory: %w", err)
	}
	if s.held, err = holdSessionDir(s.dir); err != nil {
		removeAll(s.dir)
		return nil, fmt.Errorf("locking the session's directory: %w", err)
	}
	s.profile = filepath.Join(s.dir, "profile")
	defer func() {
		if err != nil {
			s.shutdown()
		}
	}()
	subdirs := []string{s.profile, filepath.Join(s.dir, ".config"), filepath.Join(s.dir, ".cache")}
	for _, d := range subdirs {
		if err := os.Mkdir(d, 0o700); err != nil {
			return s, err
		}
	}
	cred := p.runAs
	if cred != nil {
		// Chromium runs as the unprivileged user and must own its home and
		// profile; nothing else is in them.
		for _, d := range append([]string{s.dir}, subdirs...) {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return s, fmt.Errorf("handing the session's directory to uid %d: %w", cred.Uid, err)
			}
		}
	}

	uid := os.Getuid()
	if cred != nil {
		uid = int(cred.Uid)
	}
	s.proxy, err = startProxy(p.localDial(local), p.opts.AllowHTTP, p.opts.AllowLocal, uid, func(target string, err error) {
		s.blocked.Add(1)
		p.log.Info("browser connection refused", "session", s.id, "target", clip.String(target, 200), "reason", err)
	})
	if err != nil {
		return s, fmt.Errorf("starting the session's proxy: %w", err)
	}

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(p.execPath),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(s.profile),
		chromedp.WindowSize(p.opts.ViewportWidth, p.opts.ViewportHeight),
		// chromedp adds --no-sandbox when the daemon is root unless the flag
		// is set false: Chromium keeps its sandbox (it runs as runAs then).
		chromedp.Flag("no-sandbox", false),
		// Every connection goes through the session's proxy, loopback
		// included (Chromium bypasses a proxy for loopback unless told).
		chromedp.ProxyServer("http://" + s.proxy.addr()),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-client-side-phishing-detection", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-sync", true),
		// What a session holds beyond its page (bench/browser/peer.sh,
		// docs/performance.md "Browser"): the omnibox popup's WebUI pages
		// (WebUIOmniboxPopup, WebUIOmniboxAimPopup), which headless Chromium
		// preloads into a renderer of their own that no session ever shows,
		// and the spare renderer kept warm for a next site
		// (SpareRendererForSitePerProcess): 70-100 MiB of PSS between them.
		// Site isolation is untouched: a site still gets a process of its own.
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints,WebUIOmniboxPopup,WebUIOmniboxAimPopup,SpareRendererForSitePerProcess"),
		// The network service in the browser process: it runs unsandboxed
		// here (--service-sandbox-type=none, no seccomp, the browser's user),
		// so its own process isolates nothing from the browser process, and
		// costs 15 MiB.
		chromedp.Flag("enable-features", "NetworkServiceInProcess2"),
		// No GPU process work: no hardware GPU to use here, and no
		// SwiftShader (software WebGL), so the GPU process is only the
		// display compositor (half its memory). Pages see no WebGL.
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-software-rasterizer", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("safebrowsing-disable-auto-update", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("hide-scrollbars", true),
		// WebRTC is not seen by request interception nor by the proxy: no
		// UDP that does not go through the proxy (which carries none). The
		// switch is webrtc-ip-handling-policy; Chromium ignores an unknown
		// one (force-webrtc-..., which let STUN and TURN packets reach any
		// address) without a word (TestWebRTCSendsNoUDP).
		chromedp.Flag("webrtc-ip-handling-policy", "disable_non_proxied_udp"),
		// Memory a page can make a session hold: each renderer's JavaScript
		// heap, and the number of renderers (TestJSHeapBound).
		chromedp.Flag("js-flags", fmt.Sprintf("--max-old-space-size=%d", p.opts.JSHeapMiB)),
		chromedp.Flag("renderer-process-limit", strconv.Itoa(RendererProcessLimit)),
		chromedp.NoInheritEnv,
		chromedp.Env("HOME="+s.dir, "XDG_CONFIG_HOME="+filepath.Join(s.dir, ".config"),
			"XDG_CACHE_HOME="+filepath.Join(s.dir, ".cache"), "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"),
		chromedp.Env(tmpdirEnv(s.dir)...),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			m, err := limitMessages(cmd, p.maxMessage, func() { p.messageTooLarge(s) })
			if err != nil {
				// Start fails with it: no browser without the limit.
				cmd.Err = err
			} else {
				s.limit.Store(m)
			}
			cmd.SysProcAttr = &syscall.SysProcAttr{
				// Its own process group, killed whole at close.
				Setpgid: true,
				// Killed with the daemon (chromedp starts it from a locked
				// thread, so the thread lives as long as the browser).
				Pdeathsig:  syscall.SIGKILL,
				Credential: cred,
			}
			cmd.Dir = s.dir
		}),
	}
	// What Chromium prints is kept (its last 4 KiB) for the error of a start
	// that fails: "No usable sandbox!" and the like say what to fix.
	out := &tailBuffer{max: 4096}
	opts = append(opts, chromedp.CombinedOutput(out))
	if headless {
		opts = append(opts, chromedp.Headless)
	} else if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return s, errors.New("headless: false needs a display (DISPLAY or WAYLAND_DISPLAY), and the daemon has none")
	} else {
		// The display is the one thing of the daemon's environment a
		// headed browser needs.
		for _, k := range []string{"DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "XDG_RUNTIME_DIR"} {
			if v, ok := os.LookupEnv(k); ok {
				opts = append(opts, chromedp.Env(k+"="+v))
			}
		}
	}
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), opts...)
	s.allocCancel = allocCancel
	s.ctx, s.ctxCancel = chromedp.NewContext(allocCtx)

	startCtx, cancel := context.WithTimeout(s.ctx, p.opts.StartTimeout)
	defer cancel()
	// The first Run starts the browser and lives as long as s.ctx; the
	// timeout is applied by a watcher, not through the Run's context (which
	// would end the browser with it).
	done := make(chan error, 1)
	go func() {
		done <- chromedp.ListenBrowser(s.ctx, func(ev any) { p.onBrowserEvent(s, ev) })
	}()
	// Chromium is a child of the daemon that is no command: registered
	// with the sandbox's subreaper from its start until it was waited for,
	// so that an executor without a cgroup never reaps it or kills it as
	// a process escaped from a command.
	s.forget, err = sandbox.StartOutside(func() (int, error) {
		select {
		case err := <-done:
			if err != nil {
				return 0, err
			}
		case <-startCtx.Done():
			return 0, fmt.Errorf("the browser did not start within %s", p.opts.StartTimeout)
		}
		if proc := chromedp.FromContext(s.ctx).Browser.Process(); proc != nil {
			return proc.Pid, nil
		}
		return 0, errors.New("the browser started without a process")
	})
	if err != nil {
		if tail := strings.TrimSpace(out.String()); tail != "" {
			err = fmt.Errorf("%w; it printed: %s", err, tail)
		}
		if cred != nil && errors.Is(err, fs.ErrPermission) {
			// The usual cause: the child's chdir into the session's
			// directory, under a TMPDIR only root may search.
			err = fmt.Errorf("%w (Chromium runs as uid %d, --browser-run-as, and every directory above its session's "+
				"directory %s must let that user search it: start the daemon with TMPDIR set to one that does, such as /tmp)",
				err, cred.Uid, s.dir)
		}
		return s, fmt.Errorf("starting %s: %w", p.execPath, err)
	}
	c := chromedp.FromContext(s.ctx)
	if proc := c.Browser.Process(); proc != nil {
		s.pgid.Store(int64(proc.Pid)) // Setpgid: the group is the leader's pid
	}
	// The tab's events (navigations invalidate refs; dialogs) are heard
	// before anything can navigate.
	if err := chromedp.Listen(s.ctx, func(ev any) { p.onTabEvent(s, ev) }); err != nil {
		return s, err
	}
	// The set-up calls depend on none of each other's answers: they are
	// sent at once, and the session is ready when all have answered
	// (in series they were six round trips to a browser that is busy
	// starting). browser.start returns only then, so no page loads before
	// interception is on.
	tab := func(f func(ctx context.Context, t *chromedp.Target) error) func() error {
		return func() error { return chromedp.Do(startCtx, chromedp.Func(f)) }
	}
	steps := []struct {
		what string
		do   func() error
	}{
		// Every request of every target of this browser pauses at the
		// request stage until intercept lets it go on or fails it.
		{"enabling request interception", func() error {
			_, err := cdp.Call(startCtx, c.Browser, fetch.Enable, fetch.EnableParams{
				Patterns: []*fetch.RequestPattern{{URLPattern: "*", RequestStage: fetch.RequestStageRequest}},
			})
			return err
		}},
		{"denying downloads", func() error {
			_, err := cdp.Call(startCtx, c.Browser, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{Behavior: browser.SetDownloadBehaviorBehaviorDeny})
			return err
		}},
		// A fixed viewport: screenshots have a known size.
		{"setting the viewport", tab(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
				Width: int64(p.opts.ViewportWidth), Height: int64(p.opts.ViewportHeight), DeviceScaleFactor: 1,
			})
			return err
		})},
		{"finding the tab's frame", tab(func(ctx context.Context, t *chromedp.Target) error {
			tree, err := cdp.Call(ctx, t, page.GetFrameTree, cdp.Empty{})
			if err == nil {
				s.mainFrame.Store(tree.FrameTree.Frame.ID)
			}
			return err
		})},
		// chromedp enables the CSS and Log domains on attach; nothing here
		// reads them, and the CSS agent tracks every style sheet of every
		// page the session loads.
		{"disabling the CSS domain", tab(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, css.Disable, cdp.Empty{})
			return err
		})},
		{"disabling the Log domain", tab(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, log.Disable, cdp.Empty{})
			return err
		})},
	}
	errs := make([]error, len(steps))
	var wg sync.WaitGroup
	for i, st := range steps {
		wg.Go(func() {
			if err := st.do(); err != nil {
				errs[i] = fmt.Errorf("%s: %w", st.what, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return s, fmt.Errorf("setting the session up: %w", err)
	}
	return s, nil
}

// singletonSocket is the longest path under TMPDIR of Chromium's process
// singleton: its directory (org.chromium.Chromium.XXXXXX) and socket.
const singletonSocket = "/org.chromium.Chromium.XXXXXX/SingletonSocket"

// tmpdirEnv is Chromium's TMPDIR: the session's directory, so that what it
// makes outside its profile (its process singleton's directory and socket,
// shared memory files under --disable-dev-shm-usage) goes with the
// session. Under /tmp a browser that was killed left its singleton's
// directory there (TestKilledBrowserLeavesNothingBehind). A unix socket's
// path is at most 107 bytes, and Chromium refuses to start when the
// singleton's does not fit; under a directory that long, Chromium keeps
// its default (/tmp).
func tmpdirEnv(dir string) []string {
	if len(dir)+len(singletonSocket) > 107 {
		return nil
	}
	return []string{"TMPDIR=" + dir}
}

// onBrowserEvent runs on the browser's reader goroutine: it must not block
// and must not call into the browser itself (chromedp.Listen's rules).
func (p *Provider) onBrowserEvent(s *session, ev any) {
	if e, ok := ev.(*fetch.EventRequestPaused); ok {
		go p.intercept(s, e)
	}
}

// onTabEvent: a navigation of the main frame makes every ref stale; its
// loads are counted for act's wait; a JavaScript dialog is recorded and
// answered (dialog.go), on a goroutine of its own (this one must not call
// into the browser).
func (p *Provider) onTabEvent(s *session, ev any) {
	switch e := ev.(type) {
	case *page.EventJavascriptDialogOpening:
		leave := s.noteDialog(e)
		go p.answerDialog(s, e.Type, leave)
	case *page.EventFrameNavigated:
		if e.Frame != nil && e.Frame.ParentID == "" {
			s.mainFrame.Store(e.Frame.ID)
			s.refMu.Lock()
			s.refs.invalidate()
			s.refMu.Unlock()
		}
	case *page.EventFrameStartedLoading:
		if id, _ := s.mainFrame.Load().(cdp.FrameID); id == e.FrameID {
			s.navStarted.Add(1)
		}
	case *page.EventFrameStoppedLoading:
		if id, _ := s.mainFrame.Load().(cdp.FrameID); id == e.FrameID {
			s.navLoaded.Store(s.navStarted.Load())
		}
	}
}

// intercept decides one paused request: the scheme rule, then netguard's
// rules on the URL and the addresses its host resolves to now. A refusal
// fails the request as blocked by the client; the page sees a network
// error.
func (p *Provider) intercept(s *session, e *fetch.EventRequestPaused) {
	c := chromedp.FromContext(s.ctx)
	if c == nil || c.Browser == nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	defer s.pending.Add(-1)
	var err error
	if s.pending.Add(1) > maxPendingChecks {
		err = fmt.Errorf("more than %d requests of the page wait for their check", maxPendingChecks)
	} else {
		select {
		case s.vetting <- struct{}{}:
			err = p.vetRequest(ctx, e.Request.URL)
			<-s.vetting
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil {
		s.blocked.Add(1)
		p.log.Info("browser request refused", "session", s.id, "url", clip.String(e.Request.URL, 200), "type", e.ResourceType, "reason", err)
		_, _ = cdp.Call(ctx, c.Browser, fetch.FailRequest, fetch.FailRequestParams{RequestID: e.RequestID, ErrorReason: network.ErrorReasonBlockedByClient})
		return
	}
	_, _ = cdp.Call(ctx, c.Browser, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
}

// messageTooLarge ends a session whose Chromium sent a message past the
// limit: it is forgotten at once (no new call finds it) and shut down; the
// call that was waiting for the message gets errTooLarge (withSession).
// It runs on the limit's goroutine, so the shutdown, which waits for that
// goroutine, runs on its own.
func (p *Provider) messageTooLarge(s *session) {
	s.tooLarge.Store(true)
	p.log.Warn("browser session closed: the page produced a DevTools message past the limit", "session", s.id, "limit", p.maxMessage)
	p.mu.Lock()
	if p.sessions[s.id] == s {
		delete(p.sessions, s.id)
	}
	p.mu.Unlock()
	go s.shutdown()
}

// maxPendingChecks bounds the paused requests of a session waiting for
// their check.
const maxPendingChecks = 1000

// vetRequest is the rule for a request the page makes (a subresource, a
// redirect, a form post): only the allowed schemes, then netguard's.
func (p *Provider) vetRequest(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("unparsable URL: %w", err)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !p.httpOK(u.Hostname()) {
			return errors.New("http is not allowed (https only; the operator may allow http with --browser-allow-http)")
		}
	default:
		return fmt.Errorf("scheme %q is not allowed", u.Scheme)
	}
	_, err = p.net.Vet(ctx, u)
	return err
}

// vetNavigation is the rule for a URL a client asks browser.goto for: the
// request rule, and about:blank.
func (p *Provider) vetNavigation(ctx context.Context, raw string) error {
	if raw == "about:blank" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("url %q: %v", clip.String(raw, 200), err)
	}
	err = p.vetNavigationURL(ctx, raw, u)
	if err != nil && (u.Scheme == "http" || u.Scheme == "https") && !p.opts.AllowLocal && netguard.LoopbackHost(u.Hostname()) {
		// A page the user serves on this machine breaks several rules
		// (http, its port, loopback), each with a flag of its own: say
		// the one setting that admits it, not the first rule's.
		return fmt.Errorf("url %s: %s", clip.String(raw, 200), LocalRefusal)
	}
	return err
}

// vetNavigationURL is vetNavigation's rule on a parsed URL: the scheme,
// then the network door's.
func (p *Provider) vetNavigationURL(ctx context.Context, raw string, u *url.URL) error {
	switch u.Scheme {
	case "https":
	case "http":
		if !p.httpOK(u.Hostname()) {
			return fmt.Errorf("url %s: only https URLs are allowed (the operator may allow http with --browser-allow-http)", clip.String(raw, 200))
		}
	default:
		return fmt.Errorf("url %s: scheme %q is not allowed (https%s, or about:blank)", clip.String(raw, 200), u.Scheme, map[bool]string{true: " or http", false: ""}[p.opts.AllowHTTP])
	}
	if _, err := p.net.Vet(ctx, u); err != nil {
		var be *netguard.BlockedError
		if errors.As(err, &be) {
			return be
		}
		return fmt.Errorf("url %s: %w", clip.String(raw, 200), err)
	}
	return nil
}

// shutdown ends the browser: a graceful close first (it flushes nothing we
// keep, so briefly), then the process group and anything else still using
// the profile is killed, and the session's directory removed. Idempotent.
func (s *session) shutdown() {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		if s.ctx != nil {
			// The graceful close only for a browser that started (its
			// process group is known once launch's start succeeded). Where
			// the start failed, chromedp.Cancel takes the allocation's
			// semaphore, which nothing gives back when no browser ran, and
			// ctxCancel would then wait on it for ever, holding browser.start
			// and the session's directory (TestStartThatCannotExec).
			if s.pgid.Load() > 0 {
				ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
				_ = chromedp.Cancel(ctx)
				cancel()
			}
			s.ctxCancel()
		}
		if pg := s.pgid.Load(); pg > 0 {
			_ = syscall.Kill(-int(pg), syscall.SIGKILL)
		}
		if s.allocCancel != nil {
			s.allocCancel() // returns once Chromium was waited for
		}
		if s.forget != nil {
			s.forget()
		}
		if m := s.limit.Load(); m != nil {
			m.close()
		}
		if s.dir != "" {
			killUsing(s.dir)
		}
		if s.proxy != nil {
			s.proxy.close()
		}
		if s.dir != "" {
			removeAll(s.dir)
		}
		if s.held != nil {
			s.held.Close() // the flock goes with it
		}
	})
}

// sessionDirPrefix names the sessions' directories in Options.TempDir.
const sessionDirPrefix = "agentbe-browser-"

// staleSessionAge is how old an unlocked session directory must be before
// removeStaleSessions takes it for a dead daemon's: a session being made
// takes its lock within milliseconds of its directory.
const staleSessionAge = time.Minute

// holdSessionDir takes an exclusive flock on the session's directory, held
// while the session lives: a daemon killed with SIGKILL loses it with its
// descriptors, which is how the next daemon tells its directories from a
// live one's (another daemon sharing the temporary directory, in any pid
// namespace of this kernel).
func holdSessionDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// removeStaleSessions removes what sessions of daemons killed before
// (SIGKILL, a crash) left in tmp: each agentbe-browser-* directory (a real
// one; a link is left alone) that no live session holds locked and that is
// older than staleSessionAge, after killing the Chromium processes still
// using it (a helper that outlived its browser). It returns how many it
// removed.
func removeStaleSessions(tmp string) int {
	if tmp == "" {
		tmp = os.TempDir()
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), sessionDirPrefix) {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < staleSessionAge {
			continue
		}
		f, err := holdSessionDir(dir)
		if err != nil {
			continue // a live session's
		}
		killUsing(dir)
		removeAll(dir)
		f.Close()
		n++
	}
	return n
}

// killUsing kills every process whose command line names a path in dir
// (the profile as --user-data-dir, the crash handler's database), until
// none has been seen for a few passes: a child can fork as its parent dies,
// and some leave the process group (Chromium's crash handler starts its own
// session). Chromium rewrites its helpers' command lines with spaces for
// separators, so the path is looked for as a substring; the directory's
// name is random, so no other process names it.
func killUsing(dir string) {
	deadline := time.Now().Add(3 * time.Second)
	for quiet := 0; quiet < 3 && time.Now().Before(deadline); {
		if n := len(processesUsing(dir, true)); n == 0 {
			quiet++
		} else {
			quiet = 0
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// processesUsing returns the pids whose command line holds a path in dir,
// and kills them when kill is set. It reads /proc. A pid is only a number:
// the process read may exit and another take its pid before the signal,
// so a kill goes through a pidfd opened before the command line is read.
// While that process lives its pid is not reused, so a command line read
// after the open is its own; once it has exited the signal fails (ESRCH)
// and the pid's new holder is never touched.
func processesUsing(dir string, kill bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(dir + "/")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		pidfd := -1
		if kill {
			if pidfd, err = unix.PidfdOpen(pid, 0); err != nil {
				continue // gone already, or no pidfds (a kernel before 5.3): never a bare kill(pid)
			}
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(cmdline, want) {
			pids = append(pids, pid)
			if kill {
				if beforeKill != nil {
					beforeKill(pid)
				}
				_ = unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
			}
		}
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
	}
	return pids
}

// beforeKill, when a test sets it, runs between reading a matching
// command line and the signal (the window a reused pid would fall in).
var beforeKill func(pid int)

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// removeAll removes dir, trying again for a while: a dying Chromium helper
// can still write into it.
func removeAll(dir string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := os.RemoveAll(dir)
		if err == nil || time.Now().After(deadline) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

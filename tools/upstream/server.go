package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// States of a server, as /health reports them.
const (
	StateStarting   = "starting"
	StateRunning    = "running"
	StateRestarting = "restarting"
	StateStopped    = "stopped"
	StateFailed     = "failed"
)

// Separator joins a server's name and its tool's: server__tool.
const Separator = "__"

// Timing of supervision; Options may shorten them (tests).
type timing struct {
	backoffBase  time.Duration // first restart delay
	backoffMax   time.Duration
	resetAfter   time.Duration // uptime after which the failure count starts over
	startTimeout time.Duration // process start + initialize + first tools/list
	pingInterval time.Duration
	pingTimeout  time.Duration
	stopGrace    time.Duration // SIGTERM to SIGKILL
}

var defaultTiming = timing{
	backoffBase:  500 * time.Millisecond,
	backoffMax:   30 * time.Second,
	resetAfter:   time.Minute,
	startTimeout: 60 * time.Second,
	pingInterval: DefaultPingInterval,
	pingTimeout:  DefaultPingTimeout,
	stopGrace:    5 * time.Second,
}

// errStopping ends a run because the provider is closing.
var errStopping = errors.New("stopping")

// server supervises one upstream: one goroutine (run) owns its process from
// start to exit and decides about restarts; calls use the session it
// publishes.
type server struct {
	cfg    Server
	p      *Provider
	exe    sandbox.Executor
	dir    string          // the server's working directory (absolute)
	ws     fsops.Workspace // what the server is bound to: the workspace, or its cwd scope
	log    *slog.Logger
	stderr *stderrSink
	sem    chan struct{}
	cache  *resultCache // nil: off
	stop   chan struct{}
	done   chan struct{}
	relist chan struct{} // list_changed from the upstream

	// Owned by the supervisor goroutine (run), read by no other.
	began    time.Time // when the running attempt started
	failures int       // failures in a row before it
	listed   []byte    // the tools the registry has from this process, as JSON; nil: none set yet

	mu       sync.Mutex
	state    string
	pid      int
	restarts int // restarts since the daemon started
	attempt  int // failures in a row (the restart attempt under way)
	next     time.Time
	lastErr  string
	session  *mcp.ClientSession
	tools    int
}

// Health is what /health says about one server.
type Health struct {
	Name      string    `json:"name"`
	State     string    `json:"state"`
	PID       int       `json:"pid,omitempty"`
	Restarts  int       `json:"restarts"`
	Tools     int       `json:"tools"`
	Attempt   int       `json:"attempt,omitempty"`
	NextRetry time.Time `json:"next_retry,omitzero"`
	LastError string    `json:"last_error,omitempty"`
}

func (s *server) health() Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := Health{Name: s.cfg.Name, State: s.state, PID: s.pid, Restarts: s.restarts, Tools: s.tools, LastError: s.lastErr}
	if s.state == StateRestarting {
		h.Attempt, h.NextRetry = s.attempt, s.next
	}
	return h
}

func (s *server) setState(state, detail string) {
	s.transition(state, detail, nil)
}

// transition sets the state, with change (if any) made under the same lock,
// so /health never shows a mix of two states (a restart counted while the
// state still says running, say). Only the supervisor goroutine calls it.
func (s *server) transition(state, detail string, change func()) {
	s.mu.Lock()
	if change != nil {
		change()
	}
	s.state = state
	s.mu.Unlock()
	s.p.reg.SetState(s.provider(), registryState(state), detail)
}

func registryState(state string) string {
	if state == StateRunning {
		return "ready"
	}
	return state
}

func (s *server) provider() string { return "upstream:" + s.cfg.Name }

// run is the supervisor: start, serve until the process ends or stops
// answering, then restart with backoff, until stopped or failed.
func (s *server) run() {
	defer close(s.done)
	for {
		s.began = time.Now()
		err := s.runOnce()
		if errors.Is(err, errStopping) {
			s.end(StateStopped, "")
			return
		}
		failures := s.upcomingAttempt() // this end counted
		s.failures = failures
		clean := err == nil
		if clean && s.cfg.Restart.Policy != RestartAlways {
			s.end(StateStopped, "exited with status 0")
			return
		}
		if s.cfg.Restart.Policy == RestartNever {
			s.end(StateStopped, err.Error())
			return
		}
		if failures > s.cfg.Restart.MaxRetries {
			s.log.Error("upstream failed: giving up after repeated failures", "failures", failures, "err", err, "last_error", s.lastStderr())
			s.end(StateFailed, fmt.Sprintf("%d failures in a row; last: %v", failures, err))
			return
		}
		delay := backoff(s.p.timing, failures)
		s.transition(StateRestarting, fmt.Sprintf("attempt %d of %d in %s: %v", failures, s.cfg.Restart.MaxRetries, delay.Round(time.Millisecond), err), func() {
			s.attempt, s.next = failures, time.Now().Add(delay)
			s.restarts++
		})
		s.log.Warn("upstream ended; restarting", "err", err, "attempt", failures, "in", delay.Round(time.Millisecond))
		select {
		case <-time.After(delay):
		case <-s.stop:
			s.end(StateStopped, "")
			return
		}
	}
}

// backoff is base*2^(n-1), capped, with ±20% jitter so servers that failed
// together do not restart together.
func backoff(t timing, n int) time.Duration {
	d := t.backoffBase << min(n-1, 20)
	if d > t.backoffMax || d <= 0 {
		d = t.backoffMax
	}
	j := 0.8 + 0.4*rand.Float64()
	return time.Duration(float64(d) * j)
}

// end leaves the server down for good: its tools are withdrawn (clients get
// list_changed) and the state says why.
func (s *server) end(state, detail string) {
	s.mu.Lock()
	s.session, s.pid, s.tools = nil, 0, 0
	if detail != "" && state == StateFailed {
		s.lastErr = joinNonEmpty(detail, s.stderr.last())
	}
	s.mu.Unlock()
	_ = s.p.reg.Set(s.provider(), nil)
	s.setState(state, detail)
}

func joinNonEmpty(a, b string) string {
	if b == "" {
		return a
	}
	return a + "\n" + b
}

func (s *server) lastStderr() string { return s.stderr.last() }

// runOnce starts the process, connects, lists and publishes the tools, and
// serves until the process exits (nil for status 0), stops answering pings,
// or the provider stops (errStopping).
func (s *server) runOnce() error {
	s.setState(StateStarting, "")
	s.listed = nil // a new process's tools are set once whatever they are
	// The transport reads and writes the process's pipes themselves
	// (sandbox.StdoutPipe, sandbox.StdinPipe), on the session's goroutines:
	// no copier in between. When the process's side of its stdout ends (it
	// closed it, or exited), the stream is dead, and the supervisor sees it
	// at once, not at the next ping; a process that closed its stdin is
	// seen at the next write.
	stdin, stdout := &sandbox.StdinPipe{}, &sandbox.StdoutPipe{}
	proc, err := s.exe.Start(context.Background(), sandbox.Request{
		Command:   sandbox.CommandLine(append([]string{s.cfg.Command}, s.cfg.Args...)...),
		Workspace: s.ws,
		Env:       s.env(),
	}, sandbox.Stdio{Stdin: stdin, Stdout: stdout, Stderr: s.stderr})
	if err != nil {
		s.recordErr(err.Error())
		return fmt.Errorf("start: %w", err)
	}
	tr := newTransport(stdout.File(), pipeWriter{stdin.File()}, s.p.maxMessage, s.log)
	tr.writeTimeout = s.p.timing.pingTimeout
	pid := 0
	if pp, ok := proc.(interface{ Pid() int }); ok {
		pid = pp.Pid()
	}
	s.mu.Lock()
	s.pid = pid
	s.mu.Unlock()
	s.log.Info("upstream started", "pid", pid)

	exited := make(chan struct{})
	var status sandbox.ExitStatus
	var waitErr error
	go func() {
		status, waitErr = proc.Wait()
		// Wait has closed the stdin pipe but not read stdout to its end:
		// the session does, before the exit is seen.
		tr.exited(stdoutEndGrace)
		close(exited)
	}()
	exitErr := func() error {
		if waitErr != nil {
			return waitErr
		}
		if status.Code == 0 {
			return nil
		}
		if status.Signal != "" {
			return fmt.Errorf("killed by SIG%s", status.Signal)
		}
		return fmt.Errorf("exited with status %d", status.Code)
	}
	kill := func() {
		_ = proc.Signal("KILL")
		<-exited
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "agentbe-daemon", Version: s.p.version}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case s.relist <- struct{}{}:
			default:
			}
		},
	})
	// The workspace is the upstream's MCP root: servers on protocol versions
	// before 2026-07-28 (server-filesystem, most published ones) ask for it.
	//lint:ignore SA1019 roots are deprecated in 2026-07-28 but are how today's servers learn their directory
	client.AddRoots(&mcp.Root{URI: (&url.URL{Scheme: "file", Path: s.p.ws.Root()}).String(), Name: "workspace"})
	ctx, cancel := context.WithTimeout(context.Background(), s.p.timing.startTimeout)
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	cs, err := client.Connect(ctx, tr, nil)
	if err == nil {
		err = s.publish(ctx, cs)
		if err != nil {
			cs.Close()
		}
	}
	cancel()
	if err != nil {
		select {
		case <-s.stop:
			s.stopProcess(proc, exited, nil)
			return errStopping
		default:
		}
		kill()
		if e := exitErr(); e != nil {
			err = fmt.Errorf("%w (the process %v)", err, e)
		}
		s.recordErr(err.Error())
		return fmt.Errorf("handshake: %w", err)
	}
	if s.cache != nil {
		s.cache.clear() // a new process may answer differently
	}
	s.mu.Lock()
	s.session = cs
	s.mu.Unlock()
	s.setState(StateRunning, "")
	s.log.Info("upstream running", "pid", pid, "tools", s.toolCount())

	exitedNow := func() error {
		s.detach(cs)
		cs.Close()
		err := exitErr()
		if err != nil {
			s.recordErr(err.Error())
		}
		return err
	}
	// connectionEnded: the stream to the upstream can carry no more (see
	// transport); the server is killed and restarted at once, without
	// waiting for a ping to fail.
	connectionEnded := func() error {
		s.detachToKill(cs)
		err := tr.err()
		if pipesClosed(err) {
			// The process closed its stdout: usually it is exiting, and
			// its exit says why; one that runs on is killed.
			t := time.NewTimer(stdoutEndGrace)
			defer t.Stop()
			select {
			case <-exited:
				return exitedNow()
			case <-t.C:
				which := "stdout"
				if !errors.Is(err, io.EOF) {
					which = "stdin"
				}
				err = fmt.Errorf("it closed its %s and ran on for %s", which, stdoutEndGrace)
			}
		}
		msg := fmt.Sprintf("its connection ended: %v; killed", err)
		s.log.Warn("upstream connection ended; killing it", "err", err)
		kill()
		cs.Close()
		s.recordErr(msg)
		return errors.New(msg)
	}
	lastList := time.Now()
	var relistLater <-chan time.Time
	relist := func() {
		lastList = time.Now()
		lctx, lcancel := context.WithTimeout(context.Background(), s.p.timing.pingTimeout)
		defer lcancel()
		if err := s.publish(lctx, cs); err != nil {
			s.log.Warn("upstream: re-listing tools after list_changed failed", "err", err)
		}
	}
	ping := time.NewTicker(s.p.timing.pingInterval)
	defer ping.Stop()
	for {
		select {
		case <-exited:
			select {
			case <-tr.dead:
				if !pipesClosed(tr.err()) {
					// The stream broke first (the process may have
					// exited because the session then closed its stdin).
					return connectionEnded()
				}
			default:
			}
			return exitedNow()
		case <-s.stop:
			s.detach(cs)
			s.stopProcess(proc, exited, cs)
			return errStopping
		case <-tr.dead:
			return connectionEnded()
		case <-s.relist:
			// At most one listing per relistEvery, however many
			// list_changed the server sends: each one the registry takes
			// is told to every client of every face.
			if wait := relistEvery - time.Since(lastList); wait > 0 {
				if relistLater == nil {
					relistLater = time.After(wait)
				}
				break
			}
			relist()
		case <-relistLater:
			relistLater = nil
			relist()
		case <-ping.C:
			pctx, pcancel := context.WithTimeout(context.Background(), s.p.timing.pingTimeout)
			err := cs.Ping(pctx, nil)
			pcancel()
			if err != nil {
				select {
				case <-tr.dead:
					return connectionEnded() // the ping failed because the stream had ended
				case <-exited:
					return exitedNow()
				default:
				}
				s.detachToKill(cs)
				msg := fmt.Sprintf("no answer to ping within %s (%v); killed", s.p.timing.pingTimeout, err)
				s.log.Warn("upstream wedged; killing it", "err", err)
				kill()
				cs.Close()
				s.recordErr(msg)
				return errors.New(msg)
			}
		}
	}
}

// stdoutEndGrace is how long a server whose stdout ended may take to exit
// before it is killed (an exiting process closes its stdout first), and
// how long the stdout of one that exited may take to end (transport.exited).
const stdoutEndGrace = time.Second

// pipesClosed says the stream ended because the process's pipes were
// closed: its stdout at its end (io.EOF: it closed it, or exited), its
// stdin under a write (io.ErrClosedPipe: it closed it, or exited; see
// pipeWriter).
func pipesClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe)
}

// detach stops new calls from using cs (they get "unavailable") while the
// tools stay listed: a restart is expected.
func (s *server) detach(cs *mcp.ClientSession) {
	s.mu.Lock()
	s.detachLocked(cs)
	s.mu.Unlock()
}

func (s *server) detachLocked(cs *mcp.ClientSession) {
	if s.session == cs {
		s.session = nil
	}
	s.pid = 0
}

// upcomingAttempt is the number of the restart that follows the running
// attempt's failure: the failures in a row so far plus this one, counted
// from one again after an attempt that ran resetAfter.
func (s *server) upcomingAttempt() int {
	if time.Since(s.began) >= s.p.timing.resetAfter {
		return 1
	}
	return s.failures + 1
}

// detachToKill detaches cs from a server about to be killed for a dead
// connection or a missed ping, which can take a grace period: from here
// /health says restarting, with the attempt that follows (its time not yet
// set), where the policy restarts it, not running with no process, which
// calls would contradict.
func (s *server) detachToKill(cs *mcp.ClientSession) {
	attempt := s.upcomingAttempt()
	if s.cfg.Restart.Policy == RestartNever || attempt > s.cfg.Restart.MaxRetries {
		s.detach(cs) // it will not be restarted: end sets the state
		return
	}
	s.transition(StateRestarting, "its connection ended or it stopped answering; ending it", func() {
		s.detachLocked(cs)
		s.attempt, s.next = attempt, time.Time{}
	})
}

// stopProcess ends the server on shutdown: close its stdin (many servers
// exit on EOF), SIGTERM, then SIGKILL after the grace period.
func (s *server) stopProcess(proc sandbox.Process, exited chan struct{}, cs *mcp.ClientSession) {
	if cs != nil {
		cs.Close()
	}
	_ = proc.CloseStdin()
	_ = proc.Signal("TERM")
	select {
	case <-exited:
	case <-time.After(s.p.timing.stopGrace):
		s.log.Warn("upstream did not exit after SIGTERM; killing it", "grace", s.p.timing.stopGrace)
		_ = proc.Signal("KILL")
		<-exited
	}
}

func (s *server) recordErr(msg string) {
	s.mu.Lock()
	s.lastErr = joinNonEmpty(msg, s.stderr.last())
	s.mu.Unlock()
}

func (s *server) toolCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

// env is what the server gets besides the sandbox's minimal base: its env
// (already in the executor's base) plus the passEnv names from the daemon.
func (s *server) env() map[string]string {
	env := map[string]string{}
	for _, k := range s.cfg.PassEnv {
		if v, ok := s.p.getenv(k); ok {
			env[k] = v
		}
	}
	return env
}

// relistEvery is the shortest time between two listings of a server's
// tools for its notifications/tools/list_changed.
const relistEvery = time.Second

// Bounds of one server's tool list (publish).
const (
	maxTools     = 1000     // tools served per server; the rest are left out
	maxToolPages = 100      // tools/list pages read per listing
	maxToolBytes = 32 << 20 // the served tools' JSON, all together (the daemon's largest reply)
)

// publish lists the upstream's tools and sets them in the registry as
// server__tool, filtered, with schemas and descriptions unchanged. A tool
// the daemon cannot serve is left out, logged, and the others are served:
// a name that is not a valid tool name once prefixed (registry.ValidName:
// `/`, `..`, control characters, too long), a name listed twice, an input
// schema that is not an object of type "object" (registry.ValidInputSchema).
// At most maxTools tools, maxToolPages pages and maxToolBytes of tool
// definitions are taken; a longer list is cut there (logged).
func (s *server) publish(ctx context.Context, cs *mcp.ClientSession) error {
	var tools []registry.Tool
	var defs []*mcp.Tool // what tools were built from, compared with the last listing
	seen := map[string]bool{}
	skipped, size := 0, 0
	params := &mcp.ListToolsParams{}
	cut := ""
pages:
	for page := 0; ; page++ {
		if page == maxToolPages {
			cut = fmt.Sprintf("after %d pages", maxToolPages)
			break
		}
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		for _, t := range res.Tools {
			if !s.cfg.Keep(t.Name) {
				continue
			}
			if err := s.servable(t, seen); err != nil {
				if skipped++; skipped <= 10 {
					s.log.Warn("upstream tool left out", "tool", clip.String(t.Name, 80), "err", clip.String(err.Error(), 200))
				}
				continue
			}
			if len(tools) == maxTools {
				cut = fmt.Sprintf("at %d tools", maxTools)
				break pages
			}
			if b, err := json.Marshal(t); err == nil {
				size += len(b)
			}
			if size > maxToolBytes {
				cut = fmt.Sprintf("at %s of tool definitions", byteSize(maxToolBytes))
				break pages
			}
			tools = append(tools, s.tool(t))
			defs = append(defs, t)
		}
		if res.NextCursor == "" {
			break
		}
		params.Cursor = res.NextCursor
	}
	if skipped > 10 {
		s.log.Warn("upstream tools left out (only the first 10 logged)", "count", skipped)
	}
	if cut != "" {
		s.log.Warn("upstream tool list cut", "where", cut, "served", len(tools))
	}
	if listed, err := json.Marshal(defs); err == nil && s.listed != nil && bytes.Equal(listed, s.listed) {
		return nil // the same tools: the registry (and every client) is not told again
	} else {
		s.listed = listed
	}
	if err := s.p.reg.Set(s.provider(), tools); err != nil {
		s.listed = nil
		return err
	}
	s.mu.Lock()
	s.tools = len(tools)
	s.mu.Unlock()
	return nil
}

// servable says why the registry could not serve t as server__tool, or
// nil; seen holds the names already taken in this listing.
func (s *server) servable(t *mcp.Tool, seen map[string]bool) error {
	name := s.cfg.Name + Separator + t.Name
	if err := registry.ValidName(t.Name); err != nil {
		return err
	}
	if err := registry.ValidName(name); err != nil {
		return err
	}
	if seen[name] {
		return errors.New("listed twice")
	}
	seen[name] = true
	return registry.ValidInputSchema(t.InputSchema)
}

// tool is one upstream tool as the registry serves it.
func (s *server) tool(t *mcp.Tool) registry.Tool {
	name := t.Name
	checker := NewPathChecker(s.dir, t.InputSchema)
	var ann *mcp.ToolAnnotations
	if t.Annotations != nil {
		a := *t.Annotations
		ann = &a
	}
	timeout := time.Duration(s.cfg.Timeout)
	cache := s.cache
	if !cacheable(t) {
		cache = nil
	}
	return registry.Tool{
		Name: s.cfg.Name + Separator + name,
		// Callable as the server names it too while no other tool is
		// (docs/upstreams.md, "Bare names").
		Bare:        name,
		Title:       t.Title,
		Description: t.Description,
		InputSchema: t.InputSchema,
		Annotations: ann,
		// What a server's tool does is the server's; only one that says
		// it reads is callable without exec.
		RunsCommands: ann == nil || !ann.ReadOnlyHint,
		WholeRoot:    true,
		// A little over the server's own timeout, so its answer (naming
		// the server and the limit) wins over the registry's.
		Timeout: timeout + time.Second,
		Handler: func(ctx context.Context, call registry.Call) *mcp.CallToolResult {
			return s.call(ctx, call, name, checker, timeout, cache)
		},
	}
}

// call routes one call: the path check, the server's concurrency cap, its
// timeout, then tools/call on the current session. Cancellation (timeout,
// a caller gone) reaches the upstream as notifications/cancelled (the SDK
// sends it when ctx ends).
func (s *server) call(ctx context.Context, call registry.Call, tool string, checker *PathChecker, timeout time.Duration, cache *resultCache) *mcp.CallToolResult {
	ws := call.Workspace
	if ws == nil {
		ws = s.p.ws
	}
	if args := bytes.TrimSpace(call.Args); len(args) > 0 && args[0] != '{' && string(args) != "null" {
		// MCP's arguments are an object; a server may take anything
		// else its own way (positional, a bare path), unchecked.
		return errorResult(errcode.InvalidArgument, fmt.Sprintf("server %s: tool %s: the arguments must be a JSON object", s.cfg.Name, tool))
	}
	if err := checker.Check(ws, call.Args); err != nil {
		return errorResult(errcode.Of(err), errcode.Sentence(err))
	}
	var key string
	if cache != nil {
		var ok bool
		if key, ok = cacheKey(tool, ws.Root(), call.Args); ok {
			if res, hit := cache.get(key); hit {
				return res
			}
		} else {
			cache = nil
		}
	}
	s.mu.Lock()
	cs, state, attempt := s.session, s.state, s.attempt
	s.mu.Unlock()
	if cs == nil {
		return s.unavailable(state, attempt)
	}
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		return errorResult(errcode.Timeout, fmt.Sprintf("server %s: still busy with %d calls (maxConcurrent) when the call's time ran out", s.cfg.Name, cap(s.sem)))
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var args any
	if len(call.Args) > 0 && string(call.Args) != "null" {
		args = json.RawMessage(call.Args)
	}
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	switch {
	case err == nil:
		if cache != nil {
			cache.put(key, res)
		}
		return res
	case ctx.Err() != nil:
		return errorResult(errcode.Timeout, ctx.Err().Error()) // the registry words its own deadline
	case cctx.Err() != nil:
		return errorResult(errcode.Timeout, fmt.Sprintf("server %s: tool %s timed out after %s (the server's timeout)", s.cfg.Name, tool, timeout))
	default:
		var werr *jsonrpc.Error
		if errors.As(err, &werr) && werr.Code == codeMessageTooLarge {
			// The transport dropped the answer; the session goes on.
			return errorResult(errcode.TooLarge, fmt.Sprintf("server %s: tool %s: %s", s.cfg.Name, tool, werr.Message))
		}
		s.mu.Lock()
		state, attempt = s.state, s.attempt
		gone := s.session != cs
		s.mu.Unlock()
		if gone {
			return s.unavailable(state, attempt)
		}
		return errorResult(errcode.ExecError, fmt.Sprintf("server %s: %v", s.cfg.Name, err))
	}
}

func (s *server) unavailable(state string, attempt int) *mcp.CallToolResult {
	why := state
	switch state {
	case StateRestarting:
		why = fmt.Sprintf("restarting, attempt %d of %d", attempt, s.cfg.Restart.MaxRetries)
	case StateFailed:
		why = "failed; see last_error in /health"
	case StateRunning, "":
		why = "restarting"
	}
	return errorResult(errcode.ConnectionClosed, fmt.Sprintf("server %s is unavailable (%s)", s.cfg.Name, why))
}

func errorResult(code errcode.Code, text string) *mcp.CallToolResult {
	return registry.WithCode(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}, code)
}

// Package mcphttp serves a workspace's tools over the Model Context Protocol,
// as a drop-in replacement for the daemon of the npm package agent-backend.
//
// One Server exposes the tools of docs/protocol.md (read_text_file,
// write_file, edit_file, list_directory, ..., exec, grep) with the names,
// arguments and result texts of agent-backend 0.13.2, so that the published
// clients (RemoteFilesystemBackend, LocalFilesystemBackend.getMCPClient(),
// the Python client, any MCP client) and the LLM prompts written against the
// reference keep working. It can be reached two ways:
//
//   - Handler: MCP streamable HTTP, stateless, mounted by the daemon at /mcp.
//     Before the MCP SDK sees a request, the handler applies the checks of
//     docs/protocol.md in order (method, Origin and Host, bearer token,
//     X-Root-Dir, scope headers, body size), then the bounds of bounds.go
//     (requests in flight per client address, messages per batch); see
//     serveHTTP. Every reply is bounded too (Options.MaxReplyBytes). A single
//     tools/call or tools/list (and notifications/initialized) is answered
//     on a fast path that skips the SDK's per-request session, byte for
//     byte as the SDK would (fastpath.go); everything else is the SDK's.
//     With Options.Sessions the handler is the SDK's stateful one instead
//     (Mcp-Session-Id, GET stream, DELETE; idle expiry and a session cap),
//     with the same checks and no fast path.
//   - ServeStdio: MCP over stdin/stdout, for `agent-backend daemon
//     --local-only`, which is how LocalFilesystemBackend.getMCPClient()
//     spawns the daemon.
//
// The tools are those of a registry.Registry (Options.Registry): tools/list
// is its list, tools/call goes through registry.Call (its concurrency cap
// and deadlines), and when a provider changes its tools the SDK's tool set
// follows and connected sessions get notifications/tools/list_changed
// (tools.go). The package does not know which provider a tool comes from;
// the daemon sets the workspace tools (tools/workspace) as one.
//
// The package never touches the file system or starts a process itself: the
// tools do, through fsops.Workspace and sandbox.Executor; this package only
// resolves the workspace a call works in (the root or the request's scope).
// Every failure of a tool is a tool result with isError set and a message that
// names the path or limit involved (see errors.go), never a JSON-RPC error,
// because that is what the reference does and what LLM clients can act on.
package mcphttp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/internal/ratelog"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// DefaultMaxBodyBytes is the request body limit of the HTTP handler when
// Options.MaxBodyBytes is 0. A write_file of a few MiB still fits; a larger
// body is answered 413 before it is read.
const DefaultMaxBodyBytes = 4 << 20

// DefaultMaxStdioLineBytes is the longest stdio line (one request, without
// its newline) when Options.MaxStdioLineBytes is 0; a longer line is
// answered with JSON-RPC error -32600 and never held whole
// (drainingReader.take). It is the go-sdk's own stdio bound
// (mcp.DefaultMaxLineLength), past which the SDK ended the session, and
// it is above --max-read-size's default (10 MiB), so a text file a client
// may read whole it may write back in one write_file. It is not
// DefaultMaxBodyBytes: stdio's peer is the operator's own client, which
// spawned the daemon, and its lines are read one at a time, where HTTP
// bodies come from any caller with a token, many at once.
const DefaultMaxStdioLineBytes = 16 << 20

// Defaults of the opt-in sessions (Options.Sessions).
const (
	DefaultSessionIdleTimeout = 30 * time.Minute
	DefaultMaxSessions        = 100
)

// Options configure a Server. Workspace is required; everything else has a
// working zero value.
type Options struct {
	// Workspace is the tree the tools work on: the daemon's root, or the
	// static --scopePath scope already applied to it.
	Workspace fsops.Workspace
	// Registry holds the tools served (required). tools/list is its list and
	// tools/call goes through registry.Call; when its tools change, the
	// SDK's tool set follows and the SDK tells connected sessions
	// (notifications/tools/list_changed).
	Registry *registry.Registry
	// RootDir is the daemon's root exactly as configured. A request's
	// X-Root-Dir header must equal it (docs/protocol.md, the /mcp checks).
	RootDir string
	// StaticScope is --scopePath ("" if none). A request that also sends
	// X-Scope-Path is refused with 400 "Scope conflict".
	StaticScope string
	// Admit, when set, are the daemon's admission rules (internal/admit):
	// its guard, its token rule (the token a reload rotates, the token
	// file's set), its root, its static scope and its holds, shared with
	// every other face. AuthToken, Tokens, Holds, Guard, RootDir and
	// StaticScope are then not read; they build the rules of a server
	// that runs alone.
	Admit *admit.Rules
	// AuthToken is the bearer token every HTTP request must carry; "" turns
	// authentication off.
	AuthToken string
	// Tokens is the token file's set (--tokens), shared with the daemon,
	// which swaps it on reload; nil without one. A request may carry the
	// AuthToken or one of these; a file's token binds the request to its
	// scope and may make it read-only or without exec (callTool).
	Tokens *atomic.Pointer[httpguard.TokenSet]
	// Holds, when set, are the daemon's admit.Holds: each MCP session is
	// held in them, and is closed when a reload removes its token or
	// changes its rights (admit.Rules.Rejudge).
	Holds *admit.Holds
	// AllowedOrigins are the browser origins (scheme://host[:port]) allowed
	// to call the HTTP endpoint, "*" for any. Requests without an Origin
	// header (every non-browser client) and loopback origins are always
	// allowed; any other origin gets 403, which is what stops a DNS
	// rebinding page from driving a local daemon.
	AllowedOrigins []string
	// Guard applies the Origin and Host rules (internal/httpguard); nil
	// builds one from AuthToken and AllowedOrigins. The daemon passes the
	// one its mux uses, so every endpoint shares it.
	Guard *httpguard.Guard
	// MaxBodyBytes limits an HTTP request body; 0 means DefaultMaxBodyBytes,
	// a negative value means no limit. Larger bodies get 413.
	MaxBodyBytes int64
	// MaxStdioLineBytes limits one stdio line (ServeStdio), its newline not
	// counted; 0 means DefaultMaxStdioLineBytes, a negative value means no
	// limit. A longer line is answered with JSON-RPC error -32600, and the
	// session reads on from the next line.
	MaxStdioLineBytes int64
	// MaxBatch caps the messages of one JSON-RPC batch; 0 means
	// DefaultMaxBatch. A larger batch is refused whole (HTTP 400, JSON-RPC
	// error -32600) before any of it runs.
	MaxBatch int
	// MaxReplyBytes caps one HTTP reply; 0 means DefaultMaxReplyBytes. A
	// request whose result would not fit (in a batch: in what the earlier
	// results left) is answered with JSON-RPC error -32000 instead.
	MaxReplyBytes int64
	// MaxInflightPerIP caps the requests one client address may have in
	// flight; 0 means DefaultMaxInflightPerIP, negative means no cap. One
	// more waits up to 2 s for a slot, then gets 429 with Retry-After. A
	// stdio session is one client: a line whose requests would take it past
	// the cap is answered at once with JSON-RPC error -32000, and none of it
	// runs (docs/mcp.md).
	MaxInflightPerIP int
	// Inflight, when set, is the per-address count to take MaxInflightPerIP
	// from instead of a count of the endpoint's own: the daemon shares one
	// between /mcp and /execute, so that a client address has at most its
	// limit in flight across both.
	Inflight *admit.Inflight
	// Sessions turns on stateful streamable HTTP: initialize opens a session
	// (Mcp-Session-Id), GET opens its server-to-client SSE stream (where
	// notifications/tools/list_changed arrive), DELETE ends it, and an
	// unknown session id gets 404. Off, the endpoint is stateless. With
	// sessions every request goes through the SDK (no fast path).
	Sessions bool
	// SessionIdleTimeout ends a session idle that long; 0 means
	// DefaultSessionIdleTimeout.
	SessionIdleTimeout time.Duration
	// MaxSessions caps open sessions; 0 means DefaultMaxSessions. An
	// initialize past it gets 503 naming the limit.
	MaxSessions int
	// Version is reported as the MCP server version.
	Version string
	// Name is reported as the MCP server name (serverInfo.name); "" means
	// local-filesystem, or memory for an in-memory workspace.
	Name string
	// Instructions are added, after a blank line, to what the initialize
	// result tells clients (another provider's rules, such as a tool site's).
	Instructions string
	// Logger receives request failures at Warn and tool failures at Debug;
	// nil discards.
	Logger *slog.Logger
}

// instructions is what every client is told in the initialize result.
const instructions = "Tools over one workspace directory. Paths are relative to the workspace root " +
	"(absolute paths are taken as relative to it); nothing outside it is reachable."

func extraInstructions(more string) string {
	if more == "" {
		return ""
	}
	return "\n\n" + more
}

// Server is an MCP server over one workspace. It is safe for concurrent use:
// one *mcp.Server (with its tool table and compiled input schemas) serves
// every HTTP request and stdio session.
type Server struct {
	opts    Options
	log     *slog.Logger
	mcp     *mcp.Server
	jsonH   http.Handler // streamable HTTP, replies as application/json
	sseH    http.Handler // streamable HTTP, replies as text/event-stream
	sessH   http.Handler // stateful streamable HTTP (Options.Sessions), else nil
	maxSess int
	// sessShare is how many of the maxSess sessions one token may hold
	// (admit.CallerShare); sessOwner the token that opened each session,
	// by id, and sessOpening the sessions each token is opening; sessHeld
	// each open session's hold (holdSession), by id, which a reload that
	// revokes or changes its token ends.
	sessMu      sync.Mutex
	sessShare   int
	sessOwner   map[string]string
	sessOpening map[string]int
	sessHeld    map[string]context.Context
	handler     http.Handler
	maxBody     int64
	maxLine     int // stdio line bound (MaxStdioLineBytes); 0: none
	token       httpguard.Token
	guard       *httpguard.Guard
	admit       admit.Rules
	maxBatch    int
	maxReply    int64
	inflight    *admit.Inflight // nil: no cap
	// stdioMaxInflight caps the requests of one stdio session waiting for
	// answers (MaxInflightPerIP: a session is one client); 0: no cap.
	stdioMaxInflight int
	warns            ratelog.Every // refusals of bounds.go, rate-limited

	mu     sync.Mutex
	closed bool
	stdio  map[*mcp.ServerSession]struct{}
	done   chan struct{}

	reg        *registry.Registry
	unsub      func()
	syncMu     sync.Mutex      // serializes syncTools
	served     map[string]bool // tools registered with the SDK; under syncMu
	listMu     sync.Mutex
	listGen    uint64          // bumped by syncTools; under listMu
	listResult json.RawMessage // the SDK's tools/list result (fastpath.go)

	noFastPath bool // tests: send every request through the SDK
	// stdioLedgerSeen, set only by tests, is handed each stdio session's
	// ledger as the session starts.
	stdioLedgerSeen func(*stdioLedger)
	fastCalls       atomic.Int64 // tools/calls answered on the fast path
	// stdioCalls are the calls the SDK runs for each stdio session, to
	// cancel when the session is ended (stdiocalls.go).
	stdioCallsMu sync.Mutex
	stdioCalls   map[*mcp.ServerSession]*sessionCalls

	// afterConnect (tests) runs in ServeStdio between Connect's return
	// and the fast path learning the session, while the SDK reads lines.
	afterConnect func()

	// callers holds the admitted caller and the reply budget of each
	// request handed to the SDK, by the key its headerCaller header
	// carries (serveSDK).
	callersMu sync.Mutex
	callers   map[uint64]sdkRequest
	callerSeq uint64 // under callersMu
}

// New builds a Server. It fails only when Options are unusable.
func New(opts Options) (*Server, error) {
	if opts.Workspace == nil {
		return nil, errors.New("mcphttp: Options.Workspace is required")
	}
	if opts.Registry == nil {
		return nil, errors.New("mcphttp: Options.Registry is required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		opts:    opts,
		log:     log,
		stdio:   map[*mcp.ServerSession]struct{}{},
		done:    make(chan struct{}),
		reg:     opts.Registry,
		served:  map[string]bool{},
		callers: map[uint64]sdkRequest{},
	}
	s.maxBody = opts.MaxBodyBytes
	if s.maxBody == 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	switch n := cmp.Or(opts.MaxStdioLineBytes, DefaultMaxStdioLineBytes); {
	case n < 0:
	case n > math.MaxInt-sdkLineSlack:
		s.maxLine = math.MaxInt - sdkLineSlack
	default:
		s.maxLine = int(n)
	}
	s.maxBatch = cmp.Or(opts.MaxBatch, DefaultMaxBatch)
	s.maxReply = cmp.Or(opts.MaxReplyBytes, DefaultMaxReplyBytes)
	switch n := cmp.Or(opts.MaxInflightPerIP, DefaultMaxInflightPerIP); {
	case opts.Inflight != nil:
		s.inflight = opts.Inflight
		s.stdioMaxInflight = opts.Inflight.Limit()
	case n > 0:
		s.inflight = admit.NewInflight(n, 0)
		s.stdioMaxInflight = n
	}
	if opts.Admit != nil {
		s.admit = *opts.Admit
	} else {
		s.admit = admit.Rules{Token: httpguard.NewTokens(opts.AuthToken, opts.Tokens), RootDir: opts.RootDir, StaticScope: opts.StaticScope, Holds: opts.Holds, Guard: opts.Guard}
	}
	if s.admit.Guard == nil {
		s.admit.Guard = httpguard.New(httpguard.Options{AuthToken: opts.AuthToken, AllowedOrigins: opts.AllowedOrigins, Logger: log})
	}
	s.admit.MaxBody = s.maxBody
	s.guard, s.token = s.admit.Guard, s.admit.Token

	// The SDK logs every session's connect and disconnect at Info: in
	// stateless HTTP that is two lines per request. Only its warnings and
	// errors reach the daemon's log.
	sdkLog := slog.New(minLevel{h: log.Handler(), min: slog.LevelWarn})

	name := opts.Name
	switch {
	case name != "":
	case !fsops.CanExec(opts.Workspace):
		name = "memory"
	default:
		name = "local-filesystem"
	}
	version := opts.Version
	if version == "" {
		version = "0.0.0-dev"
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{
		Name:    name,
		Title:   "agentbe-daemon",
		Version: version,
	}, &mcp.ServerOptions{
		Logger:       sdkLog,
		Instructions: instructions + extraInstructions(opts.Instructions),
	})
	s.mcp.AddReceivingMiddleware(s.limitReplies, s.auditUnknownTools)
	s.unsub = s.reg.Subscribe(s.syncTools)
	s.syncTools()

	// Two stateless handlers over the same mcp.Server: the SDK fixes the
	// reply format per handler, and we pick per request from Accept. The
	// SDK enforces the same body limit while reading (chunked bodies); a
	// negative limit switches both off.
	sdkMax := s.maxBody
	getServer := func(*http.Request) *mcp.Server { return s.mcp }
	s.jsonH = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, Logger: sdkLog, MaxRequestBodyBytes: sdkMax,
		DisableLocalhostProtection: s.token.Required(),
	})
	s.sseH = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless: true, Logger: sdkLog, MaxRequestBodyBytes: sdkMax,
		DisableLocalhostProtection: s.token.Required(),
	})
	if opts.Sessions {
		s.maxSess = cmp.Or(opts.MaxSessions, DefaultMaxSessions)
		s.sessShare = admit.CallerShare(s.maxSess, s.token.HasSet())
		s.sessOwner, s.sessOpening, s.sessHeld = map[string]string{}, map[string]int{}, map[string]context.Context{}
		s.sessH = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
			SessionTimeout: cmp.Or(opts.SessionIdleTimeout, DefaultSessionIdleTimeout),
			Logger:         sdkLog, MaxRequestBodyBytes: sdkMax,
			DisableLocalhostProtection: s.token.Required(),
		})
		if s.token.Required() {
			s.sessH = bindSessions(s.sessH)
		}
	}
	s.handler = http.HandlerFunc(s.serveHTTP)
	return s, nil
}

// Handler returns the streamable HTTP endpoint; the daemon mounts it at /mcp.
func (s *Server) Handler() http.Handler { return s.handler }

// ServeStdio serves one MCP session on r/w (newline-delimited JSON-RPC) until
// r reaches EOF, ctx is cancelled or the Server is closed. EOF on r is a clean
// end and returns nil, once every request read has been answered. If r is an io.ReadCloser it is closed on cancellation,
// which is what unblocks a pending read of stdin.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	rc, ok := r.(io.ReadCloser)
	if !ok {
		rc = io.NopCloser(r)
	}
	ledger := newStdioLedger(s.stdioMaxInflight)
	if s.stdioLedgerSeen != nil {
		s.stdioLedgerSeen(ledger)
	}
	out := newCountingWriter(w, ledger)
	// Once the daemon ends the session, a write blocked on stdout (a
	// client that stopped reading) is given up, or nothing below returns.
	served := make(chan struct{})
	defer close(served)
	go func() {
		select {
		case <-ctx.Done():
			out.end()
		case <-s.done:
			out.end()
		case <-served:
		}
	}()
	fast := newStdioFast(ctx, s, out)
	defer fast.stop()
	in := &drainingReader{ReadCloser: rc, ledger: ledger, ctx: ctx, stop: s.done, failed: out.failed, fast: fast.answer,
		refuse:  func(ids []string, batch bool) { s.refuseStdioBusy(out, ids, batch) },
		maxLine: s.maxLine, tooLong: func(key string) { s.refuseStdioLong(out, key) }}
	ss, err := s.mcp.Connect(ctx, &mcp.IOTransport{Reader: in, Writer: out, MaxLineLength: sdkLineLimit(s.maxLine)}, nil)
	if err != nil {
		close(fast.connected)
		return err
	}
	if s.afterConnect != nil {
		s.afterConnect()
	}
	fast.ss.Store(ss)
	close(fast.connected)
	defer s.forgetStdioCalls(ss)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.endStdioCalls(ss)
		ss.Close()
		ss.Wait() // the calls it ran, cancelled, before their entry goes
		return ErrClosed
	}
	s.stdio[ss] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.stdio, ss)
		s.mu.Unlock()
	}()

	waited := make(chan error, 1)
	go func() { waited <- ss.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		s.endStdioCalls(ss)
		ss.Close()
		<-waited
		return ctx.Err()
	case <-s.done:
		s.endStdioCalls(ss)
		ss.Close()
		<-waited
		return ErrClosed
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	return err
}

// ErrClosed is returned by ServeStdio once the Server is closed.
var ErrClosed = errors.New("mcphttp: server closed")

// Close ends every stdio session and makes the HTTP handler answer 503. It
// does not close the Workspace or the Executor: they belong to the caller.
// Close is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	s.unsub()
	return nil
}

func (s *Server) isClosed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// minLevel drops records below min (for the SDK's chatty Info logs).
type minLevel struct {
	h   slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.h.Enabled(ctx, l)
}
func (m minLevel) Handle(ctx context.Context, r slog.Record) error { return m.h.Handle(ctx, r) }
func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{h: m.h.WithAttrs(a), min: m.min}
}
func (m minLevel) WithGroup(g string) slog.Handler { return minLevel{h: m.h.WithGroup(g), min: m.min} }

// Package gatewayface serves the registry's tools as JSON-RPC 2.0 over a
// WebSocket at /gateway: tools.list {sessionId}, tools.invoke {toolId,
// sessionId, args} and tools.approve {requestId, approved}.
//
// Admission (internal/admit, with Options.Admit): the Host and Origin
// rules of every work endpoint, then the token as /ssh takes it
// (Authorization: Bearer or ?token=), or the operator's; a bad token gets
// a completed upgrade and close code 4001. X-Root-Dir and X-Scope-Path of
// the upgrade request follow /mcp's rules; a refused one closes with 1008
// and the reason. The caller, its scope and its workspace are the
// connection's, from that one admission: every call works in them.
//
// Limits per connection: a message is at most MaxMessage bytes (larger
// closes the connection, 1009), a batch at most MaxBatch requests, at most
// MaxInFlight messages run at once (past it: CodeBusy), and a token bucket
// of Rate requests per second with Burst (past it: CodeRateLimited; the
// connection stays up). Per client address (Options.Inflight), each
// message in flight counts against --max-inflight-per-ip with the address's
// /mcp and /execute requests (past it: CodeBusy), since an address may open
// many connections. The registry's own limits apply to every call.
//
// A peer that is gone or silent is closed by the daemon's one keepalive
// rule (wsnet.Keepalive): a WebSocket ping every Keepalive (--keepalive,
// 30 s), and close 1011 "keepalive timeout" once the peer sent nothing
// (no pong, no byte of a message) for 3 intervals; its calls are
// cancelled and its connection slot given back. A client that reads
// answers pings by itself, so an idle one stays open for as long as it
// likes.
//
// The answers to one message, a batch's together, are at most MaxReply
// bytes (--max-reply-bytes, as one /mcp request's): an answer that would
// pass what is left is replaced by error CodeReplyTooLarge naming the
// limit, so a batch of large reads holds at most that much.
//
// A result is the MCP CallToolResult (content blocks, isError), so a client
// reads the same text as over /mcp; or, when the call (params.resultFormat)
// or the connection (?resultFormat= on the upgrade) asks for "toolResult",
// the gateway tools plan's envelope {ok, data, error{code, message,
// details}, meta{durationMs, truncated}} (envelope.go). The sessionId of
// tools.invoke (at most MaxSessionID bytes) goes with the call
// (registry.Call.Session): into the audit log, and it keys the caller's
// browser sessions. A bare tool name several tools claim is
// CodeAmbiguousTool, naming them in data.tools.
package gatewayface

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/internal/wsnet"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// Defaults of Options' zero values.
const (
	DefaultMaxMessage  = 1 << 20
	DefaultMaxBatch    = 20
	DefaultMaxInFlight = 8
	DefaultRate        = 50
	DefaultBurst       = 100
	// DefaultMaxReply is Options.MaxReply's zero value, /mcp's default
	// (--max-reply-bytes).
	DefaultMaxReply = 32 << 20
)

// Options configures a Server.
type Options struct {
	Registry  *registry.Registry
	Workspace fsops.Workspace
	// Admit holds the guard, token, root and static scope; New takes the
	// token from the query too and sets the operator's (Operator), and
	// does not apply MaxBody (MaxMessage bounds a message).
	Admit       admit.Rules
	MaxMessage  int64
	MaxBatch    int
	MaxInFlight int
	Rate        float64 // requests per second per connection
	Burst       int
	// MaxReply bounds the answers to one message, a batch's together
	// (--max-reply-bytes).
	MaxReply int64
	// Keepalive is the interval of the connection's pings (--keepalive);
	// a peer silent for 3 of them is closed (wsnet.Keepalive). Zero is
	// wsnet.DefaultKeepalive.
	Keepalive time.Duration
	// Inflight, when set, counts each message in flight against its
	// client address's --max-inflight-per-ip, with /mcp's and /execute's
	// requests: past it (after admit.InflightWait) the message is
	// answered CodeBusy. MaxInFlight bounds one connection only, and an
	// address may open many.
	Inflight *admit.Inflight
	// Operator is the operator's token (--operator-token-file): a
	// connection upgraded with it (instead of the agent's) may answer
	// tools.approve; the agent's connections never can.
	Operator httpguard.Token
	// Approve decides a request waiting for approval (system.run's); nil
	// answers every tools.approve with "no such request".
	Approve func(requestID string, approved, always bool) (any, error)
	Logger  *slog.Logger
}

// Server is the /gateway handler.
type Server struct {
	opts     Options
	upgrader websocket.Upgrader
	log      *slog.Logger

	mu      sync.Mutex
	closing bool
	conns   map[*conn]context.CancelFunc
	wg      sync.WaitGroup // ServeHTTP calls under way
}

// New returns the handler.
func New(opts Options) *Server {
	if opts.MaxMessage <= 0 {
		opts.MaxMessage = DefaultMaxMessage
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.Rate <= 0 {
		opts.Rate = DefaultRate
	}
	if opts.Burst <= 0 {
		opts.Burst = DefaultBurst
	}
	if opts.MaxReply <= 0 {
		opts.MaxReply = DefaultMaxReply
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts.Admit.QueryToken, opts.Admit.Operator, opts.Admit.MaxBody = true, opts.Operator, 0
	return &Server{
		opts:  opts,
		log:   log,
		conns: map[*conn]context.CancelFunc{},
		// Admission (Begin) has applied the Origin rule before the upgrade.
		upgrader: websocket.Upgrader{HandshakeTimeout: 10 * time.Second, CheckOrigin: func(*http.Request) bool { return true }},
	}
}

// ServeHTTP upgrades and serves one connection until it closes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	admission, ref := s.opts.Admit.Begin(r)
	if ref != nil {
		ref.Write(w)
		return
	}
	format, err := parseFormat(r.URL.Query().Get("resultFormat"), FormatMCP)
	if err != nil {
		admit.WriteJSONError(w, http.StatusBadRequest, "Invalid request", err.Error())
		return
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		http.Error(w, "the daemon is shutting down", http.StatusServiceUnavailable)
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	// Who the connection is, from the credential it was admitted with;
	// the operator is everything. A reload that removes the token or
	// changes its rights ends the connection (admit.Rules.Hold).
	caller, ref := admission.Admit()
	switch {
	case ref != nil && ref.Unauthorized():
		closeWith(ws, wsnet.CloseUnauthorized, "Unauthorized")
		return
	case ref != nil:
		closeWith(ws, wsnet.ClosePolicy, ref.Title+": "+ref.Message)
		return
	}
	wsp, release, err := caller.Workspace(s.opts.Workspace)
	if err != nil {
		closeWith(ws, wsnet.ClosePolicy, "Invalid scope: "+err.Error())
		return
	}
	defer release()
	c := &conn{s: s, ws: ws, peer: wsnet.NewPeer(ws), wsp: wsp, caller: caller, format: format, addr: r.RemoteAddr,
		slots:  make(chan struct{}, s.opts.MaxInFlight),
		tokens: float64(s.opts.Burst), last: time.Now()}
	held, unhold := s.opts.Admit.Hold(context.Background(), caller)
	defer unhold()
	// A reload that revokes the token: the calls under way are cancelled
	// (ctx derives from held), the read loop ends, and the client is told
	// why (below, once the loop has ended).
	stopRevoke := context.AfterFunc(held, func() {
		if admit.RevokedBy(held) != nil {
			_ = ws.SetReadDeadline(time.Now())
		}
	})
	defer stopRevoke()
	defer func() {
		if rv := admit.RevokedBy(held); rv != nil {
			s.log.Info("gateway connection ended: its token was revoked or changed", "remote", r.RemoteAddr, "token", caller.Name, "why", rv.Error())
			code := wsnet.ClosePolicy
			if rv.Unauthorized() {
				code = wsnet.CloseUnauthorized
			}
			closeWith(ws, code, rv.Error())
		}
	}()
	ctx, cancel := context.WithCancel(held)
	s.mu.Lock()
	if s.closing { // Shutdown began after the check above: it does not know c
		s.mu.Unlock()
		cancel()
		closeWith(ws, wsnet.CloseGoingAway, "the daemon is shutting down")
		return
	}
	s.conns[c] = cancel
	s.mu.Unlock()
	stopKeepalive := wsnet.Keepalive(c.peer, s.opts.Keepalive, func(code int, reason string) {
		s.log.Info("gateway peer silent, dropping connection", "remote", r.RemoteAddr,
			"after", wsnet.KeepaliveMisses*c.s.keepalive())
		cancel() // what the peer sent since does not run; its calls end
		closeWith(ws, code, reason)
		_ = ws.SetReadDeadline(time.Now()) // ends the read loop now
	})
	c.serve(ctx)
	stopKeepalive()
	cancel()
	c.wg.Wait()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Shutdown ends every connection: its calls under way are cancelled and it
// gets the close frame 1001 ("the daemon is shutting down"); new upgrades
// are refused. It returns once every connection is done, or when ctx ends:
// then the connections still open (a write their client does not take) are
// closed without more ado.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	conns := make(map[*conn]context.CancelFunc, len(s.conns))
	for c, cancel := range s.conns {
		conns[c] = cancel
	}
	s.mu.Unlock()
	for c, cancel := range conns {
		cancel()
		// Not under c.wmu, and each on its own: a close frame (gorilla's
		// WriteControl, safe beside a write) waits at most a second
		// behind a write the client does not take, where the write lock
		// is held for as long as that write's stall bound.
		go func() {
			closeWith(c.ws, wsnet.CloseGoingAway, "the daemon is shutting down")
			_ = c.ws.SetReadDeadline(time.Now()) // ends the read loop now
		}()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		for c := range conns {
			_ = c.ws.Close() // a blocked write fails, and its connection ends
		}
		return ctx.Err()
	}
}

// keepalive is the interval of the connections' pings.
func (s *Server) keepalive() time.Duration {
	if s.opts.Keepalive > 0 {
		return s.opts.Keepalive
	}
	return wsnet.DefaultKeepalive
}

// closeWith sends a close frame (wsnet.CloseFrame: its reason cut to
// what a control frame holds, on a rune boundary).
func closeWith(ws *websocket.Conn, code int, reason string) {
	_ = ws.WriteControl(websocket.CloseMessage, wsnet.CloseFrame(code, reason), time.Now().Add(time.Second))
}

type conn struct {
	s      *Server
	ws     *websocket.Conn
	peer   *wsnet.Peer     // when the client last sent anything (keepalive)
	wsp    fsops.Workspace // the caller's workspace
	caller admit.Caller    // Operator: upgraded with the operator's token
	format string          // the connection's result format (?resultFormat=)
	addr   string          // the client's address (Options.Inflight)
	slots  chan struct{}
	wg     sync.WaitGroup
	wmu    sync.Mutex
	broken bool // a write failed; under wmu

	// token bucket; touched only by the reading goroutine
	tokens float64
	last   time.Time
}

// allow takes n tokens from the bucket if it holds them.
func (c *conn) allow(n int) bool {
	now := time.Now()
	c.tokens = min(float64(c.s.opts.Burst), c.tokens+now.Sub(c.last).Seconds()*c.s.opts.Rate)
	c.last = now
	if c.tokens < float64(n) {
		return false
	}
	c.tokens -= float64(n)
	return true
}

func (c *conn) serve(ctx context.Context) {
	c.ws.SetReadLimit(c.s.opts.MaxMessage)
	for {
		_, data, err := c.peer.ReadMessage()
		if err != nil {
			return
		}
		if ctx.Err() != nil {
			// The connection is ending: a reload revoked or changed its
			// token (admit.Rules.Rejudge, which ends ctx before the reload
			// returns), the daemon is shutting down, or the keepalive
			// found the peer silent. What the client sent since does not
			// run.
			return
		}
		p, whole := parseMessage(data, c.s.opts.MaxBatch)
		if whole != nil {
			c.send(whole)
			continue
		}
		if !c.allow(len(p.reqs)) {
			c.refuseAll(p, CodeRateLimited, "rate limit: more than %g requests per second on this connection (burst %d); slow down", c.s.opts.Rate, c.s.opts.Burst)
			continue
		}
		select {
		case c.slots <- struct{}{}:
		default:
			c.refuseAll(p, CodeBusy, "busy: %d messages of this connection are in flight; wait for an answer", c.s.opts.MaxInFlight)
			continue
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer func() { <-c.slots }()
			if f := c.s.opts.Inflight; f != nil {
				held, ok := f.Acquire(ctx, c.addr)
				if !ok {
					c.refuseAll(p, CodeBusy, "busy: %d requests of this client address are in flight on /mcp, /execute and /gateway (--max-inflight-per-ip); wait for an answer", f.Limit())
					return
				}
				defer f.Release(held)
			}
			c.run(ctx, p)
		}()
	}
}

// refuseAll answers every request of p with the same error.
func (c *conn) refuseAll(p *parsed, code int, format string, args ...any) {
	out := make([]*response, 0, len(p.reqs))
	for i, req := range p.reqs {
		switch {
		case p.errs[i] != nil:
			out = append(out, p.errs[i])
		case !req.notification():
			out = append(out, errResponse(req.ID, code, format, args...))
		}
	}
	c.reply(p.batch, out)
}

func (c *conn) run(ctx context.Context, p *parsed) {
	// Each answer is encoded as it is made, so a batch holds its answers'
	// bytes, at most MaxReply of them, and not every tool's result.
	var buf []byte
	n, left := 0, c.s.opts.MaxReply
	add := func(resp *response) {
		start := len(buf)
		if p.batch && n > 0 {
			buf = append(buf, ',')
		}
		b, err := resp.appendJSON(buf)
		if err != nil {
			b, _ = errResponse(resp.ID, CodeInternal, "internal error: %v", err).appendJSON(buf[:len(buf):len(buf)])
		}
		buf = b
		if size := int64(len(buf) - start); size > left {
			buf = buf[:start]
			if p.batch && n > 0 {
				buf = append(buf, ',')
			}
			buf, _ = errResponse(resp.ID, CodeReplyTooLarge, "%s", admit.ReplyTooLarge(size, left, c.s.opts.MaxReply)).appendJSON(buf)
		}
		left -= int64(len(buf) - start)
		n++
	}
	if p.batch {
		buf = append(buf, '[')
	}
	for i, req := range p.reqs {
		if p.errs[i] != nil {
			add(p.errs[i])
			continue
		}
		resp := c.call(ctx, req)
		if !req.notification() {
			add(resp)
		}
	}
	if n == 0 {
		return
	}
	if p.batch {
		buf = append(buf, ']')
	}
	c.write(buf)
}

func (c *conn) reply(batch bool, out []*response) {
	switch {
	case len(out) == 0:
	case batch:
		c.send(out)
	default:
		c.send(out[0])
	}
}

func (c *conn) send(v any) {
	var b []byte
	var err error
	if r, ok := v.(*response); ok {
		b, err = r.appendJSON(nil)
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		b, _ = json.Marshal(errResponse(nil, CodeInternal, "internal error: %v", err))
	}
	c.write(b)
}

// writeStall is how long the client may take to accept one piece of a
// message (stallChunk bytes): admit.ReplyStallTimeout, the bound of every
// HTTP reply, so a client that keeps reading gets an answer of any size.
var writeStall = admit.ReplyStallTimeout

const stallChunk = 64 << 10

// write sends one message. A write that fails (the client took nothing for
// writeStall, or went away) ends the connection: its answers can no longer
// be sent, so its calls are cancelled (serve returns) rather than run for a
// client that does not read them, and later writes are not tried.
func (c *conn) write(b []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.broken {
		return
	}
	w, err := c.ws.NextWriter(websocket.TextMessage)
	for err == nil && len(b) > 0 {
		piece := b[:min(len(b), stallChunk)]
		_ = c.ws.SetWriteDeadline(time.Now().Add(writeStall))
		_, err = w.Write(piece)
		b = b[len(piece):]
	}
	if err == nil {
		_ = c.ws.SetWriteDeadline(time.Now().Add(writeStall))
		err = w.Close()
	}
	if err != nil {
		c.broken = true
		_ = c.ws.Close()
	}
}

// Tool is one entry of tools.list.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	InputSchema any    `json:"inputSchema"`
}

type listParams struct {
	SessionID string `json:"sessionId"`
}

type invokeParams struct {
	ToolID    string          `json:"toolId"`
	SessionID string          `json:"sessionId"`
	Args      json.RawMessage `json:"args"`
	// ResultFormat is FormatMCP or FormatToolResult ("": the connection's).
	ResultFormat string `json:"resultFormat"`
}

type approveParams struct {
	RequestID string `json:"requestId"`
	Approved  *bool  `json:"approved"`
	Always    bool   `json:"always,omitempty"`
}

func decodeParams(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return json.Unmarshal(raw, v)
}

// callError answers a tools.invoke the registry did not run (a function of
// its own, so that a call that ran allocates none of its targets).
func callError(id json.RawMessage, err error) *response {
	var unknown *registry.UnknownToolError
	var ambiguous *registry.AmbiguousToolError
	switch {
	case errors.As(err, &unknown):
		return errResponse(id, CodeUnknownTool, "%v; tools.list lists the tools", err)
	case errors.As(err, &ambiguous):
		resp := errResponse(id, CodeAmbiguousTool, "%v", err)
		resp.Error.Data = map[string]any{"tools": ambiguous.Tools}
		return resp
	case errors.Is(err, registry.ErrBusy):
		return errResponse(id, CodeBusy, "%v", err)
	default:
		return errResponse(id, CodeInternal, "%v", err)
	}
}

func (c *conn) call(ctx context.Context, req *request) *response {
	ok := func(v any) *response { return &response{JSONRPC: "2.0", ID: req.ID, Result: v} }
	switch req.Method {
	case "tools.list":
		var p listParams
		if err := decodeParams(req.Params, &p); err != nil {
			return errResponse(req.ID, CodeInvalidParams, "invalid params of tools.list: %v", err)
		}
		list := c.s.opts.Registry.List()
		tools := make([]Tool, 0, len(list))
		for _, t := range list {
			tools = append(tools, Tool{t.Name, t.Description, t.InputSchema})
		}
		return ok(map[string]any{"tools": tools})
	case "tools.invoke":
		var p invokeParams
		if err := decodeParams(req.Params, &p); err != nil {
			return errResponse(req.ID, CodeInvalidParams, "invalid params of tools.invoke: %v", err)
		}
		if p.ToolID == "" {
			return errResponse(req.ID, CodeInvalidParams, "invalid params of tools.invoke: toolId is missing")
		}
		if len(p.SessionID) > MaxSessionID {
			return errResponse(req.ID, CodeInvalidParams, "invalid params of tools.invoke: sessionId is %d bytes long; the limit is %d", len(p.SessionID), MaxSessionID)
		}
		format, err := parseFormat(p.ResultFormat, c.format)
		if err != nil {
			return errResponse(req.ID, CodeInvalidParams, "invalid params of tools.invoke: %v", err)
		}
		call := c.caller.Call("gateway", c.wsp, p.Args)
		call.Session = p.SessionID
		start := time.Now()
		res, err := c.s.opts.Registry.Call(ctx, p.ToolID, call)
		ms := float64(time.Since(start).Microseconds()) / 1000
		if err != nil {
			return callError(req.ID, err)
		}
		if format == FormatToolResult {
			return ok(envelope(res, ms))
		}
		return ok(res)
	case "tools.approve":
		var p approveParams
		if err := decodeParams(req.Params, &p); err != nil || p.RequestID == "" || p.Approved == nil {
			return errResponse(req.ID, CodeInvalidParams, "invalid params of tools.approve: requestId (string) and approved (bool) are required")
		}
		if c.s.opts.Approve == nil {
			return errResponse(req.ID, CodeNoSuchRequest, "no such request %q: no call is waiting for approval", p.RequestID)
		}
		if !c.caller.Operator {
			return errResponse(req.ID, CodeNotOperator, "tools.approve needs a connection opened with the operator's token (--operator-token-file), not the agent's")
		}
		decided, err := c.s.opts.Approve(p.RequestID, *p.Approved, p.Always)
		if err != nil {
			return errResponse(req.ID, CodeNoSuchRequest, "request %q: %v", p.RequestID, err)
		}
		return ok(decided)
	}
	return errResponse(req.ID, CodeMethodNotFound, "method not found: %q (tools.list, tools.invoke, tools.approve)", req.Method)
}

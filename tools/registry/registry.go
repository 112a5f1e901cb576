// Package registry holds every tool the daemon serves, whoever provides it,
// and is the one place a tool call passes through on its way from a face
// (MCP over HTTP or stdio, the REST face, the /gateway face) to the
// provider that runs it.
//
// A provider (the workspace tools, tool sites, Starlark extensions,
// upstream MCP servers, the gateway tools, …: one folder each under tools/)
// owns a set of tools and replaces it whenever it likes (Set): a reload, an
// upstream that restarted. The registry validates each name, refuses a name another
// provider already serves with an error naming both, and tells its
// subscribers when the set changed (MCP's notifications/tools/list_changed).
//
// Call applies the limits every face shares: at most MaxConcurrent calls run
// at once, a call waits at most QueueWait for a slot and is then refused
// with ErrBusy (never left hanging), and every call has a deadline (the
// tool's own Timeout, else DefaultTimeout, lowered by the caller's context),
// which reaches the handler through its context. The handler runs on the
// caller's goroutine, so it must return soon after its context is done; a
// handler that fails because the deadline passed is answered with the same
// timeout result on every face. Until it returns, a call holds its slot;
// a handler whose work can outlive its answer (a Starlark step that does not
// look at cancellation) keeps the slot past that with Call.Detach, and its
// provider shows as degraded meanwhile.
// A handler that panics is answered with an error result and logged.
//
// A face never knows which provider a tool came from; a provider never
// knows which face called it.
package registry

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// Tool is one tool: what a client is told about it and the handler that
// runs it.
type Tool struct {
	// Name is what clients call it by: letters, digits, '_', '-' and '.',
	// at most MaxNameLen characters. A provider serving another system's
	// tools prefixes them (server__tool for upstream MCP servers).
	Name string
	// Bare, when set, is a shorter name a client may also call the tool
	// by (an upstream tool's name on its server, read_file for
	// fs__read_file) while no tool is called that and no other tool
	// claims the same Bare; lists keep Name. A Bare that two tools claim
	// calls neither: Call answers *AmbiguousToolError naming both.
	Bare        string
	Title       string
	Description string
	// InputSchema is the JSON Schema (type object) of the arguments, as
	// mcp.Tool.InputSchema takes it: a map or a json.RawMessage.
	InputSchema any
	Annotations *mcp.ToolAnnotations
	// Timeout bounds one call (0: the registry's DefaultTimeout). A tool
	// with a deadline of its own (exec kills its command at --exec-timeout
	// and says so) sets a little more than that, so its own answer wins.
	Timeout time.Duration
	// RunsCommands marks a tool that runs a command the caller chooses
	// (exec, process tools, system.run, a site's commands, an upstream
	// server's tools): a caller without exec (a token file entry with
	// "exec": false) cannot call it.
	RunsCommands bool
	// WholeRoot marks a tool whose work is not confined to the call's
	// workspace (an upstream server runs over the daemon's whole root and
	// its path arguments are checked by heuristics): a caller bound to a
	// scope cannot call it.
	WholeRoot bool
	// Handler runs one call. It reports failure as an error result, never
	// as a panic; it must return soon after ctx is done.
	Handler Handler
}

// Handler runs a call of a tool and returns its result.
type Handler func(ctx context.Context, call Call) *mcp.CallToolResult

// Call is one invocation of a tool, as a face hands it over.
type Call struct {
	// Args is the arguments object as the client sent it (nil or "null"
	// for none); the handler validates it against its schema.
	Args json.RawMessage
	// Workspace is the workspace the call works in: the daemon's, or the
	// scope the request named (X-Scope-Path), already validated.
	Workspace fsops.Workspace
	// Face ("mcp-http", "mcp-stdio", "rest", "gateway"), Remote (the
	// client's address, "" for stdio) and Scope (the scope path, "" for
	// the root) say who called, for the audit log and the metrics.
	Face, Remote, Scope string
	// Caller is the token file entry the request authenticated with (""
	// for the daemon's own token, no token, or stdio), for the audit log.
	// ReadOnly callers may call only tools annotated readOnlyHint;
	// NoExec callers no tool that RunsCommands. internal/admit's
	// Caller.Call alone sets them, from the request's credential, and
	// the Workspace of a read-only caller (admit's Caller.Workspace)
	// refuses every change whatever a tool's hint says.
	Caller           string
	ReadOnly, NoExec bool
	// Session is the client's own name for its session, where its face
	// carries one (/gateway's sessionId), for the audit log and for
	// per-session state (browser sessions); "" when none.
	Session string
	// Bound says the caller's token is bound to a scope (WholeRoot tools
	// are refused to it).
	Bound bool
	// Ask, when set, puts a question to the person behind the client
	// (MCP elicitation: message and a flat object schema) and returns
	// their action ("accept", "decline", "cancel") and answers. Nil when
	// the client cannot be asked (it did not declare elicitation, or the
	// face has no way back to it).
	Ask func(ctx context.Context, message string, schema map[string]any) (action string, content map[string]any, err error)
	// Progress, when set (the MCP request carried a progress token), sends
	// the client a progress notification: progress must grow from one to
	// the next; message is what happened (exec: the output so far). Nil
	// when the client asked for none.
	Progress func(ctx context.Context, progress float64, message string)

	hold *hold // the call's slot (set by Registry.Call)
}

// Detach is for a handler whose work may go on after it answers (it
// answered at its deadline while a step it cannot interrupt still runs):
// the call's slot stays taken after the handler returns, until release is
// called (once the work really ended; later calls do nothing). While a
// handler has returned and a release is still due, the call counts as
// runaway: its provider shows as degraded in Providers. Outside
// Registry.Call, or once the handler returned, release does nothing.
func (c Call) Detach() (release func()) {
	if c.hold == nil {
		return func() {}
	}
	return c.hold.detach()
}

// hold is a call's slot: taken by the handler until it returns and by
// each Detach until its release; the last of them gives it back.
type hold struct {
	r        *Registry
	provider string

	mu       sync.Mutex
	n        int  // the handler (until it returns) and each unreleased Detach
	returned bool // the handler returned
	runaway  bool // it returned before a release: counted in Runaway
}

func (h *hold) detach() func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.returned {
		return func() {}
	}
	h.n++
	var once sync.Once
	return func() { once.Do(h.release) }
}

func (h *hold) release() {
	h.mu.Lock()
	h.n--
	last, runaway := h.n == 0, h.runaway
	h.mu.Unlock()
	if last {
		if runaway {
			h.r.addRunaway(h.provider, -1)
		}
		<-h.r.slots
	}
}

// handlerReturned gives the slot back unless a Detach still holds it, and
// reports whether one does.
func (h *hold) handlerReturned() (detached bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.returned = true
	h.n--
	if h.n == 0 {
		<-h.r.slots
		return false
	}
	// Counted under h.mu, so that the release that comes later uncounts it.
	h.runaway = true
	h.r.addRunaway(h.provider, +1)
	return true
}

// MaxNameLen is the longest tool name the registry accepts.
const MaxNameLen = 64

// nameChars reports whether every byte of name is a letter, a digit, '_',
// '.' or '-'. A loop, not a regexp: a package-level `^[…]{1,64}$` compiles
// to 64 copies of its class, 60 KB and 0.4 ms of every daemon start
// (GODEBUG=inittrace=1).
func nameChars(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// ValidName reports whether name may name a tool, and if not, why.
func ValidName(name string) error {
	switch {
	case name == "":
		return errors.New("tool name is empty")
	case len(name) > MaxNameLen:
		return fmt.Errorf("tool name %q is %d characters long; the limit is %d", name, len(name), MaxNameLen)
	case !nameChars(name):
		return fmt.Errorf("tool name %q may contain only letters, digits, '_', '-' and '.'", name)
	}
	return nil
}

// ValidInputSchema reports whether schema may be a tool's input schema, and
// if not, why: a JSON object whose "type" is "object", as MCP requires of
// a tool's inputSchema. The MCP face's SDK panics on any other (mcp.Server's
// AddTool), so a schema that is not one must never reach a face: Set
// refuses it, and a provider that takes its tools from elsewhere (an
// upstream server's tools/list) leaves out each tool that fails it.
func ValidInputSchema(schema any) error {
	if schema == nil {
		return errors.New("input schema is missing")
	}
	raw, ok := schema.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(schema); err != nil {
			return fmt.Errorf("input schema does not marshal to JSON: %v", err)
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return errors.New("input schema is not a JSON object")
	}
	if typ := bytes.TrimSpace(m["type"]); string(typ) != `"object"` {
		return fmt.Errorf(`input schema's "type" is %.40s, not "object"`, cmp.Or(string(typ), "missing"))
	}
	return nil
}

// Defaults for the zero values of Options.
const (
	DefaultMaxConcurrent = 10
	DefaultQueueWait     = 2 * time.Second
	DefaultTimeout       = 30 * time.Second
)

// Options configures a Registry. Zero values take the defaults above.
type Options struct {
	// MaxConcurrent is how many calls run at once
	// (--max-concurrent-executions).
	MaxConcurrent int
	// QueueWait is how long a call waits for a slot before ErrBusy.
	QueueWait time.Duration
	// DefaultTimeout bounds a call of a tool without a Timeout of its own.
	DefaultTimeout time.Duration
	// Observe, when set, is told about every finished call (the audit log
	// and the metrics). It runs on the caller's goroutine: keep it short.
	Observe func(Record)
	// Logger receives panics in handlers; nil discards.
	Logger *slog.Logger
	// CallContext, when set, gives the context each handler runs with,
	// from the call's (its deadline kept) and the call: what the caller
	// may reach through doors that take it from the context (the daemon:
	// netguard.WithLoopbackJudge, so no tool reaches a workspace command's
	// loopback port that /preview/ would refuse the caller).
	CallContext func(ctx context.Context, call Call) context.Context
}

// Record is what Observe is told about one call.
type Record struct {
	Start    time.Time
	Duration time.Duration
	Tool     string
	Provider string
	Face     string
	Remote   string
	Scope    string
	Caller   string
	Session  string // Call.Session
	Args     json.RawMessage
	// Tool is the name of the tool that ran (a bare name resolved to
	// the tool's Name), or the name called when none did.
	// Outcome is "ok", "error" (an error result), "timeout", "busy",
	// "unknown" (no such tool), "ambiguous" (a bare name several tools
	// claim), "denied" (the caller may not call it) or "panic".
	Outcome  string
	BytesIn  int // len(Args)
	BytesOut int // bytes of text and data in the result's content
}

// ErrBusy is returned by Call when every slot stayed taken for QueueWait.
var ErrBusy = errors.New("too many tool calls in progress; retry shortly")

// UnknownToolError is returned by Call for a name no provider serves.
type UnknownToolError struct{ Name string }

func (e *UnknownToolError) Error() string { return fmt.Sprintf("unknown tool %q", e.Name) }

// AmbiguousToolError is returned by Call and Resolve for a bare name
// (Tool.Bare) that several tools claim and no tool is called by.
type AmbiguousToolError struct {
	Name  string
	Tools []string // the Names of the tools that claim it, sorted
}

func (e *AmbiguousToolError) Error() string {
	return fmt.Sprintf("tool name %q is ambiguous: %s serve it; call one of them by that name",
		e.Name, strings.Join(e.Tools, ", "))
}

// CollisionError is returned by Set when a tool's name is already served
// by another provider.
type CollisionError struct {
	Tool          string
	Provider      string // the provider that asked
	OtherProvider string // the provider that serves the name
}

func (e *CollisionError) Error() string {
	return fmt.Sprintf("tool %q of provider %q collides with the tool of the same name of provider %q",
		e.Tool, e.Provider, e.OtherProvider)
}

// entry is a registered tool and the provider it belongs to.
type entry struct {
	tool     Tool
	provider string
}

// ProviderInfo is what /health says about a provider.
type ProviderInfo struct {
	Name  string `json:"name"`
	State string `json:"state"`
	Tools int    `json:"tools"`
	// Detail says why a provider is not ready ("" when it is).
	Detail string `json:"detail,omitempty"`
	// Runaway counts its calls that were answered (at their deadline)
	// while their work still runs and holds their slots (Call.Detach);
	// while there are any, a ready provider's State is "degraded".
	Runaway int `json:"runaway,omitempty"`
}

// Registry is the set of tools. It is safe for concurrent use.
type Registry struct {
	opts  Options
	slots chan struct{}
	log   *slog.Logger

	mu        sync.RWMutex
	tools     map[string]entry
	sorted    []Tool              // every tool, by name; replaced, never mutated
	bare      map[string][]string // Tool.Bare → the Names claiming it, sorted; replaced with sorted
	providers map[string]*ProviderInfo
	order     []string // providers in the order they first appeared
	subs      map[int]func()
	nextSub   int

	beforeChange atomic.Pointer[BeforeChange]
}

// BeforeChange runs before the handler of every call of a tool that can
// change the workspace (one not annotated readOnlyHint), after the call
// was admitted and took its slot, with the call's context (its deadline).
// An error stops the call: the handler does not run, and the error result
// says why. --checkpoints auto takes a checkpoint here.
type BeforeChange func(ctx context.Context, tool Tool, call Call) error

// SetBeforeChange installs f (nil removes it); it replaces the one set
// before.
func (r *Registry) SetBeforeChange(f BeforeChange) {
	if f == nil {
		r.beforeChange.Store(nil)
		return
	}
	r.beforeChange.Store(&f)
}

// New returns an empty registry.
func New(opts Options) *Registry {
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = DefaultMaxConcurrent
	}
	if opts.QueueWait <= 0 {
		opts.QueueWait = DefaultQueueWait
	}
	if opts.DefaultTimeout <= 0 {
		opts.DefaultTimeout = DefaultTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Registry{
		opts:      opts,
		slots:     make(chan struct{}, opts.MaxConcurrent),
		log:       log,
		tools:     map[string]entry{},
		providers: map[string]*ProviderInfo{},
		subs:      map[int]func(){},
	}
}

// Set replaces every tool of provider with tools (none removes them all),
// at once: a client sees the old set or the new one, never a mix. Nothing
// changes if any tool is invalid or collides with another provider's.
func (r *Registry) Set(provider string, tools []Tool) error {
	if provider == "" {
		return errors.New("registry: provider name is empty")
	}
	seen := make(map[string]bool, len(tools))
	for _, t := range tools {
		if err := ValidName(t.Name); err != nil {
			return fmt.Errorf("provider %q: %w", provider, err)
		}
		if seen[t.Name] {
			return fmt.Errorf("provider %q: tool %q is listed twice", provider, t.Name)
		}
		seen[t.Name] = true
		if t.Handler == nil {
			return fmt.Errorf("provider %q: tool %q has no handler", provider, t.Name)
		}
		if t.InputSchema != nil {
			if err := ValidInputSchema(t.InputSchema); err != nil {
				return fmt.Errorf("provider %q: tool %q: %w", provider, t.Name, err)
			}
		}
		if t.Bare != "" {
			if err := ValidName(t.Bare); err != nil {
				return fmt.Errorf("provider %q: tool %q: bare name: %w", provider, t.Name, err)
			}
		}
	}
	r.mu.Lock()
	for _, t := range tools {
		if e, ok := r.tools[t.Name]; ok && e.provider != provider {
			r.mu.Unlock()
			return &CollisionError{Tool: t.Name, Provider: provider, OtherProvider: e.provider}
		}
	}
	changed := false
	for name, e := range r.tools {
		if e.provider == provider {
			delete(r.tools, name)
			changed = true
		}
	}
	for _, t := range tools {
		r.tools[t.Name] = entry{tool: t, provider: provider}
		changed = true
	}
	p := r.providers[provider]
	if p == nil {
		p = &ProviderInfo{Name: provider, State: "ready"}
		r.providers[provider] = p
		r.order = append(r.order, provider)
	}
	p.Tools = len(tools)
	if changed {
		r.resort()
	}
	subs := r.subscribers()
	r.mu.Unlock()
	if changed {
		for _, f := range subs {
			f()
		}
	}
	return nil
}

// SetState records a provider's state for /health ("ready", "starting",
// "failed", ...) and why ("" when ready).
func (r *Registry) SetState(provider, state, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.providers[provider]
	if p == nil {
		p = &ProviderInfo{Name: provider}
		r.providers[provider] = p
		r.order = append(r.order, provider)
	}
	p.State, p.Detail = state, detail
}

// resort rebuilds the sorted list; r.mu is held.
func (r *Registry) resort() {
	all := make([]Tool, 0, len(r.tools))
	for _, e := range r.tools {
		all = append(all, e.tool)
	}
	slices.SortFunc(all, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	r.sorted = all
	bare := map[string][]string{}
	for _, t := range all {
		if t.Bare != "" {
			bare[t.Bare] = append(bare[t.Bare], t.Name) // sorted, as all is
		}
	}
	r.bare = bare
}

// subscribers copies the subscriber functions; r.mu is held.
func (r *Registry) subscribers() []func() {
	fs := make([]func(), 0, len(r.subs))
	for _, f := range r.subs {
		fs = append(fs, f)
	}
	return fs
}

// List returns every tool, sorted by name. The slice is shared: do not
// modify it.
func (r *Registry) List() []Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.sorted
}

// Lookup returns the tool called name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	r.mu.RLock()
	e, ok := r.tools[name]
	r.mu.RUnlock()
	return e.tool, ok
}

// Resolve returns the tool a call of name runs: the tool called name,
// else the one tool whose Bare is name. The error is *UnknownToolError
// or *AmbiguousToolError.
func (r *Registry) Resolve(name string) (Tool, error) {
	r.mu.RLock()
	e, err := r.resolve(name)
	r.mu.RUnlock()
	return e.tool, err
}

// resolve is Resolve's lookup; r.mu is held.
func (r *Registry) resolve(name string) (entry, error) {
	if e, ok := r.tools[name]; ok {
		return e, nil
	}
	switch names := r.bare[name]; len(names) {
	case 0:
		return entry{}, &UnknownToolError{Name: name}
	case 1:
		return r.tools[names[0]], nil
	default:
		return entry{}, &AmbiguousToolError{Name: name, Tools: slices.Clone(names)}
	}
}

// Providers reports every provider, in the order they first appeared.
func (r *Registry) Providers() []ProviderInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]ProviderInfo, 0, len(r.order))
	for _, name := range r.order {
		p := *r.providers[name]
		if p.Runaway > 0 && p.State == "ready" {
			p.State = "degraded"
			p.Detail = fmt.Sprintf("%d calls answered at their deadline are still running and hold their slots", p.Runaway)
		}
		out = append(out, p)
	}
	return out
}

// addRunaway counts a provider's runaway calls.
func (r *Registry) addRunaway(provider string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.providers[provider]; p != nil {
		p.Runaway += n
	}
}

// Subscribe calls f after every change of the set of tools, on the
// goroutine that changed it, until cancel is called.
func (r *Registry) Subscribe(f func()) (cancel func()) {
	r.mu.Lock()
	id := r.nextSub
	r.nextSub++
	r.subs[id] = f
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.subs, id)
		r.mu.Unlock()
	}
}

// Unknown records a call of a tool no provider serves (or of a bare name
// several claim: outcome "ambiguous") that a face answered without Call
// (the MCP library words that error itself), so its audit line and metric
// are those Call gives such a call on every other face. It runs nothing,
// even if the name has just appeared.
func (r *Registry) Unknown(name string, call Call) {
	rec := Record{Start: time.Now(), Tool: name, Face: call.Face, Remote: call.Remote, Scope: call.Scope,
		Caller: call.Caller, Args: call.Args, BytesIn: len(call.Args)}
	outcome := "unknown"
	r.mu.RLock()
	if _, err := r.resolve(name); err != nil {
		if _, amb := err.(*AmbiguousToolError); amb {
			outcome = "ambiguous"
		}
	}
	r.mu.RUnlock()
	r.observe(&rec, outcome, nil)
}

// Call runs the tool called name (or the one tool whose Bare is name:
// Resolve) under the registry's limits. The error is *UnknownToolError,
// *AmbiguousToolError or ErrBusy (each face words them its own way);
// every other failure, a timeout included, is an error result.
func (r *Registry) Call(ctx context.Context, name string, call Call) (*mcp.CallToolResult, error) {
	start := time.Now()
	rec := Record{Start: start, Tool: name, Face: call.Face, Remote: call.Remote, Scope: call.Scope,
		Caller: call.Caller, Session: call.Session, Args: call.Args, BytesIn: len(call.Args)}
	r.mu.RLock()
	e, err := r.resolve(name)
	r.mu.RUnlock()
	if err != nil {
		outcome := "unknown"
		if _, amb := err.(*AmbiguousToolError); amb {
			outcome = "ambiguous"
		}
		r.observe(&rec, outcome, nil)
		return nil, err
	}
	name = e.tool.Name
	rec.Tool, rec.Provider = name, e.provider
	if why := denied(e.tool, call); why != "" {
		res := errorResult(why)
		r.observe(&rec, "denied", res)
		return res, nil
	}

	if err := r.acquire(ctx); err != nil {
		r.observe(&rec, "busy", nil)
		return nil, err
	}
	timeout := e.tool.Timeout
	if timeout <= 0 {
		timeout = r.opts.DefaultTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	call.hold = &hold{r: r, provider: e.provider, n: 1}

	// The handler runs on the caller's goroutine: handing it to another
	// one and waiting costs more than the rest of the registry on the MCP
	// read path (docs/tools.md, "Limits"). The deadline reaches the
	// handler through its context.
	hctx := cctx
	if r.opts.CallContext != nil {
		hctx = r.opts.CallContext(cctx, call)
	}
	res := r.run(hctx, e, call)
	timedOut := cctx.Err() != nil
	cancel()
	detached := call.hold.handlerReturned()
	outcome := "ok"
	switch {
	case res.IsError && timedOut:
		// The handler stopped because the deadline passed: say so the
		// same way for every tool and face.
		outcome = "timeout"
		text := timeoutText(name, ctx, timeout)
		if detached {
			text += "; a step it cannot interrupt is still running, and keeps the call's slot until it ends"
		}
		res = errorResult(text)
	case res.IsError:
		outcome = "error"
	}
	r.observe(&rec, outcome, res)
	return res, nil
}

// acquire takes a slot, waiting at most QueueWait.
func (r *Registry) acquire(ctx context.Context) error {
	select {
	case r.slots <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(r.opts.QueueWait)
	defer t.Stop()
	select {
	case r.slots <- struct{}{}:
		return nil
	case <-t.C:
		return ErrBusy
	case <-ctx.Done():
		return ErrBusy
	}
}

// run calls the BeforeChange hook (for a tool that can change the
// workspace) and the handler, turning a panic of either into an error
// result.
func (r *Registry) run(ctx context.Context, e entry, call Call) (res *mcp.CallToolResult) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("tool handler panicked", "tool", e.tool.Name, "provider", e.provider,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			res = errorResult(fmt.Sprintf("Tool %s failed with an internal error; the daemon's log has the details", e.tool.Name))
		}
	}()
	if h := r.beforeChange.Load(); h != nil && (e.tool.Annotations == nil || !e.tool.Annotations.ReadOnlyHint) {
		if err := (*h)(ctx, e.tool, call); err != nil {
			return errorResult(fmt.Sprintf("Tool %s did not run: %v", e.tool.Name, err))
		}
	}
	res = e.tool.Handler(ctx, call)
	if res == nil {
		res = errorResult(fmt.Sprintf("Tool %s returned no result", e.tool.Name))
	}
	return res
}

// timeoutText says which deadline ended the call: the tool's, or the
// caller's own (a face's per-call timeout, a client that went away).
func timeoutText(name string, parent context.Context, timeout time.Duration) string {
	if parent.Err() != nil {
		return fmt.Sprintf("Tool %s was cancelled: %v", name, context.Cause(parent))
	}
	return fmt.Sprintf("Tool %s timed out after %s and was cancelled", name, timeout)
}

func (r *Registry) observe(rec *Record, outcome string, res *mcp.CallToolResult) {
	if r.opts.Observe == nil {
		return
	}
	rec.Outcome = outcome
	rec.Duration = time.Since(rec.Start)
	if res != nil {
		rec.BytesOut = ContentBytes(res)
	}
	r.opts.Observe(*rec)
}

// ContentBytes is the size of a result's text and binary content.
func ContentBytes(res *mcp.CallToolResult) int {
	n := 0
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			n += len(c.Text)
		case *mcp.ImageContent:
			n += len(c.Data)
		case *mcp.AudioContent:
			n += len(c.Data)
		}
	}
	return n
}

// denied says why call may not run t ("" when it may): the one place a
// token's read-only and exec restrictions meet the tools.
func denied(t Tool, call Call) string {
	var why string
	switch {
	case call.ReadOnly && (t.Annotations == nil || !t.Annotations.ReadOnlyHint):
		why = "is read-only, and %s may change the workspace (only tools marked read-only may be called)"
	case (call.NoExec || call.ReadOnly) && t.RunsCommands:
		why = "may not run commands, and %s runs one"
	case call.Bound && t.WholeRoot:
		why = "is bound to a scope, and %s works over the whole root"
	default:
		return "" // the common case: nothing formatted
	}
	who := "this token"
	if call.Caller != "" {
		who = fmt.Sprintf("token %q", call.Caller)
	}
	return "Permission denied: " + who + " " + fmt.Sprintf(why, t.Name)
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

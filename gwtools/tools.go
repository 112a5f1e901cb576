package gwtools

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/registry"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// Defaults of Options.
const (
	DefaultMaxFileBytes = 2 << 20
	DefaultRunTimeout   = 30 * time.Second
	MaxListEntries      = 10000
)

// Options configure the provider.
type Options struct {
	Workspace fsops.Workspace
	Executor  sandbox.Executor // nil: no system.run
	Net       *netguard.Client
	// MaxFileBytes bounds fs.read and fs.write (DefaultMaxFileBytes when 0).
	MaxFileBytes int64
	// AllowDelete serves fs.delete (--fs-delete).
	AllowDelete bool
	// Approvals decides system.run; nil refuses every call.
	Approvals *Approvals
	// AskClient makes a system.run that waits for approval ask the person
	// behind the MCP client through elicitation, when the client supports
	// it (--exec-ask-client): that person is trusted as the operator.
	AskClient bool
	// Decided, when set, is told of every decision made through the client
	// (the audit log), as the operator's endpoints tell theirs.
	Decided func(p Pending, approved, always bool, remote string)
	Logger  *slog.Logger
}

// Provider holds the tools' shared state.
type Provider struct {
	opts Options
	log  *slog.Logger
}

// New builds the provider.
func New(opts Options) *Provider {
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	if opts.Net == nil {
		opts.Net = netguard.New(netguard.Options{})
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{opts: opts, log: log}
}

// Tools is every tool the provider serves.
func (p *Provider) Tools() []registry.Tool {
	tools := append(p.httpTools(), p.fsTools()...)
	if p.opts.Executor != nil {
		tools = append(tools, p.runTool())
	}
	return tools
}

// Close releases pooled connections.
func (p *Provider) Close() error {
	p.opts.Net.CloseIdleConnections()
	return nil
}

// workspace is the call's (the request's scope) or the provider's.
func (p *Provider) workspace(call registry.Call) fsops.Workspace {
	if call.Workspace != nil {
		return call.Workspace
	}
	return p.opts.Workspace
}

// decode reads a call's arguments strictly into v.
func decode(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytesReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "arguments", Msg: err.Error()}
	}
	return nil
}

// ok is a result carrying v as JSON text and structured content.
func ok(v any) *mcp.CallToolResult {
	b, err := json.Marshal(v)
	if err != nil {
		return fail(err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}
}

// fail is an error result with the error's code.
func fail(err error) *mcp.CallToolResult {
	code := errcode.Of(err)
	if code == "" {
		code = errcode.ExecError
	}
	return registry.WithCode(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: errcode.Sentence(err)}}}, code)
}

func failf(code errcode.Code, op, format string, args ...any) *mcp.CallToolResult {
	return fail(&errcode.Error{Code: code, Op: op, Msg: fmt.Sprintf(format, args...)})
}

func schema(props map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

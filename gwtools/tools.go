package gwtools

import (
	"log/slog"
	"time"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/toolkit"
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

// The helpers every provider shares (internal/toolkit).
var (
	decode = toolkit.Decode
	ok     = toolkit.OK
	fail   = toolkit.Fail
	failf  = toolkit.Failf
	schema = toolkit.Schema
)

package gateway

import (
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/toolkit"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
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
	// Ran, when set, is told of every program system.run started, once it
	// ended (the audit log): the file that ran, by its absolute path.
	Ran    func(call registry.Call, r Ran)
	Logger *slog.Logger
}

// Ran is one program system.run started.
type Ran struct {
	// Executable is the absolute path of the file that ran (argv[0]
	// resolved, symlinks followed); for a program in the workspace, Digest
	// is its content's, and what ran was a sealed copy of that content.
	Executable string
	Digest     string
	Argv       []string // as asked: Argv[0] may be a name, Executable is what it was
	Cwd        string
	RequestID  string // the approval it ran under; "" when none was needed
	Start      time.Time
	Duration   time.Duration
	Outcome    string // "exit N", "timeout", or "error: ..." when it did not start
}

// Command is the line the audit log shows: the executable and the
// arguments, each quoted when a shell would need it, and the digest of a
// workspace program's content.
func (r Ran) Command() string {
	words := append([]string{r.Executable}, r.Argv[1:]...)
	for i, w := range words {
		if !plainWord.MatchString(w) {
			words[i] = sandbox.CommandLine(w)
		}
	}
	line := strings.Join(words, " ")
	if r.Digest != "" {
		line += " # " + r.Digest
	}
	return line
}

var plainWord = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

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

// Tools is every tool the provider serves, each refusing a call that
// lacks a field its schema requires (required.go).
func (p *Provider) Tools() []registry.Tool {
	tools := append(p.httpTools(), p.fsTools()...)
	if p.opts.Executor != nil {
		tools = append(tools, p.runTool())
	}
	for i := range tools {
		tools[i] = requireFields(tools[i])
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

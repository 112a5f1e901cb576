// Package config turns flags, environment variables and an optional config file
// into one validated Config value that the daemon passes down. Nothing else in
// the program reads flags or the environment.
//
// Precedence, highest first: command-line flags, environment variables
// (AGENTBE_<KEY>, plus the reference container's AUTH_TOKEN, WORKSPACE_ROOT and
// PORT), the config file (--config, YAML, TOML or JSON), built-in defaults.
//
// Every setting is declared once, in the settings table (settings.go): its key
// (the config-file key and the flag name), the reference CLI's camelCase
// spelling, its environment variables, default and help text, and whether it
// names an operator's file or directory, which must lie outside the workspace
// (operatorPath). Errors name where the bad value came from: the flag, the
// variable, or the file and key.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// Config is the daemon's whole configuration. The zero value is not useful;
// use Load, or Default for tests.
type Config struct {
	// Workspace.
	Root      string // absolute path of the workspace root
	ScopePath string // static scope inside Root ("" = none)
	Backend   string // "filesystem" or "memory"

	// Command execution.
	Isolation       string // auto, bwrap, landlock, software, none
	IsolationMin    string // the weakest effective mode accepted: bwrap, landlock, software, none
	Shell           string // auto, bash, sh
	RunAs           string // user commands run as when the daemon is root ("" = the daemon's user)
	SandboxHelper   string // the agentbe-sandbox trampoline: "" beside the executable, "off", or a path
	BlockDangerous  bool   // the command safety policy
	ExecNetwork     string // auto, true or false: may commands use the network (see ExecNetworkOn)
	ExecTimeout     time.Duration
	ExecOutputLimit int64    // bytes kept per stream (head + tail)
	AllowCommands   []string // regexps exempting a simple command from the blocked categories

	// Resource limits of every command (0 = unchanged). ExecMaxProcesses
	// bounds the processes of one command at once (0 = the sandbox's
	// default, applied where a pids cgroup is available).
	ExecMaxProcesses int
	ExecMaxFileSize  int64
	ExecMaxCPU       time.Duration
	ExecMaxMemory    int64

	// ExecMaxConcurrent bounds the commands running at once (MCP exec, SSH
	// exec and shells); one over it is refused at once.
	ExecMaxConcurrent int

	// Files.
	MaxReadSize int64 // largest whole-file read a tool may do
	Fsync       bool  // durable writes (fsops.Options.Fsync)

	// Listening.
	Bind            string
	Port            int
	TLSCert         string // PEM certificate; with TLSKey the daemon serves HTTPS/WSS
	TLSKey          string
	LocalOnly       bool // MCP over stdio only; no listener
	DisableSSHWS    bool
	AuthToken       string // never logged or printed; see Redacted
	AuthTokenFile   string
	InsecureNoAuth  bool
	AllowedOrigins  []string
	MaxBodyBytes    int64
	ShutdownTimeout time.Duration

	// MaxStdioLineBytes bounds one MCP request line on stdio.
	MaxStdioLineBytes int64

	// HTTP bounds.
	MaxConns         int           // concurrent HTTP connections, WebSockets included
	MaxConnsPerIP    int           // the same, per client address
	MaxBatch         int           // JSON-RPC messages in one /mcp batch
	MaxReplyBytes    int64         // largest /mcp reply
	MaxInflightPerIP int           // concurrent /mcp and /execute requests per client address
	MCPSessions      bool          // stateful MCP over HTTP (Mcp-Session-Id, GET stream); off: stateless
	MCPSessionIdle   time.Duration // an MCP session idle this long ends
	MCPMaxSessions   int           // open MCP sessions at most

	// Tool calls (the registry every face serves).
	MaxConcurrentCalls int           // tool calls running at once (--max-concurrent-executions)
	ToolQueueWait      time.Duration // how long a call waits for a slot before "busy"
	ToolTimeout        time.Duration // per-call deadline of a tool without its own

	// AuditLog is the audit log's file, "-" for stderr, "" for none.
	AuditLog string
	// TokensFile is --tokens: scoped tokens (httpguard.LoadTokens).
	TokensFile string

	// Upstreams is the MCP servers file (docs/upstreams.md), "" for none;
	// UpstreamCacheDir holds their package caches.
	Upstreams        string
	UpstreamCacheDir string

	// The /gateway face's limits per connection: message size, batch size,
	// messages in flight, and the request rate (per second) with its burst.
	GatewayMaxMessage  int64
	GatewayMaxBatch    int
	GatewayMaxInFlight int
	GatewayRate        int
	GatewayBurst       int

	// SSHListen is the address of the SSH port (docs/ssh.md), "" for none;
	// SSHAuthorizedKeys, SSHTrustedUserCAKeys and SSHPasswordHashFile are
	// its authentication
	// (at least one is required); SSHCertPrincipals are the login names a
	// certificate may log in as; SSHMaxAuthTries cuts a connection after
	// that many failed attempts, SSHLoginGraceTime one that has not logged
	// in by then. ConventionalSSH and SSHPort are the
	// reference daemon's flags, mapped onto SSHListen.
	SSHListen            string
	SSHAuthorizedKeys    string
	SSHPasswordHashFile  string
	SSHTrustedUserCAKeys string
	SSHCertPrincipals    []string
	SSHMaxAuthTries      int
	SSHLoginGraceTime    time.Duration
	ConventionalSSH      bool
	SSHPort              int

	// GatewayTools serves http.*, fs.* and system.run (docs/gateway-tools.md).
	GatewayTools bool
	// ProcessTools serves the background process tools (docs/processes.md).
	ProcessTools bool
	// WatchTools serves watch_changes (tools/watch, docs/processes.md).
	WatchTools bool
	// Checkpoints is off, manual (the checkpoint_* tools) or auto (also one
	// before every call that can change the workspace): tools/checkpoints,
	// docs/checkpoints.md. The store lies under StateDir/checkpoints, bounded
	// by CheckpointMaxBytes and CheckpointMaxCount (oldest pruned first);
	// CheckpointMaxFiles bounds the entries one checkpoint walks;
	// CheckpointJournal lets a checkpoint list only what an inotify
	// journal saw change (fsops/checkpoint/journal.go).
	Checkpoints        string
	CheckpointMaxBytes int64
	CheckpointMaxCount int
	CheckpointMaxFiles int
	CheckpointJournal  bool
	// Transactions serves exec's `transaction` argument and the
	// transaction_* tools (tools/transactions, docs/checkpoints.md); off,
	// exec's schema and the tool list are the reference's.
	Transactions bool
	// TransactionMaxBytes and TransactionMaxFiles bound one transaction's
	// upper layer (exec with transaction: true; tools/transactions,
	// docs/checkpoints.md), TransactionMaxPending the transactions pending
	// at once, TransactionTTL how long one waits to be applied.
	TransactionMaxBytes   int64
	TransactionMaxFiles   int
	TransactionMaxPending int
	TransactionTTL        time.Duration
	// BrowserTools serves the browser.* tools (docs/browser.md): Chromium
	// at BrowserPath (found on PATH when ""), http:// pages only with
	// BrowserAllowHTTP, at most BrowserMaxSessions sessions, each closed
	// after BrowserIdleTimeout without an action; run as BrowserRunAs when
	// the daemon is root. BrowserAllowLocal admits the pages this machine
	// serves (localhost, 127.0.0.0/8, [::1], http or https, any port) and
	// serves the tools by itself: the one flag a user needs to browse what
	// they run locally.
	BrowserTools       bool
	BrowserRunAs       string
	BrowserPath        string
	BrowserAllowHTTP   bool
	BrowserAllowLocal  bool
	BrowserMaxSessions int
	BrowserIdleTimeout time.Duration
	// NetAllowHosts, NetAllowPrivate, NetAllowCIDRs and NetAllowPorts
	// loosen the network door for every tool that goes out (NetGuard).
	NetAllowHosts   []string
	NetAllowPrivate bool
	NetAllowCIDRs   []string
	NetAllowPorts   []string
	// Previews lets authorized clients reach the ports the workspace's
	// processes listen on: SSH direct-tcpip (`ssh -L`) and /preview/{port}/
	// (package previews, docs/processes.md).
	Previews bool
	// ExecApprovals is system.run's policy file; ExecApprovalMode and
	// ExecAsk its mode and ask setting; ExecApprovalTTL how long a pending
	// approval waits; ExecAskClient asks the MCP client's user (elicitation)
	// when the client supports it.
	ExecApprovals    string
	ExecApprovalMode string
	ExecAsk          string
	ExecApprovalTTL  time.Duration
	ExecAskClient    bool
	// OperatorToken approves system.run requests, read from
	// OperatorTokenFile (--operator-token-file).
	OperatorToken     string
	OperatorTokenFile string
	// MetricsToken is the token /metrics requires, read from
	// MetricsTokenFile (--metrics-token-file); "" leaves /metrics to the
	// Origin and Host rules alone.
	MetricsToken     string
	MetricsTokenFile string
	// FSDelete serves fs.delete.
	FSDelete bool

	// Extensions is the directory of Starlark extensions
	// (docs/extensions.md), "" for none.
	Extensions string
	// ExtensionsEnv are the variables every extension may read with
	// env.get (names, or PREFIX_*); ExtensionsDBHosts the hosts every
	// extension's postgres calls may connect to.
	ExtensionsEnv     []string
	ExtensionsDBHosts []string

	// Site is a tool site's directory served under /site/ and as MCP tools
	// (docs/sites.md), "" for none; SiteEnvFile fills its $VARs.
	Site        string
	SiteEnvFile string

	// StateDir holds the daemon's own files whose flags are not given:
	// the host key, the upstream caches (statedir.go).
	StateDir string

	// SSH over WebSocket.
	SSHHostKey      string
	MaxSSHConns     int
	Keepalive       time.Duration // --keepalive: /ssh, /gateway and the SSH port
	SSHEnvAllowlist []string
	// SSHMaxChannels caps the open SSH channels of the whole daemon, /ssh
	// and --ssh-listen together; SSHMaxChannelsPerIP is one client
	// address's share of it.
	SSHMaxChannels      int
	SSHMaxChannelsPerIP int

	// Runtime.
	MaxProcs string // "auto" or a number of CPUs; see Procs

	// Logging.
	LogFormat string // text or json
	LogLevel  string // debug, info, warn, error

	// ConfigFile is the file the settings were read from ("" = none).
	ConfigFile string
}

// Default returns the built-in defaults (Root unset).
func Default() Config {
	c := defaults()
	c.fillStateDefaults()
	return c
}

// defaults is every setting's default, before the files under --state-dir
// are derived (Load derives them once every layer is applied).
func defaults() Config {
	var c Config
	for _, s := range settings {
		if err := s.set(&c, s.def); err != nil {
			panic(fmt.Sprintf("config: bad default for %s: %v", s.key, err))
		}
	}
	return c
}

// Addr is the listen address, host:port.
func (c Config) Addr() string { return net.JoinHostPort(c.Bind, fmt.Sprint(c.Port)) }

// Redacted is c with the auth token replaced, for printing and logging.
func (c Config) Redacted() Config {
	if c.AuthToken != "" {
		c.AuthToken = "[redacted]"
	}
	return c
}

// Secrets are the tokens the daemon holds in clear (its own, the
// operator's, the scraper's): what its logs, its audit log and the
// environment of its commands and extensions never show. The --tokens
// file holds digests only.
func (c Config) Secrets() []string {
	var out []string
	for _, t := range []string{c.AuthToken, c.OperatorToken, c.MetricsToken} {
		if t != "" {
			out = append(out, t)
		}
	}
	return out
}

// tokensDiffer checks that the agent's, the operator's and the scraper's
// tokens are three tokens, at start (Validate) and on reload
// (ReloadTokenFiles).
func (c Config) tokensDiffer() error {
	if c.OperatorToken != "" && c.OperatorToken == c.AuthToken {
		return errors.New("--operator-token-file holds the agent's token (--auth-token-file): the operator's token must differ, or the agent could approve its own commands")
	}
	if c.MetricsToken != "" && (c.MetricsToken == c.AuthToken || c.MetricsToken == c.OperatorToken) {
		return errors.New("--metrics-token-file holds the agent's or the operator's token: the scraper's token must differ, so that what a scraper holds opens nothing but /metrics")
	}
	return nil
}

// HasAuth reports whether requests must authenticate: an auth token, or a
// token file, is set.
func (c Config) HasAuth() bool { return c.AuthToken != "" || c.TokensFile != "" }

// IsLoopback reports whether Bind only accepts connections from this machine.
func (c Config) IsLoopback() bool { return isLoopbackHost(c.Bind) }

// ExecNetworkOn resolves --exec-network. With auto, commands get the
// network unless the daemon serves its port without a token: bwrap shares
// the host's network namespace, so a command could then call this daemon's
// own /mcp or /ssh over loopback, unauthenticated, and work outside its
// scope (X-Scope-Path) or its sandbox's view. why says which case applies,
// for the startup log.
func (c Config) ExecNetworkOn() (on bool, why string) {
	servesPort := !c.LocalOnly
	noToken := !c.HasAuth()
	switch c.ExecNetwork {
	case "false":
		return false, "--exec-network=false"
	case "true":
		if servesPort && noToken {
			return true, "--exec-network=true without a token: a command can call this daemon's port unauthenticated and leave its scope"
		}
		return true, "--exec-network=true"
	}
	if servesPort && noToken {
		return false, "the port is served without a token, so a command with network could call this daemon and leave its scope; set a token (--auth-token-file) or --exec-network=true to give commands the network"
	}
	return true, "auto: a token is set, or no port is served"
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(h, "[]"))
	return err == nil && a.IsLoopback()
}

// Validate checks the settings that depend on each other or on the machine,
// and makes Root absolute. A missing root is fine here (EnsureRoot creates
// it), a root that is a file is not. Every operator path (a setting marked
// operatorPath, and the config file) must lie outside the workspace, its
// symlinks followed (checkOperatorPaths); --extensions must be a directory
// and --site hold a README.md. The files a part of the daemon loads (the
// --tokens file, the --upstreams file, the --exec-approvals file, the SSH
// port's keys and password hash) are not read here: the part that loads
// them validates them, once, when the daemon starts it, and daemon.Check
// runs the same validation for --check-config.
// geteuid is os.Geteuid; the --run-as tests replace it.
var geteuid = os.Geteuid

func (c *Config) Validate() error {
	if c.Root == "" {
		return errors.New("missing workspace root: set --root (alias --rootDir), AGENTBE_ROOT, or root in the config file")
	}
	if !filepath.IsAbs(c.Root) {
		abs, err := filepath.Abs(c.Root)
		if err != nil {
			return fmt.Errorf("--root %q: %v", c.Root, err)
		}
		c.Root = abs
	}
	c.Root = filepath.Clean(c.Root)
	if c.Backend == "filesystem" {
		fi, err := os.Stat(c.Root)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return fmt.Errorf("--root %q: %v", c.Root, err)
		case !fi.IsDir():
			return fmt.Errorf("--root %q is a file, not a directory", c.Root)
		}
	}
	if c.transactionsOn() && !filepath.IsAbs(c.StateDir) {
		// Transactions keep their directories under it, and each start
		// clears what dead daemons left: a relative (or empty) one would be
		// the daemon's working directory's, often the project itself.
		return fmt.Errorf("--state-dir %q: must be an absolute path: the daemon keeps its transactions under it (and clears what earlier daemons left there at start)", c.StateDir)
	}
	if err := c.checkOperatorPaths(); err != nil {
		return err
	}
	if c.TokensFile != "" && c.ScopePath != "" {
		return fmt.Errorf("--tokens and --scope-path cannot be combined: give each token its scope in %s", c.TokensFile)
	}
	if c.Fsync && c.Backend != "filesystem" {
		return fmt.Errorf("--fsync makes writes to disk durable; --backend %s keeps the workspace in memory: drop one", c.Backend)
	}
	c.ScopePath = strings.Trim(c.ScopePath, "/")
	for _, part := range strings.Split(c.ScopePath, "/") {
		if part == ".." {
			return fmt.Errorf("--scope-path %q: must stay inside the root (no \"..\")", c.ScopePath)
		}
	}
	if sandbox.Mode(c.Isolation).Below(sandbox.Mode(c.IsolationMin)) {
		return fmt.Errorf("--isolation %s is below --isolation-min %s: the daemon would refuse to start; raise --isolation (or use auto), or lower --isolation-min", c.Isolation, c.IsolationMin)
	}
	if c.RunAs != "" && c.Backend == "filesystem" {
		// The sandbox looks the user up again at start; checking it here
		// lets --check-config (systemd's ExecStartPre) name the flag.
		if _, err := user.Lookup(c.RunAs); err != nil {
			var unknown user.UnknownUserError
			if errors.As(err, &unknown) {
				return fmt.Errorf("--run-as %q: no such user on this machine: name an existing user (create one with useradd), or leave --run-as unset", c.RunAs)
			}
			return fmt.Errorf("--run-as %q: %v", c.RunAs, err)
		}
		if euid := geteuid(); euid != 0 {
			return fmt.Errorf("--run-as %q needs the daemon to run as root (it runs as uid %d): start it as root, or leave --run-as unset (its commands then run as its own user)", c.RunAs, euid)
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together: set both, or neither")
	}
	if c.MaxConnsPerIP > c.MaxConns {
		return fmt.Errorf("--max-connections-per-ip %d is larger than --max-connections %d: lower it, or raise --max-connections", c.MaxConnsPerIP, c.MaxConns)
	}
	if c.SSHMaxChannelsPerIP > c.SSHMaxChannels {
		return fmt.Errorf("--ssh-max-channels-per-ip %d is larger than --ssh-max-channels %d: lower it, or raise --ssh-max-channels", c.SSHMaxChannelsPerIP, c.SSHMaxChannels)
	}
	if c.MaxReplyBytes < c.MaxReadSize {
		return fmt.Errorf("--max-reply-bytes %d is smaller than --max-read-size %d: a whole-file read could not be answered; raise --max-reply-bytes or lower --max-read-size", c.MaxReplyBytes, c.MaxReadSize)
	}
	if c.Upstreams != "" && c.Backend != "filesystem" {
		return fmt.Errorf("--upstreams needs --backend filesystem: upstream servers are programs that work on a directory")
	}
	if c.ConventionalSSH && c.SSHListen == "" {
		// The reference's sshd listened on every interface.
		c.SSHListen = net.JoinHostPort("0.0.0.0", strconv.Itoa(c.SSHPort))
	}
	if c.SSHListen != "" {
		host, port, err := net.SplitHostPort(c.SSHListen)
		if err != nil {
			return fmt.Errorf("--ssh-listen %q: want ADDR:PORT (127.0.0.1:2222, or :2222 for every address): %v", c.SSHListen, err)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("--ssh-listen %q: the port must be 1-65535", c.SSHListen)
		}
		if host != "" && net.ParseIP(host) == nil && host != "localhost" {
			return fmt.Errorf("--ssh-listen %q: the address must be an IP address", c.SSHListen)
		}
		if c.SSHAuthorizedKeys == "" && c.SSHPasswordHashFile == "" && c.SSHTrustedUserCAKeys == "" {
			return fmt.Errorf("--ssh-listen %s needs authentication: set --ssh-authorized-keys (an OpenSSH authorized_keys file), --ssh-trusted-user-ca-keys and/or --ssh-password-hash-file; the SSH port has no unauthenticated mode", c.SSHListen)
		}
		if c.LocalOnly {
			return errors.New("--ssh-listen cannot be used with --local-only")
		}
	}
	switch c.ExecApprovalMode {
	case "deny", "allowlist", "full":
	default:
		return fmt.Errorf("--exec-approval-mode %q: use deny, allowlist or full", c.ExecApprovalMode)
	}
	switch c.ExecAsk {
	case "off", "on-miss", "always":
	default:
		return fmt.Errorf("--exec-ask %q: use off, on-miss or always", c.ExecAsk)
	}
	if err := c.tokensDiffer(); err != nil {
		return err
	}
	if c.Extensions != "" {
		if fi, err := os.Stat(c.Extensions); err != nil || !fi.IsDir() {
			return fmt.Errorf("--extensions %q is not a directory of *.star files", c.Extensions)
		}
	}
	if c.Site != "" {
		abs, err := filepath.Abs(c.Site)
		if err != nil {
			return fmt.Errorf("--site %q: %v", c.Site, err)
		}
		c.Site = abs
		if fi, err := os.Stat(filepath.Join(abs, "README.md")); err != nil || fi.IsDir() {
			return fmt.Errorf("--site %q has no README.md: a tool site is a directory of Markdown pages whose front page is README.md", c.Site)
		}
	}
	if c.SiteEnvFile != "" && c.Site == "" {
		return errors.New("--site-env-file is set without --site")
	}
	if c.LocalOnly {
		return nil
	}
	if !c.IsLoopback() && !c.HasAuth() && !c.InsecureNoAuth {
		return fmt.Errorf("--bind %s is not a loopback address and no auth token is set: set --auth-token-file (or --auth-token, AGENTBE_AUTH_TOKEN), or pass --insecure-no-auth to serve without authentication", c.Bind)
	}
	return nil
}

// EnsureRoot creates a missing filesystem root (0755, with parents) and
// reports whether it did, so the caller can log it.
func (c *Config) EnsureRoot() (created bool, err error) {
	if c.Backend != "filesystem" {
		return false, nil
	}
	if _, err := os.Stat(c.Root); !errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err := os.MkdirAll(c.Root, 0o755); err != nil {
		return false, fmt.Errorf("--root %q does not exist and cannot be created: %v", c.Root, err)
	}
	return true, nil
}

// Procs is how many CPUs the daemon's own Go code may run on at once
// (GOMAXPROCS), given Go's default for this process (the CPUs it may use,
// cgroup limits included) and whether the GOMAXPROCS environment variable
// is set. "auto" is half of them, at least 1: the daemon's work is request
// and response, where handing a goroutine to another core costs more than
// the core brings (a futex wake per hand-off; the measurements are in
// docs/performance.md, "CPUs for the daemon's own work"), and the machine's
// other cores are for the commands
// it runs, which are not limited by this. An explicit GOMAXPROCS in the
// environment wins over "auto"; a number here wins over both. Setting it
// stops Go from following later changes of the CPU limit (it re-reads the
// cgroup only for its own default), so a resized pod wants a restart.
func (c *Config) Procs(goDefault int, envSet bool) (n int, why string) {
	if c.MaxProcs != "" && c.MaxProcs != "auto" {
		n, _ = strconv.Atoi(c.MaxProcs) // checked by the setting
		return n, "--max-procs"
	}
	if envSet {
		return goDefault, "GOMAXPROCS in the environment"
	}
	return max(1, goDefault/2), "auto: half of the " + strconv.Itoa(goDefault) + " CPUs this process may use"
}

// BurstProcs is the GOMAXPROCS that work made mostly of short system calls
// (a checkpoint's walk of the workspace: internal/cpuburst) may raise the
// daemon to while it runs: under "auto", every CPU this process may use
// (goDefault). Request and response work gains nothing from more Ps, a
// walk's fstatat calls do, and a walk is short and bounded
// (--checkpoint-max-files, the call's deadline); the commands running
// meanwhile share the CPUs with the whole daemon for that long, since
// GOMAXPROCS is the process's. 0 (no burst) where the operator chose a
// number or set GOMAXPROCS, a bound nothing goes past.
func (c *Config) BurstProcs(goDefault int, envSet bool) int {
	if (c.MaxProcs != "" && c.MaxProcs != "auto") || envSet {
		return 0
	}
	return goDefault
}

// NetGuard is the operator's loosening of the network door (--net-allow-*)
// as netguard options, with the ports added to defaultPorts (the door's
// defaults for the caller: 80 and 443 for HTTP, 5432 for postgres). The
// values were checked when the configuration was loaded.
func (c Config) NetGuard(defaultPorts ...uint16) netguard.Options {
	prefixes, _ := parsePrefixes(c.NetAllowCIDRs)
	extra, _ := parsePorts(c.NetAllowPorts)
	allowed := slices.Clone(defaultPorts)
	for _, p := range extra {
		if !slices.Contains(allowed, p) {
			allowed = append(allowed, p)
		}
	}
	return netguard.Options{AllowHosts: slices.Clone(c.NetAllowHosts), AllowPrivate: c.NetAllowPrivate,
		AllowPrefixes: prefixes, AllowPorts: allowed}
}

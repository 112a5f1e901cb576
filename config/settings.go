package config

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbe/agentbe-daemon/sandbox"
)

// setting is one configurable value. key is both the config-file key and the
// flag name; alias is the reference CLI's spelling of the flag, if it differs.
type setting struct {
	key string
	// group is the section of --help and docs/configuration.md (groups.go).
	group Group
	alias string
	env   []string
	def   string
	usage string
	// field returns a pointer to the Config field: *string, *int, *bool,
	// *time.Duration, *int64 (a byte size) or *[]string.
	field func(*Config) any
	// check validates a parsed value; it returns the reason it is wrong.
	check func(v any) error
	// operatorPath marks a path of the operator's own (a key, a token,
	// a policy, extensions, the audit log): Validate refuses one that
	// lies inside the workspace, where the agent could read and change it
	// (checkOperatorPaths).
	operatorPath pathRole
	// used reports whether the daemon uses the setting's path as it is
	// configured (nil: whenever it is set); a path it does not use (the
	// default host key of a daemon serving no SSH) is not checked.
	used func(*Config) bool
}

// pathRole is what an operator path names.
type pathRole int

const (
	notOperatorPath pathRole = iota
	// operatorFile: a file the daemon reads, writes or runs. It must lie
	// outside the workspace.
	operatorFile
	// operatorDir: a directory the daemon reads or writes below. It must
	// lie outside the workspace, and the workspace may not lie in it.
	operatorDir
)

// env is a setting's environment variables: AGENTBE_<KEY>, then the
// other projects' names it also answers to (the reference container's
// WORKSPACE_ROOT, PORT and AUTH_TOKEN; the execution service's
// SANDBOX_DIRECTORY, MCP_CONFIG_PATH, DEFAULT_TIMEOUT,
// MAX_CONCURRENT_EXECUTIONS and LOG_LEVEL), in that order: the first one
// set wins, and a flag wins over all of them.
func env(key string, extra ...string) []string {
	return append([]string{"AGENTBE_" + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))}, extra...)
}

// envForms turn the value of another project's variable into the form of
// the setting it sets: the execution service's DEFAULT_TIMEOUT is a number
// of seconds (30, 2.5) and its LOG_LEVEL Python's name of a level (INFO,
// WARNING, CRITICAL). A value already in our form passes unchanged.
var envForms = map[string]func(string) string{
	"DEFAULT_TIMEOUT": secondsForm,
	"LOG_LEVEL":       logLevelForm,
}

// secondsForm reads a bare number as seconds ("30" is 30s).
func secondsForm(v string) string {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(f >= 0 && f <= 1e9) {
		return v // a duration ("30s"), or wrong: the setting's check words it
	}
	return time.Duration(f * float64(time.Second)).String()
}

// logLevelForm reads Python's level names, in any case.
func logLevelForm(v string) string {
	switch l := strings.ToLower(strings.TrimSpace(v)); l {
	case "warning":
		return "warn"
	case "critical", "fatal":
		return "error"
	default:
		return l
	}
}

func oneOf(allowed ...string) func(any) error {
	return func(v any) error {
		if !slices.Contains(allowed, v.(string)) {
			return fmt.Errorf("must be one of %s", strings.Join(allowed, ", "))
		}
		return nil
	}
}

// isolationModes are the --isolation values: sandbox's one list of modes.
func isolationModes() []string {
	var names []string
	for _, m := range sandbox.Modes() {
		names = append(names, string(m))
	}
	return names
}

// floorModes are the --isolation-min values: sandbox's effective modes,
// strongest first.
func floorModes() []string {
	var names []string
	for _, m := range sandbox.FloorModes() {
		names = append(names, string(m))
	}
	return names
}

func between(lo, hi int) func(any) error {
	return func(v any) error {
		if n := v.(int); n < lo || n > hi {
			return fmt.Errorf("must be from %d to %d", lo, hi)
		}
		return nil
	}
}

// procsValue accepts "auto" or a whole number from 1 to 4096.
func procsValue(v any) error {
	s := v.(string)
	if s == "auto" {
		return nil
	}
	if n, err := strconv.Atoi(s); err != nil || n < 1 || n > 4096 {
		return fmt.Errorf("must be auto or a whole number from 1 to 4096")
	}
	return nil
}

// helperPath is --sandbox-helper's value: empty, off, or an absolute path.
func helperPath(v any) error {
	if p := v.(string); p != "" && p != "off" && !filepath.IsAbs(p) {
		return fmt.Errorf("must be an absolute path, or off")
	}
	return nil
}

func positive(v any) error {
	switch n := v.(type) {
	case time.Duration:
		if n <= 0 {
			return fmt.Errorf("must be greater than zero")
		}
	case int64:
		if n <= 0 {
			return fmt.Errorf("must be greater than zero")
		}
	case int:
		if n <= 0 {
			return fmt.Errorf("must be greater than zero")
		}
	}
	return nil
}

// durationBetween checks a duration against bounds.
func durationBetween(lo, hi time.Duration) func(any) error {
	return func(v any) error {
		if d := v.(time.Duration); d < lo || d > hi {
			return fmt.Errorf("must be from %s to %s", lo, hi)
		}
		return nil
	}
}

// atLeast checks a byte size against a floor.
func atLeast(min int64) func(any) error {
	return func(v any) error {
		if n := v.(int64); n < min {
			return fmt.Errorf("must be at least %d bytes", min)
		}
		return nil
	}
}

func notNegative(v any) error {
	switch n := v.(type) {
	case int:
		if n < 0 {
			return fmt.Errorf("must be 0 (unchanged) or more")
		}
	case int64:
		if n < 0 {
			return fmt.Errorf("must be 0 (unchanged) or more")
		}
	}
	return nil
}

func wholeSeconds(v any) error {
	d := v.(time.Duration)
	if d < 0 || d%time.Second != 0 {
		return fmt.Errorf("must be 0 (unchanged) or a whole number of seconds, such as 30s or 5m")
	}
	return nil
}

// compiles checks each allow pattern as a Go regular expression.
func compiles(v any) error {
	for _, p := range v.([]string) {
		if _, err := regexp.Compile(p); err != nil {
			return fmt.Errorf("pattern %q: %v", p, err)
		}
	}
	return nil
}

// hostPatterns checks --net-allow-hosts: bare host names or *.suffix
// patterns, no scheme, port or path (those would never match a host).
func hostPatterns(v any) error {
	for _, h := range v.([]string) {
		name := strings.TrimPrefix(h, "*.")
		if name == "" || strings.ContainsAny(name, "/:*@ ") || strings.HasPrefix(name, ".") {
			return fmt.Errorf("%q is not a host name or *.domain pattern", h)
		}
	}
	return nil
}

// envNames checks --extensions-env: variable names, or PREFIX_* patterns.
func envNames(v any) error {
	for _, n := range v.([]string) {
		name := strings.TrimSuffix(n, "*")
		if n == "" || strings.ContainsAny(name, "=*") || strings.ContainsFunc(name, func(r rune) bool {
			return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
		}) {
			return fmt.Errorf("%q is not a variable name or PREFIX_* pattern (letters, digits, _)", n)
		}
		// A pattern names a family of variables, never every variable
		// ("*") or a family by one letter ("A*": AWS_SECRET_ACCESS_KEY).
		if name != n && (!strings.HasSuffix(name, "_") || strings.Trim(name, "_") == "") {
			return fmt.Errorf("%q: a pattern is a prefix ending in _ followed by * (POSTGRES_*), never * alone or a prefix without _", n)
		}
	}
	return nil
}

// dbHosts checks --extensions-db-hosts: host names or addresses, no port.
func dbHosts(v any) error {
	for _, h := range v.([]string) {
		if _, err := netip.ParseAddr(h); err != nil && (h == "" || strings.ContainsAny(h, "/\\ :@,[]*")) {
			return fmt.Errorf("%q is not a host name or an address (without a port)", h)
		}
	}
	return nil
}

// prefixes checks --net-allow-cidrs.
func prefixes(v any) error {
	_, err := parsePrefixes(v.([]string))
	return err
}

func parsePrefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address prefix such as 10.1.2.0/24", s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ports checks --net-allow-ports.
func ports(v any) error {
	_, err := parsePorts(v.([]string))
	return err
}

func parsePorts(list []string) ([]uint16, error) {
	var out []uint16
	for _, s := range list {
		n, err := strconv.ParseUint(s, 10, 16)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%q is not a port from 1 to 65535", s)
		}
		out = append(out, uint16(n))
	}
	return out, nil
}

// settings is the single declaration of every setting. Order is the order of
// --check-config output and, within each group, of --help.
var settings = []*setting{
	{key: "root", group: GroupServing, alias: "rootDir", env: env("root", "WORKSPACE_ROOT", "SANDBOX_DIRECTORY"),
		usage: "workspace root directory; created (0755) if missing",
		field: func(c *Config) any { return &c.Root }},
	{key: "state-dir", group: GroupServing, env: env("state-dir"), def: defaultStateDir(os.Geteuid(), os.Getenv),
		usage: "the daemon's own files outside the workspace, where their flags are not given: the SSH host key, the upstream servers' package caches, the checkpoint store, the transactions' directories; an absolute path outside the workspace; /var/lib/agentbe as root, else $XDG_STATE_HOME/agentbe or ~/.local/state/agentbe",
		field: func(c *Config) any { return &c.StateDir }, operatorPath: operatorDir, used: usesStateDir},
	{key: "scope-path", group: GroupServing, alias: "scopePath", env: env("scope-path"),
		usage: "serve only this subdirectory of the root (clients then cannot send X-Scope-Path)",
		field: func(c *Config) any { return &c.ScopePath }},
	{key: "backend", group: GroupServing, env: env("backend"), def: "filesystem",
		usage: "workspace backend: filesystem, or memory (an in-memory tree, file tools only)",
		field: func(c *Config) any { return &c.Backend }, check: oneOf("filesystem", "memory")},
	{key: "isolation", group: GroupIsolation, env: env("isolation"), def: "auto",
		usage: "command isolation: auto (bwrap if it works, else landlock if the kernel has it, else software), bwrap, landlock, software, none",
		field: func(c *Config) any { return &c.Isolation }, check: oneOf(isolationModes()...)},
	{key: "isolation-min", group: GroupIsolation, env: env("isolation-min"), def: "none",
		usage: "the weakest command isolation the daemon accepts (strongest first: bwrap, landlock, software, none); a start that would give commands a weaker one (auto falling back) is refused, saying why the stronger modes failed",
		field: func(c *Config) any { return &c.IsolationMin }, check: oneOf(floorModes()...)},
	{key: "shell", group: GroupIsolation, env: env("shell"), def: "auto",
		usage: "shell commands run in: auto (bash if present, else sh), bash, sh",
		field: func(c *Config) any { return &c.Shell }, check: oneOf("auto", "bash", "sh")},
	{key: "run-as", group: GroupIsolation, env: env("run-as"),
		usage: "when the daemon runs as root, run commands as this user, who must be able to write --root (chown it); what the file tools, SFTP and scp create is given to this user; without it, root inside bwrap still means root file access",
		field: func(c *Config) any { return &c.RunAs }},
	{key: "sandbox-helper", group: GroupIsolation, env: env("sandbox-helper"),
		usage: "the agentbe-sandbox program the daemon starts as its trampoline (the landlock mode's commands, transactions that cannot mount in place): an absolute path, validated at start (a regular program owned by root or the daemon's user, writable by no one else) and refused if it is not; off: the daemon is its own trampoline; default: agentbe-sandbox beside the daemon's executable if it is there and valid, else the daemon itself",
		field: func(c *Config) any { return &c.SandboxHelper }, check: helperPath,
		operatorPath: operatorFile, used: func(c *Config) bool { return c.SandboxHelper != "off" }},
	{key: "block-dangerous", group: GroupIsolation, env: env("block-dangerous"), def: "true",
		usage: "refuse dangerous commands (sudo, rm -rf /, curl | sh, ...) before they run",
		field: func(c *Config) any { return &c.BlockDangerous }},
	{key: "allow-commands", group: GroupIsolation, env: env("allow-commands"),
		usage: "regular expressions (Go syntax; comma-separated, so a pattern cannot contain a comma) exempting one simple command from the blocked categories, matched against its words joined by single spaces, e.g. ^gcloud rsync ",
		field: func(c *Config) any { return &c.AllowCommands }, check: compiles},
	{key: "exec-network", group: GroupNetwork, env: env("exec-network"), def: "auto",
		usage: "let commands use the network: true (bwrap shares the network namespace), false (loopback only), auto (true unless the port is served without a token, where a command could call this daemon and leave its scope)",
		field: func(c *Config) any { return &c.ExecNetwork }, check: oneOf("auto", "true", "false")},
	{key: "exec-timeout", group: GroupLimits, env: env("exec-timeout"), def: "2m",
		usage: "default time limit of one command; the whole process tree is killed after it",
		field: func(c *Config) any { return &c.ExecTimeout }, check: positive},
	{key: "exec-output-limit", group: GroupLimits, env: env("exec-output-limit"), def: "1MiB",
		usage: "output kept per stream of one command (head and tail; the rest is counted)",
		field: func(c *Config) any { return &c.ExecOutputLimit }, check: positive},
	{key: "exec-max-processes", group: GroupLimits, env: env("exec-max-processes"), def: "0",
		usage: "processes (threads) one command may have at once, as pids.max of its own cgroup (else RLIMIT_NPROC of a non-root user, through the shell); 0 = 1024 where a pids cgroup is available",
		field: func(c *Config) any { return &c.ExecMaxProcesses }, check: notNegative},
	{key: "exec-max-file-size", group: GroupLimits, env: env("exec-max-file-size"), def: "0",
		usage: "RLIMIT_FSIZE for commands: the largest file one may write; 0 = unchanged",
		field: func(c *Config) any { return &c.ExecMaxFileSize }, check: notNegative},
	{key: "exec-max-cpu", group: GroupLimits, env: env("exec-max-cpu"), def: "0s",
		usage: "RLIMIT_CPU for commands: CPU time per process (whole seconds); 0 = unchanged",
		field: func(c *Config) any { return &c.ExecMaxCPU }, check: wholeSeconds},
	{key: "exec-max-memory", group: GroupLimits, env: env("exec-max-memory"), def: "0",
		usage: "RLIMIT_AS for commands: virtual memory per process; 0 = unchanged",
		field: func(c *Config) any { return &c.ExecMaxMemory }, check: notNegative},
	{key: "exec-max-concurrent", group: GroupLimits, env: env("exec-max-concurrent"), def: "256",
		usage: "commands that may run at once (MCP exec, SSH exec and shells); one more is refused at once",
		field: func(c *Config) any { return &c.ExecMaxConcurrent }, check: positive},
	{key: "max-read-size", group: GroupLimits, env: env("max-read-size"), def: "10MiB",
		usage: "largest file a tool reads whole; larger files must be paged",
		field: func(c *Config) any { return &c.MaxReadSize }, check: positive},
	{key: "fsync", group: GroupServing, env: env("fsync"), def: "false",
		usage: "make every write durable before it is acknowledged (MCP file tools, SFTP close, SCP, each checkpoint of the store): fsync the file's data and the directory entries it changed; off by default because it makes a small write about 3-4x slower",
		field: func(c *Config) any { return &c.Fsync }},
	{key: "bind", group: GroupServing, env: env("bind"), def: "127.0.0.1",
		usage: "address to listen on; a non-loopback address requires an auth token",
		field: func(c *Config) any { return &c.Bind }},
	{key: "port", group: GroupServing, env: env("port", "PORT"), def: "3001",
		usage: "TCP port for /mcp, /ssh, /health and /metrics",
		field: func(c *Config) any { return &c.Port }, check: between(1, 65535)},
	{key: "tls-cert", group: GroupServing, env: env("tls-cert"),
		usage: "serve HTTPS/WSS with this PEM certificate (chain); needs --tls-key; reloaded on SIGHUP",
		field: func(c *Config) any { return &c.TLSCert }, operatorPath: operatorFile},
	{key: "tls-key", group: GroupServing, env: env("tls-key"),
		usage: "PEM private key for --tls-cert; reloaded on SIGHUP",
		field: func(c *Config) any { return &c.TLSKey }, operatorPath: operatorFile},
	{key: "local-only", group: GroupServing, env: env("local-only"), def: "false",
		usage: "serve MCP over stdin/stdout only: no listener, logs on stderr",
		field: func(c *Config) any { return &c.LocalOnly }},
	{key: "disable-ssh-ws", group: GroupSSH, env: env("disable-ssh-ws"), def: "false",
		usage: "do not serve SSH over WebSocket at /ssh",
		field: func(c *Config) any { return &c.DisableSSHWS }},
	{key: "auth-token", group: GroupAuthentication, env: env("auth-token", "AUTH_TOKEN"),
		usage: "bearer token clients must send (visible in ps: prefer --auth-token-file or the environment)",
		field: func(c *Config) any { return &c.AuthToken }},
	{key: "auth-token-file", group: GroupAuthentication, env: env("auth-token-file"),
		usage: "read the bearer token from this file (surrounding whitespace trimmed); read again on SIGHUP, after which the old token admits no one",
		field: func(c *Config) any { return &c.AuthTokenFile }, operatorPath: operatorFile},
	{key: "insecure-no-auth", group: GroupAuthentication, env: env("insecure-no-auth"), def: "false",
		usage: "allow a non-loopback --bind without a token (anyone who reaches the port controls the workspace)",
		field: func(c *Config) any { return &c.InsecureNoAuth }},
	{key: "allowed-origins", group: GroupAuthentication, env: env("allowed-origins"),
		usage: "browser Origins allowed besides loopback ones, on every endpoint but /health and /health/servers (comma-separated)",
		field: func(c *Config) any { return &c.AllowedOrigins }},
	{key: "max-body-bytes", group: GroupLimits, env: env("max-body-bytes"), def: "4MiB",
		usage: "largest MCP request body; larger ones get 413",
		field: func(c *Config) any { return &c.MaxBodyBytes }, check: positive},
	{key: "max-stdio-line-bytes", group: GroupLimits, env: env("max-stdio-line-bytes"), def: "16MiB",
		usage: "largest MCP request line on stdio (--local-only, ext serve), at least 64KiB; a longer one gets JSON-RPC error -32600, is skipped unread, and the session goes on",
		field: func(c *Config) any { return &c.MaxStdioLineBytes }, check: atLeast(64 << 10)},
	{key: "max-connections", group: GroupLimits, env: env("max-connections"), def: "1024",
		usage: "concurrent HTTP connections (WebSockets included); more are closed at once, and idle ones are closed when 80% are in use",
		field: func(c *Config) any { return &c.MaxConns }, check: between(1, 1<<20)},
	{key: "max-connections-per-ip", group: GroupLimits, env: env("max-connections-per-ip"), def: "128",
		usage: "concurrent HTTP connections from one client address (WebSockets included)",
		field: func(c *Config) any { return &c.MaxConnsPerIP }, check: between(1, 1<<20)},
	{key: "max-batch", group: GroupLimits, env: env("max-batch"), def: "64",
		usage: "JSON-RPC messages in one /mcp batch; a larger batch is refused whole with 400 and error -32600",
		field: func(c *Config) any { return &c.MaxBatch }, check: between(1, 10000)},
	{key: "max-reply-bytes", group: GroupLimits, env: env("max-reply-bytes"), def: "32MiB",
		usage: "largest answer to one /mcp request, one /gateway message or one /execute call, at least 64KiB and at least --max-read-size; a request whose result would exceed it (or the rest of a batch's share) gets an error naming the limit instead",
		field: func(c *Config) any { return &c.MaxReplyBytes }, check: atLeast(64 << 10)},
	{key: "max-inflight-per-ip", group: GroupLimits, env: env("max-inflight-per-ip"), def: "32",
		usage: "concurrent /mcp and /execute requests from one client address, counted together; more get 429 with Retry-After (a stdio session counts as one client: more get JSON-RPC error -32000)",
		field: func(c *Config) any { return &c.MaxInflightPerIP }, check: between(1, 1<<20)},
	{key: "mcp-sessions", group: GroupServing, env: env("mcp-sessions"), def: "false",
		usage: "stateful MCP over HTTP: sessions (Mcp-Session-Id), a GET stream for notifications such as tools/list_changed, DELETE to end; off, /mcp is stateless",
		field: func(c *Config) any { return &c.MCPSessions }},
	{key: "mcp-session-idle-timeout", group: GroupLimits, env: env("mcp-session-idle-timeout"), def: "30m",
		usage: "with --mcp-sessions, an MCP session idle this long ends",
		field: func(c *Config) any { return &c.MCPSessionIdle }, check: positive},
	{key: "mcp-max-sessions", group: GroupLimits, env: env("mcp-max-sessions"), def: "100",
		usage: "with --mcp-sessions, open MCP sessions at most; an initialize past it gets 503; with --tokens, one token opens at most half of them",
		field: func(c *Config) any { return &c.MCPMaxSessions }, check: between(1, 1<<20)},
	{key: "max-concurrent-executions", group: GroupLimits, env: env("max-concurrent-executions", "MAX_CONCURRENT_EXECUTIONS"), def: "10",
		usage: "tool calls running at once across every face; more wait up to --tool-queue-wait, then get a busy error",
		field: func(c *Config) any { return &c.MaxConcurrentCalls }, check: between(1, 10000)},
	{key: "tool-queue-wait", group: GroupLimits, env: env("tool-queue-wait"), def: "2s",
		usage: "how long a tool call waits for a free slot (--max-concurrent-executions) before a busy error",
		field: func(c *Config) any { return &c.ToolQueueWait }, check: durationBetween(time.Millisecond, time.Hour)},
	{key: "tool-timeout", group: GroupLimits, env: env("tool-timeout", "DEFAULT_TIMEOUT"), def: "30s",
		usage: "deadline of one tool call (tools with their own deadline, such as exec's --exec-timeout, keep it)",
		field: func(c *Config) any { return &c.ToolTimeout }, check: durationBetween(time.Second, 24*time.Hour)},
	{key: "tokens", group: GroupAuthentication, env: env("tokens"),
		usage: "a JSON file of further bearer tokens, each bound to a scope, read-only or not, with or without exec ({\"tokens\":[{\"name\",\"sha256\",\"scope\",\"readOnly\",\"exec\"}]}, docs/security.md); reloaded on SIGHUP; the auth token still opens everything",
		field: func(c *Config) any { return &c.TokensFile }, operatorPath: operatorFile},
	{key: "audit-log", group: GroupObservability, env: env("audit-log"),
		usage: "append one JSON line per tool call and SSH session to this file (created 0600, reopened on SIGHUP), or - for stderr; off when empty",
		field: func(c *Config) any { return &c.AuditLog }, operatorPath: operatorFile, used: auditLogIsFile},
	{key: "upstreams", group: GroupTools, env: env("upstreams", "MCP_CONFIG_PATH"),
		usage: "MCP servers to run in the sandbox and serve as server__tool, from this JSON file ({\"servers\":[...]}, docs/upstreams.md); off when empty",
		field: func(c *Config) any { return &c.Upstreams }, operatorPath: operatorFile},
	{key: "upstream-cache-dir", group: GroupTools, env: env("upstream-cache-dir"),
		usage: "where each --upstreams server gets a writable package cache of its own (npx, uvx), outside the workspace; default: --state-dir's upstreams",
		field: func(c *Config) any { return &c.UpstreamCacheDir }, operatorPath: operatorDir},
	{key: "gateway-max-message-bytes", group: GroupLimits, env: env("gateway-max-message-bytes"), def: "1MiB",
		usage: "largest /gateway message; a larger one closes the connection (1009)",
		field: func(c *Config) any { return &c.GatewayMaxMessage }, check: positive},
	{key: "gateway-max-batch", group: GroupLimits, env: env("gateway-max-batch"), def: "20",
		usage: "requests in one /gateway JSON-RPC batch; a larger batch is refused whole",
		field: func(c *Config) any { return &c.GatewayMaxBatch }, check: between(1, 10000)},
	{key: "gateway-max-in-flight", group: GroupLimits, env: env("gateway-max-in-flight"), def: "8",
		usage: "messages of one /gateway connection running at once; more get a busy error",
		field: func(c *Config) any { return &c.GatewayMaxInFlight }, check: between(1, 10000)},
	{key: "gateway-rate", group: GroupLimits, env: env("gateway-rate"), def: "50",
		usage: "requests per second one /gateway connection may make (a token bucket); more get a rate-limit error",
		field: func(c *Config) any { return &c.GatewayRate }, check: between(1, 1000000)},
	{key: "gateway-burst", group: GroupLimits, env: env("gateway-burst"), def: "100",
		usage: "the /gateway rate limit's burst",
		field: func(c *Config) any { return &c.GatewayBurst }, check: between(1, 1000000)},
	{key: "keepalive", group: GroupLimits, alias: "ssh-keepalive", env: env("keepalive", "AGENTBE_SSH_KEEPALIVE"), def: "30s",
		usage: "keepalive interval of the daemon's long-lived connections: a WebSocket ping on /ssh and /gateway, keepalive@openssh.com on the SSH port; a peer silent for 3 intervals (no frame on a WebSocket, no keepalive answer on the SSH port) is dropped",
		field: func(c *Config) any { return &c.Keepalive }, check: positive},
	{key: "ssh-listen", group: GroupSSH, env: env("ssh-listen"),
		usage: "serve SSH (OpenSSH clients, sftp, scp, the clients' conventional transport) on this ADDR:PORT, e.g. 127.0.0.1:2222; needs --ssh-authorized-keys, or --ssh-trusted-user-ca-keys, or --ssh-password-hash-file; off when empty",
		field: func(c *Config) any { return &c.SSHListen }},
	{key: "ssh-authorized-keys", group: GroupSSH, env: env("ssh-authorized-keys"),
		usage: "OpenSSH authorized_keys file of the SSH port (from=, restrict, no-pty honoured; reloaded when it changes or on SIGHUP; a version that does not load admits no key)",
		field: func(c *Config) any { return &c.SSHAuthorizedKeys }, operatorPath: operatorFile},
	{key: "ssh-trusted-user-ca-keys", group: GroupSSH, env: env("ssh-trusted-user-ca-keys"),
		usage: "OpenSSH TrustedUserCAKeys file of the SSH port: user certificates signed by one of its keys log in as a principal they name that --ssh-cert-principals lists (source-address and permit-pty honoured; reloaded when it changes; a version that does not load admits no certificate)",
		field: func(c *Config) any { return &c.SSHTrustedUserCAKeys }, operatorPath: operatorFile},
	{key: "ssh-cert-principals", group: GroupSSH, env: env("ssh-cert-principals"), def: "agent",
		usage: "login names a user certificate of --ssh-trusted-user-ca-keys may log in as (comma-separated); the certificate must name the login name among its principals too",
		field: func(c *Config) any { return &c.SSHCertPrincipals }},
	{key: "ssh-password-hash-file", group: GroupSSH, env: env("ssh-password-hash-file"),
		usage: "file holding a bcrypt hash of the SSH port's password (htpasswd -nbBC 12 '' PASSWORD | cut -d: -f2); off when empty",
		field: func(c *Config) any { return &c.SSHPasswordHashFile }, operatorPath: operatorFile},
	{key: "ssh-max-auth-tries", group: GroupSSH, env: env("ssh-max-auth-tries"), def: "6",
		usage: "failed authentication attempts before the SSH port cuts a connection",
		field: func(c *Config) any { return &c.SSHMaxAuthTries }, check: between(1, 100)},
	{key: "ssh-login-grace-time", group: GroupSSH, env: env("ssh-login-grace-time"), def: "30s",
		usage: "how long an SSH connection, on the SSH port or /ssh, may take to log in before it is cut (OpenSSH's LoginGraceTime)",
		field: func(c *Config) any { return &c.SSHLoginGraceTime }, check: durationBetween(100*time.Millisecond, 10*time.Minute)},
	{key: "conventional-ssh", group: GroupSSH, env: env("conventional-ssh"), def: "false",
		usage: "the reference daemon's flag: serve SSH on every address at --ssh-port (deprecated: use --ssh-listen)",
		field: func(c *Config) any { return &c.ConventionalSSH }},
	{key: "ssh-port", group: GroupSSH, env: env("ssh-port"), def: "22",
		usage: "the port of --conventional-ssh (deprecated: use --ssh-listen)",
		field: func(c *Config) any { return &c.SSHPort }, check: between(1, 65535)},
	{key: "process-tools", group: GroupTools, env: env("process-tools"), def: "false",
		usage: "serve background processes as MCP tools: process_start, process_list, process_output, process_wait, process_signal, process_kill (docs/processes.md)",
		field: func(c *Config) any { return &c.ProcessTools }},
	{key: "watch-tools", group: GroupTools, env: env("watch-tools"), def: "false",
		usage: "serve watch_changes: follow created, written and removed files under a directory of the workspace with a cursor (docs/processes.md)",
		field: func(c *Config) any { return &c.WatchTools }},
	{key: "checkpoints", group: GroupTools, env: env("checkpoints"), def: "off",
		usage: "workspace checkpoints: off, manual (serve checkpoint_create, checkpoint_list, checkpoint_diff, checkpoint_restore) or auto (also take one before every tool call that can change the workspace); stored under --state-dir (docs/checkpoints.md)",
		field: func(c *Config) any { return &c.Checkpoints }, check: oneOf("off", "manual", "auto")},
	{key: "checkpoint-max-bytes", group: GroupTools, env: env("checkpoint-max-bytes"), def: "1GiB",
		usage: "the most the checkpoint store holds (content deduplicated); the oldest checkpoints are pruned first, and a checkpoint that alone would pass it is refused",
		field: func(c *Config) any { return &c.CheckpointMaxBytes }, check: atLeast(1 << 20)},
	{key: "checkpoint-max-count", group: GroupTools, env: env("checkpoint-max-count"), def: "100",
		usage: "the most checkpoints kept (each scope's counted together); the oldest are pruned first",
		field: func(c *Config) any { return &c.CheckpointMaxCount }, check: between(1, 100000)},
	{key: "checkpoint-max-files", group: GroupTools, env: env("checkpoint-max-files"), def: "200000",
		usage: "the most entries (files, directories, links) one checkpoint, diff or restore walks, and the most it skips (special files, links leading out); a larger workspace is refused naming this flag",
		field: func(c *Config) any { return &c.CheckpointMaxFiles }, check: between(1, 100000000)},
	{key: "checkpoint-journal", group: GroupTools, env: env("checkpoint-journal"), def: "true",
		usage: "after a scope's first checkpoint, list only the directories an inotify watch saw change, not the whole workspace; false walks it in full every time, which also sees writes through a mapping still held and through hard links made outside the workspace (docs/checkpoints.md)",
		field: func(c *Config) any { return &c.CheckpointJournal }},
	{key: "transactions", group: GroupTools, env: env("transactions"), def: "false",
		usage: "serve transactions: exec's transaction argument (run a command on a copy-on-write view of the workspace, bwrap isolation only) and transaction_apply, transaction_discard, transaction_list (docs/checkpoints.md#transactions)",
		field: func(c *Config) any { return &c.Transactions }},
	{key: "transaction-max-bytes", group: GroupTools, env: env("transaction-max-bytes"), def: "256MiB",
		usage: "the most one transaction (exec with transaction: true, with --transactions, bwrap mode) may write: its upper layer, in memory; past it the command's writes fail and the transaction is refused naming this flag (docs/checkpoints.md#transactions)",
		field: func(c *Config) any { return &c.TransactionMaxBytes }, check: atLeast(1 << 20)},
	{key: "transaction-max-files", group: GroupTools, env: env("transaction-max-files"), def: "20000",
		usage: "the most files, directories and links one transaction may create or change; past it the command's writes fail and the transaction is refused naming this flag",
		field: func(c *Config) any { return &c.TransactionMaxFiles }, check: between(16, 10000000)},
	{key: "transaction-max-pending", group: GroupTools, env: env("transaction-max-pending"), def: "8",
		usage: "the most transactions waiting to be applied or discarded at once; one more is refused naming this flag",
		field: func(c *Config) any { return &c.TransactionMaxPending }, check: between(1, 1000)},
	{key: "transaction-ttl", group: GroupTools, env: env("transaction-ttl"), def: "30m",
		usage: "how long a transaction waits to be applied or discarded before it is discarded",
		field: func(c *Config) any { return &c.TransactionTTL }, check: positive},
	{key: "browser-tools", group: GroupTools, env: env("browser-tools"), def: "false",
		usage: "serve a headless browser (Chromium) as MCP tools: browser.start, browser.goto, browser.snapshot, browser.act, browser.screenshot, browser.extract, browser.close (docs/browser.md)",
		field: func(c *Config) any { return &c.BrowserTools }},
	{key: "browser-path", group: GroupTools, env: env("browser-path"),
		usage: "Chromium's executable for --browser-tools; empty looks for chromium, chromium-browser, google-chrome on PATH",
		field: func(c *Config) any { return &c.BrowserPath }, operatorPath: operatorFile},
	{key: "browser-run-as", group: GroupTools, env: env("browser-run-as"), def: "nobody",
		usage: "the user Chromium runs as when the daemon is root (it keeps its own sandbox that way; never root)",
		field: func(c *Config) any { return &c.BrowserRunAs }},
	{key: "browser-allow-http", group: GroupTools, env: env("browser-allow-http"), def: "false",
		usage: "let the browser load http:// pages and resources besides https://",
		field: func(c *Config) any { return &c.BrowserAllowHTTP }},
	{key: "browser-allow-local", group: GroupTools, env: env("browser-allow-local"), def: "false",
		usage: "let the browser load pages this machine serves: localhost, 127.0.0.0/8 and [::1], over http or https, at any port (a name that only resolves to loopback stays refused); serves the browser tools, as --browser-tools does",
		field: func(c *Config) any { return &c.BrowserAllowLocal }},
	{key: "browser-max-sessions", group: GroupTools, env: env("browser-max-sessions"), def: "4",
		usage: "browser sessions open at once (each is a Chromium process); browser.start beyond it is refused; with --tokens, one token holds at most half of them",
		field: func(c *Config) any { return &c.BrowserMaxSessions }, check: between(1, 64)},
	{key: "browser-idle-timeout", group: GroupTools, env: env("browser-idle-timeout"), def: "30m",
		usage: "a browser session no call used for this long is closed and its profile deleted",
		field: func(c *Config) any { return &c.BrowserIdleTimeout }, check: durationBetween(time.Second, 24*time.Hour)},
	{key: "previews", group: GroupTools, env: env("previews"), def: "false",
		usage: "let clients with the token reach servers the workspace's processes listen on: ssh -L through /ssh and the SSH port, and HTTP and WebSockets at /preview/{port}/ (docs/processes.md)",
		field: func(c *Config) any { return &c.Previews }},
	{key: "gateway-tools", group: GroupTools, env: env("gateway-tools"), def: "false",
		usage: "serve the gateway tools: http.request, http.download, fs.read/write/list/glob (fs.delete with --fs-delete) and system.run behind the approval policy (docs/gateway-tools.md)",
		field: func(c *Config) any { return &c.GatewayTools }},
	{key: "exec-approvals", group: GroupTools, env: env("exec-approvals"),
		usage: "system.run's policy file: {\"allowlist\":{\"commands\":[...],\"cwdPrefix\":[\"$workspaceRoot\"]},\"denylist\":{\"patterns\":[...]}}; approvals given as \"always\" are added to it",
		field: func(c *Config) any { return &c.ExecApprovals }, operatorPath: operatorFile},
	{key: "exec-approval-mode", group: GroupTools, env: env("exec-approval-mode"), def: "allowlist",
		usage: "system.run: deny (nothing runs), allowlist (only the policy's commands, in its directories), full (anything the denylist and the sandbox allow)",
		field: func(c *Config) any { return &c.ExecApprovalMode }},
	{key: "exec-ask", group: GroupTools, env: env("exec-ask"), def: "on-miss",
		usage: "when system.run waits for the operator: off (a miss is refused), on-miss, always",
		field: func(c *Config) any { return &c.ExecAsk }},
	{key: "exec-ask-client", group: GroupTools, env: env("exec-ask-client"), def: "false",
		usage: "a system.run that waits for approval asks the person behind the MCP client (elicitation), when the client supports it; that person is then trusted as the operator",
		field: func(c *Config) any { return &c.ExecAskClient }},
	{key: "exec-approval-ttl", group: GroupTools, env: env("exec-approval-ttl"), def: "10m",
		usage: "how long a system.run request waits for the operator's approval",
		field: func(c *Config) any { return &c.ExecApprovalTTL }, check: durationBetween(time.Second, 24*time.Hour)},
	{key: "operator-token-file", group: GroupAuthentication, env: env("operator-token-file"),
		usage: "the operator's bearer token (not the agent's), which GET /approvals and POST /approvals/{id} require; read again on SIGHUP",
		field: func(c *Config) any { return &c.OperatorTokenFile }, operatorPath: operatorFile},
	{key: "metrics-token-file", group: GroupAuthentication, env: env("metrics-token-file"),
		usage: "a bearer token that GET /metrics then requires (the daemon's token and the operator's open it too): give it to the scraper (Prometheus' authorization.credentials_file), which needs no token that opens the workspace; without it /metrics answers any caller that passes the Origin and Host rules; read again on SIGHUP",
		field: func(c *Config) any { return &c.MetricsTokenFile }, operatorPath: operatorFile},
	{key: "fs-delete", group: GroupTools, env: env("fs-delete"), def: "false",
		usage: "serve fs.delete among the gateway tools",
		field: func(c *Config) any { return &c.FSDelete }},
	{key: "net-allow-hosts", group: GroupNetwork, env: env("net-allow-hosts"),
		usage: "host names the network door lets through whatever their addresses resolve to (comma-separated; exact, or *.example.com for its subdomains): http.request, the browser, extensions' http and postgres, a site's curl",
		field: func(c *Config) any { return &c.NetAllowHosts }, check: hostPatterns},
	{key: "net-allow-private", group: GroupNetwork, env: env("net-allow-private"), def: "false",
		usage: "let the network door reach loopback, private (RFC 1918, ULA) and CGNAT addresses; link-local and cloud metadata addresses stay refused",
		field: func(c *Config) any { return &c.NetAllowPrivate }},
	{key: "net-allow-cidrs", group: GroupNetwork, env: env("net-allow-cidrs"),
		usage: "address prefixes the network door lets through whatever the rules (comma-separated, e.g. 10.1.2.0/24,fd00::/64): narrower than --net-allow-private",
		field: func(c *Config) any { return &c.NetAllowCIDRs }, check: prefixes},
	{key: "net-allow-ports", group: GroupNetwork, env: env("net-allow-ports"),
		usage: "ports the network door allows besides its defaults (80 and 443 for HTTP and the browser, 5432 for postgres), comma-separated",
		field: func(c *Config) any { return &c.NetAllowPorts }, check: ports},
	{key: "extensions", group: GroupTools, env: env("extensions"),
		usage: "a directory of Starlark extensions (*.star) whose tools are served as extension__tool and reloaded when the files change (docs/extensions.md); off when empty",
		field: func(c *Config) any { return &c.Extensions }, operatorPath: operatorDir},
	{key: "extensions-env", group: GroupTools, env: env("extensions-env"),
		usage: "variables of the daemon's environment every extension may read with env.get, besides those it declares in env=[...] (comma-separated names, or PREFIX_* for every name with a prefix ending in _; never * alone); a set variable neither lists is refused with an error (docs/extensions.md)",
		field: func(c *Config) any { return &c.ExtensionsEnv }, check: envNames},
	{key: "extensions-db-hosts", group: GroupTools, env: env("extensions-db-hosts"),
		usage: "hosts every extension's postgres calls may connect to, besides its allowed_db_hosts (comma-separated host names or addresses, no port); the network door's rules still apply",
		field: func(c *Config) any { return &c.ExtensionsDBHosts }, check: dbHosts},
	{key: "site", group: GroupTools, env: env("site"),
		usage: "a tool site's directory (with README.md) to serve under /site/ and as the MCP tools read_page and run_command (docs/sites.md); off when empty",
		field: func(c *Config) any { return &c.Site }, operatorPath: operatorDir},
	{key: "site-env-file", group: GroupTools, env: env("site-env-file"),
		usage: "KEY=VALUE file whose variables fill $VAR in the tool site's tool literals (never the agent's requests)",
		field: func(c *Config) any { return &c.SiteEnvFile }, operatorPath: operatorFile},
	{key: "shutdown-timeout", group: GroupServing, env: env("shutdown-timeout"), def: "10s",
		usage: "on SIGTERM/SIGINT, how long in-flight requests may finish before they are cut",
		field: func(c *Config) any { return &c.ShutdownTimeout }, check: positive},
	{key: "ssh-host-key", group: GroupSSH, env: env("ssh-host-key"),
		usage: "SSH host key of /ssh and the SSH port; an ed25519 key is generated there (0600) if missing; default: --state-dir's ssh_host_ed25519_key",
		field: func(c *Config) any { return &c.SSHHostKey }, operatorPath: operatorFile, used: (*Config).servesSSH},
	{key: "max-ssh-connections", group: GroupSSH, env: env("max-ssh-connections"), def: "1024",
		usage: "concurrent SSH connections of each listener (/ssh, the SSH port); more are refused with a clear message",
		field: func(c *Config) any { return &c.MaxSSHConns }, check: positive},
	{key: "ssh-max-channels", group: GroupSSH, env: env("ssh-max-channels"), def: "512",
		usage: "open SSH channels (sessions and forwards) of the whole daemon, /ssh and --ssh-listen together; more are refused with a clear message",
		field: func(c *Config) any { return &c.SSHMaxChannels }, check: between(1, 1<<20)},
	{key: "ssh-max-channels-per-ip", group: GroupSSH, env: env("ssh-max-channels-per-ip"), def: "256",
		usage: "one client address's share of --ssh-max-channels",
		field: func(c *Config) any { return &c.SSHMaxChannelsPerIP }, check: between(1, 1<<20)},
	{key: "ssh-env-allowlist", group: GroupSSH, env: env("ssh-env-allowlist"), def: "LANG,LC_*,TERM,COLORTERM",
		usage: "environment variable names an SSH client may set (comma-separated; * as a suffix wildcard)",
		field: func(c *Config) any { return &c.SSHEnvAllowlist }},
	{key: "log-format", group: GroupObservability, env: env("log-format"), def: "text",
		usage: "log format on stderr: text or json",
		field: func(c *Config) any { return &c.LogFormat }, check: oneOf("text", "json")},
	{key: "max-procs", group: GroupLimits, env: env("max-procs"), def: "auto",
		usage: "CPUs the daemon's own work may use at once (GOMAXPROCS): auto (half of them, at least 1, and all of them while a checkpoint walks the workspace; GOMAXPROCS in the environment wins) or a number; commands it runs are not limited by this",
		field: func(c *Config) any { return &c.MaxProcs }, check: procsValue},
	{key: "log-level", group: GroupObservability, env: env("log-level", "LOG_LEVEL"), def: "info",
		usage: "log level: debug, info, warn, error",
		field: func(c *Config) any { return &c.LogLevel }, check: oneOf("debug", "info", "warn", "error")},
}

// set parses raw into the setting's field of c and validates it. The error
// says what is wrong with the value; the caller adds where it came from.
func (s *setting) set(c *Config, raw string) error {
	var v any
	switch p := s.field(c).(type) {
	case *string:
		*p = raw
		v = raw
	case *int:
		n, err := strconv.Atoi(strings.TrimSpace(raw))
		if err != nil {
			return fmt.Errorf("must be a whole number")
		}
		*p, v = n, n
	case *bool:
		b, err := strconv.ParseBool(strings.TrimSpace(raw))
		if err != nil {
			return fmt.Errorf("must be true or false")
		}
		*p, v = b, b
	case *time.Duration:
		d, err := time.ParseDuration(strings.TrimSpace(raw))
		if err != nil {
			return fmt.Errorf("must be a duration such as 10s, 2m or 1m30s")
		}
		*p, v = d, d
	case *int64:
		n, err := ParseSize(raw)
		if err != nil {
			return err
		}
		*p, v = n, n
	case *[]string:
		var list []string
		for _, item := range strings.Split(raw, ",") {
			if item = strings.TrimSpace(item); item != "" {
				list = append(list, item)
			}
		}
		*p, v = list, list
	default:
		panic(fmt.Sprintf("config: setting %s has an unsupported field type %T", s.key, p))
	}
	if s.check != nil {
		return s.check(v)
	}
	return nil
}

// get formats the setting's current value the way set parses it.
func (s *setting) get(c *Config) string {
	switch p := s.field(c).(type) {
	case *string:
		return *p
	case *int:
		return strconv.Itoa(*p)
	case *bool:
		return strconv.FormatBool(*p)
	case *time.Duration:
		return p.String()
	case *int64:
		return FormatSize(*p)
	case *[]string:
		return strings.Join(*p, ",")
	}
	return ""
}

// kind names the setting's value type for --help.
func (s *setting) kind() string {
	switch s.field(&Config{}).(type) {
	case *int:
		return "int"
	case *bool:
		return "bool"
	case *time.Duration:
		return "duration"
	case *int64:
		return "size"
	case *[]string:
		return "list"
	}
	return "string"
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1},
}

// ParseSize parses a byte size: a whole number of bytes with an optional
// suffix B, K/KiB, M/MiB or G/GiB (powers of 1024).
func ParseSize(raw string) (int64, error) {
	s := strings.TrimSpace(raw)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("must be a size such as 1048576, 512KiB or 4MiB")
	}
	return n * mult, nil
}

// FormatSize is the inverse of ParseSize, using the largest exact unit.
func FormatSize(n int64) string {
	for _, u := range sizeUnits[:3] {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func lookupSetting(key string) *setting {
	norm := normalizeKey(key)
	for _, s := range settings {
		if normalizeKey(s.key) == norm || (s.alias != "" && normalizeKey(s.alias) == norm) {
			return s
		}
	}
	return nil
}

// normalizeKey lets config files spell keys as root_dir, rootDir or root-dir.
func normalizeKey(k string) string {
	return strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(k))
}

// defaultHostKey is /var/lib/agentbe/ssh_host_ed25519_key for root (the
// systemd unit's StateDirectory), and the user's state directory otherwise, so
// a first run as an ordinary user needs no write access to /var/lib.
func defaultHostKey(euid int, getenv func(string) string) string {
	return filepath.Join(defaultStateDir(euid, getenv), hostKeyName)
}

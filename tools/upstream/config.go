package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/opfile"
	"github.com/agentbe/agentbe-daemon/internal/suggest"
)

// Defaults of a server's configuration.
const (
	DefaultTimeout       = 30 * time.Second
	DefaultMaxConcurrent = 4
	DefaultMaxRestarts   = 5
	DefaultPingInterval  = 30 * time.Second
	DefaultPingTimeout   = 10 * time.Second
	// MaxServerName is the longest server name: with "__" and a tool name it
	// must fit the registry's 64 characters.
	MaxServerName = 32
	// MaxConfigBytes bounds the configuration file.
	MaxConfigBytes = 1 << 20
)

// Restart policies.
const (
	RestartOnFailure = "on-failure" // restart after a crash or a failed ping (default)
	RestartAlways    = "always"     // also after a clean exit
	RestartNever     = "never"
)

// Config is the --upstreams file: the execution service's mcp_servers.json
// shape, {"servers":[...]}, with the extensions of Server.
type Config struct {
	Servers []Server `json:"servers"`
}

// Server is one upstream MCP server.
type Server struct {
	// Name is the tools' prefix (server__tool): letters, digits, '-' and
	// single '_' (no "__", which separates server from tool), at most
	// MaxServerName characters, unique in the file.
	Name string `json:"name"`
	// Command is the program (a name looked up on the PATH of the server's
	// environment, or an absolute path); Args its arguments.
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
	// Env sets variables for the server; PassEnv names variables passed
	// through from the daemon's environment. Nothing else is inherited.
	Env     map[string]string `json:"env,omitempty"`
	PassEnv []string          `json:"passEnv,omitempty"`
	// Cwd is the server's working directory, a path inside the workspace
	// (relative to its root); "" is the root.
	Cwd string `json:"cwd,omitempty"`
	// Timeout bounds each call (seconds as a number, as in mcp_servers.json,
	// or a Go duration string such as "1m30s"); 0 means DefaultTimeout, or
	// the daemon's --tool-timeout (Config.DefaultTimeout).
	Timeout Duration `json:"timeout,omitempty"`
	// timeoutUnset: the file gave no timeout, so Timeout is a default.
	timeoutUnset bool
	// Disabled servers are validated but not started.
	Disabled bool `json:"disabled,omitempty"`
	// Allow, when not empty, keeps only the tools matching one of its
	// patterns (path.Match globs on the upstream's tool name); Block drops
	// the tools matching one of its patterns. Block wins.
	Allow []string `json:"allow,omitempty"`
	Block []string `json:"block,omitempty"`
	// Network lets the server reach the network (under bwrap; the other
	// isolation modes cannot take it away). Off by default.
	Network bool `json:"network,omitempty"`
	// ReadOnly lists extra host paths the server needs to see read-only
	// under bwrap (its install directory, a cache).
	ReadOnly []string `json:"readOnly,omitempty"`
	// MaxConcurrent caps the calls in flight to this server; 0 means
	// DefaultMaxConcurrent.
	MaxConcurrent int `json:"maxConcurrent,omitempty"`
	// Restart is the supervision policy.
	Restart Restart `json:"restart,omitzero"`
	// Cache caches results of tools annotated read-only and idempotent; off
	// unless TTL is set.
	Cache Cache `json:"cache,omitzero"`
}

// Restart says when a server that ended is started again.
type Restart struct {
	// Policy is RestartOnFailure (default), RestartAlways or RestartNever.
	Policy string `json:"policy,omitempty"`
	// MaxRetries is how many failures in a row put the server in the failed
	// state; 0 means DefaultMaxRestarts. The count resets after a minute up.
	MaxRetries int `json:"maxRetries,omitempty"`
}

// Cache is a server's result cache.
type Cache struct {
	TTL        Duration `json:"ttl,omitempty"`
	MaxEntries int      `json:"maxEntries,omitempty"`
}

// Duration is a time.Duration written in JSON as seconds (a number) or as a
// Go duration string.
type Duration time.Duration

// UnmarshalJSON accepts 30, 0.5 or "30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var n float64
	if err := json.Unmarshal(b, &n); err == nil {
		if n < 0 || math.IsInf(n, 0) || math.IsNaN(n) || n > float64(math.MaxInt64/int64(time.Second)) {
			return fmt.Errorf("%v is not a valid number of seconds", n)
		}
		*d = Duration(n * float64(time.Second))
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`want seconds (a number) or a duration string like "30s"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf(`%q is not a duration (want seconds, or a string like "30s" or "1m30s")`, s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// ConfigError is a problem in the configuration file: which file, which
// server (its index, and its name when it has one), which key.
type ConfigError struct {
	File   string
	Server int    // -1 when the problem is not in one server
	Name   string // the server's name, when known
	Key    string // the key, "" for the file as a whole
	Msg    string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Server >= 0 {
		fmt.Fprintf(&b, ": servers[%d]", e.Server)
		if e.Name != "" {
			fmt.Fprintf(&b, " (%q)", e.Name)
		}
	}
	if e.Key != "" {
		fmt.Fprintf(&b, ": %q", e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// DefaultTimeout gives d (the daemon's --tool-timeout, which the execution
// service's DEFAULT_TIMEOUT sets) to each server whose file gives no
// timeout of its own; d <= 0 changes nothing.
func (c *Config) DefaultTimeout(d time.Duration) {
	if d <= 0 {
		return
	}
	for i := range c.Servers {
		if c.Servers[i].timeoutUnset {
			c.Servers[i].Timeout = Duration(d)
		}
	}
}

// LoadConfig reads, expands and validates the file at name; getenv supplies
// ${VAR} values (os.Getenv in the daemon). The result has every default
// applied, so callers never see a zero Timeout or an empty policy.
func LoadConfig(name string, getenv func(string) (string, bool)) (*Config, error) {
	// It names the commands the daemon spawns, with their environment:
	// read as every file that grants rights is (opfile.Read: a regular
	// file, without blocking, at most MaxConfigBytes, and refused when a
	// user other than root and the daemon's could change it).
	data, err := opfile.Read(name, MaxConfigBytes)
	if err != nil {
		return nil, &ConfigError{File: name, Server: -1, Msg: err.Error()}
	}
	return ParseConfig(name, data, getenv)
}

// ParseConfig is LoadConfig on bytes already read; name is used in errors.
func ParseConfig(name string, data []byte, getenv func(string) (string, bool)) (*Config, error) {
	cfg, err := decode(name, data)
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	for i := range cfg.Servers {
		s := &cfg.Servers[i]
		fail := func(key, format string, args ...any) error {
			return &ConfigError{File: name, Server: i, Name: s.Name, Key: key, Msg: fmt.Sprintf(format, args...)}
		}
		if err := validName(s.Name); err != nil {
			return nil, fail("name", "%s", err)
		}
		if j, dup := seen[s.Name]; dup {
			return nil, fail("name", "servers[%d] has the same name; names must be unique (they prefix the tools)", j)
		}
		seen[s.Name] = i
		if err := expandServer(s, getenv, fail); err != nil {
			return nil, err
		}
		if err := checkServer(s, fail); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// decode parses the JSON strictly: unknown keys (a typo such as "comand"),
// trailing data and wrong types are errors naming the key.
func decode(name string, data []byte) (*Config, error) {
	// First the shape, so an unknown key can be named with its server.
	var raw struct {
		Servers []json.RawMessage `json:"servers"`
	}
	top := json.NewDecoder(bytes.NewReader(data))
	top.DisallowUnknownFields()
	if err := top.Decode(&raw); err != nil {
		return nil, &ConfigError{File: name, Server: -1, Msg: jsonMsg(data, err)}
	}
	// Token, not More: More is false before a stray '}' or ']', which
	// would then be taken as the end of the file.
	if _, err := top.Token(); err != io.EOF {
		return nil, &ConfigError{File: name, Server: -1, Msg: "unexpected data after the top-level object"}
	}
	if raw.Servers == nil {
		return nil, &ConfigError{File: name, Server: -1, Key: "servers", Msg: `missing; the file is {"servers":[{"name":...,"command":...}, ...]}`}
	}
	cfg := &Config{Servers: make([]Server, len(raw.Servers))}
	for i, r := range raw.Servers {
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg.Servers[i]); err != nil {
			var probe struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(r, &probe)
			key, msg := fieldMsg(err)
			if key == "" {
				key = durationKey(r)
			}
			return nil, &ConfigError{File: name, Server: i, Name: probe.Name, Key: key, Msg: msg}
		}
	}
	return cfg, nil
}

// jsonMsg words a syntax error with its line and column.
func jsonMsg(data []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := lineCol(data, se.Offset)
		return fmt.Sprintf("invalid JSON at line %d, column %d: %s", line, col, se.Error())
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if suggest.Closest(strings.Trim(f, `"`), []string{"servers"}) != "" {
			return fmt.Sprintf("unknown key %s at the top level; did you mean \"servers\"?", f)
		}
		return fmt.Sprintf("unknown key %s at the top level; the file is {\"servers\":[...]}", f)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%q must be %s, not a JSON %s", te.Field, jsonType(te.Type.String()), te.Value)
	}
	if errors.Is(err, io.EOF) {
		return "the file is empty; it should be {\"servers\":[...]}"
	}
	return err.Error()
}

// fieldMsg names the key of a decoding error inside one server.
func fieldMsg(err error) (key, msg string) {
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		k := strings.Trim(f, `"`)
		if s := suggest.Closest(k, serverKeys()); s != "" {
			return k, fmt.Sprintf("unknown key; did you mean %q?", s)
		}
		return k, "unknown key; the keys are " + strings.Join(serverKeys(), ", ")
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field, fmt.Sprintf("must be %s, not a JSON %s", jsonType(te.Type.String()), te.Value)
	}
	// Errors from a field's own UnmarshalJSON (Duration) name no field in
	// encoding/json v1; the message says what was wrong.
	return "", err.Error()
}

func jsonType(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map["):
		return "an object of strings"
	}
	return "an object"
}

// lineCol turns a SyntaxError offset (the bytes read, the bad one
// included) into the 1-based line and column of the bad byte.
func lineCol(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off > 0 {
		off--
	}
	line = 1 + bytes.Count(data[:off], []byte("\n"))
	col = int(off) - bytes.LastIndexByte(data[:off], '\n')
	return line, col
}

// durationKey finds which duration key of a server failed to decode (the
// error of a field's own UnmarshalJSON does not say), or "".
func durationKey(r json.RawMessage) string {
	var probe struct {
		Timeout json.RawMessage `json:"timeout"`
		Cache   struct {
			TTL json.RawMessage `json:"ttl"`
		} `json:"cache"`
	}
	_ = json.Unmarshal(r, &probe)
	var d Duration
	if probe.Timeout != nil && d.UnmarshalJSON(probe.Timeout) != nil {
		return "timeout"
	}
	if probe.Cache.TTL != nil && d.UnmarshalJSON(probe.Cache.TTL) != nil {
		return "cache.ttl"
	}
	return ""
}

// serverKeys lists Server's JSON keys, for "unknown key" messages.
func serverKeys() []string {
	return []string{"name", "command", "args", "env", "passEnv", "cwd", "timeout", "disabled", "allow", "block", "network", "readOnly", "maxConcurrent", "restart", "cache"}
}

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

func validName(n string) error {
	switch {
	case n == "":
		return errors.New("missing; every server needs a name (it prefixes its tools: name__tool)")
	case len(n) > MaxServerName:
		return fmt.Errorf("%d characters long; the limit is %d (name__tool must fit the 64-character tool name limit)", len(n), MaxServerName)
	case !nameRe.MatchString(n):
		return fmt.Errorf("%q has characters other than letters, digits, '_' and '-', or does not start with a letter or digit", n)
	case strings.Contains(n, "__"):
		return fmt.Errorf(`%q contains "__", which separates the server from the tool in name__tool`, n)
	}
	return nil
}

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expandServer replaces ${VAR} in command, args, env values, cwd and
// readOnly with the daemon's environment; "$$" is a literal "$". An unset
// variable is an error: a server silently started with an empty token or
// path is worse than one that does not start.
func expandServer(s *Server, getenv func(string) (string, bool), fail func(key, format string, args ...any) error) error {
	var err error
	exp := func(key, v string) string {
		if err != nil {
			return v
		}
		out, e := expand(v, getenv)
		if e != nil {
			err = fail(key, "%s", e)
		}
		return out
	}
	s.Command = exp("command", s.Command)
	for i := range s.Args {
		s.Args[i] = exp(fmt.Sprintf("args[%d]", i), s.Args[i])
	}
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s.Env[k] = exp("env."+k, s.Env[k])
	}
	s.Cwd = exp("cwd", s.Cwd)
	for i := range s.ReadOnly {
		s.ReadOnly[i] = exp(fmt.Sprintf("readOnly[%d]", i), s.ReadOnly[i])
	}
	return err
}

// expand is ${VAR} expansion; "$$" is "$"; a lone "$" not followed by "{"
// or "$" is kept as is (so "$HOME" in an argument stays literal, for the
// server to see).
func expand(s string, getenv func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated ${ in %q", s)
			}
			name := s[i+2 : i+2+end]
			if !envNameRe.MatchString(name) {
				return "", fmt.Errorf("${%s}: not a variable name (letters, digits and '_'; use $$ for a literal $)", name)
			}
			v, ok := getenv(name)
			if !ok {
				return "", fmt.Errorf("${%s} is not set in the daemon's environment", name)
			}
			b.WriteString(v)
			i += 2 + end
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// checkServer validates the expanded values and applies the defaults.
func checkServer(s *Server, fail func(key, format string, args ...any) error) error {
	if strings.TrimSpace(s.Command) == "" {
		return fail("command", "missing; the program that runs the server (e.g. \"npx\", \"/usr/local/bin/my-server\")")
	}
	if strings.ContainsRune(s.Command, 0) {
		return fail("command", "contains a NUL byte")
	}
	for i, a := range s.Args {
		if strings.ContainsRune(a, 0) {
			return fail(fmt.Sprintf("args[%d]", i), "contains a NUL byte")
		}
	}
	for k, v := range s.Env {
		if !envNameRe.MatchString(k) {
			return fail("env."+k, "not a variable name (letters, digits and '_', not starting with a digit)")
		}
		if strings.ContainsRune(v, 0) {
			return fail("env."+k, "contains a NUL byte")
		}
	}
	for i, k := range s.PassEnv {
		if !envNameRe.MatchString(k) {
			return fail(fmt.Sprintf("passEnv[%d]", i), "%q is not a variable name", k)
		}
	}
	if s.Cwd != "" {
		c := path.Clean(s.Cwd)
		if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") || strings.ContainsRune(c, 0) {
			return fail("cwd", "%q must be a relative path inside the workspace (the server starts there; \"\" is the workspace root)", s.Cwd)
		}
		s.Cwd = c
	}
	for i, p := range s.ReadOnly {
		if !path.IsAbs(p) || strings.ContainsRune(p, 0) {
			return fail(fmt.Sprintf("readOnly[%d]", i), "%q must be an absolute host path", p)
		}
	}
	for _, list := range []struct {
		key  string
		pats []string
	}{{"allow", s.Allow}, {"block", s.Block}} {
		for i, p := range list.pats {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				return fail(fmt.Sprintf("%s[%d]", list.key, i), "%q is not a valid pattern (a tool name, or a glob such as \"read_*\")", p)
			}
		}
	}
	if s.Timeout == 0 {
		s.Timeout, s.timeoutUnset = Duration(DefaultTimeout), true
	}
	switch {
	case s.MaxConcurrent < 0:
		return fail("maxConcurrent", "%d is negative; use a positive number (0 means %d)", s.MaxConcurrent, DefaultMaxConcurrent)
	case s.MaxConcurrent == 0:
		s.MaxConcurrent = DefaultMaxConcurrent
	}
	switch s.Restart.Policy {
	case "":
		s.Restart.Policy = RestartOnFailure
	case RestartOnFailure, RestartAlways, RestartNever:
	default:
		return fail("restart.policy", "%q is not a policy; use %q, %q or %q", s.Restart.Policy, RestartOnFailure, RestartAlways, RestartNever)
	}
	switch {
	case s.Restart.MaxRetries < 0:
		return fail("restart.maxRetries", "%d is negative (0 means %d)", s.Restart.MaxRetries, DefaultMaxRestarts)
	case s.Restart.MaxRetries == 0:
		s.Restart.MaxRetries = DefaultMaxRestarts
	}
	if s.Cache.MaxEntries < 0 {
		return fail("cache.maxEntries", "%d is negative", s.Cache.MaxEntries)
	}
	if s.Cache.TTL > 0 && s.Cache.MaxEntries == 0 {
		s.Cache.MaxEntries = 1000
	}
	return nil
}

// Keep reports whether the filter lets the upstream tool name through.
func (s *Server) Keep(tool string) bool {
	match := func(pats []string) bool {
		for _, p := range pats {
			if ok, _ := path.Match(p, tool); ok {
				return true
			}
		}
		return false
	}
	if match(s.Block) {
		return false
	}
	return len(s.Allow) == 0 || match(s.Allow)
}

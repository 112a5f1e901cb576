package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// load parses args as the daemon command would and loads with env as the
// whole environment.
func load(t *testing.T, args []string, env map[string]string) (Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("daemon", pflag.ContinueOnError)
	RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	return Load(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	c, err := load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Backend: "filesystem", Isolation: "auto", IsolationMin: "none", Shell: "auto", BlockDangerous: true, ExecNetwork: "auto",
		ExecTimeout: 2 * time.Minute, ExecOutputLimit: 1 << 20, ExecMaxConcurrent: 256, MaxReadSize: 10 << 20,
		Bind: "127.0.0.1", Port: 3001, MaxBodyBytes: 4 << 20, MaxStdioLineBytes: 16 << 20, ShutdownTimeout: 10 * time.Second,
		MaxConns: 1024, MaxConnsPerIP: 128, MaxBatch: 64, MaxReplyBytes: 32 << 20, MaxInflightPerIP: 32,
		MCPSessionIdle: 30 * time.Minute, MCPMaxSessions: 100,
		MaxConcurrentCalls: 10, ToolQueueWait: 2 * time.Second, ToolTimeout: 30 * time.Second,
		ExecApprovalMode: "allowlist", ExecAsk: "on-miss", ExecApprovalTTL: 10 * time.Minute,
		SSHMaxAuthTries: 6, SSHLoginGraceTime: 30 * time.Second, SSHPort: 22, SSHCertPrincipals: []string{"agent"},
		GatewayMaxMessage: 1 << 20, GatewayMaxBatch: 20, GatewayMaxInFlight: 8, GatewayRate: 50, GatewayBurst: 100,
		BrowserMaxSessions: 4, BrowserIdleTimeout: 30 * time.Minute, BrowserRunAs: "nobody",
		Checkpoints: "off", CheckpointMaxBytes: 1 << 30, CheckpointMaxCount: 100, CheckpointMaxFiles: 200000, CheckpointJournal: true,
		TransactionMaxBytes: 256 << 20, TransactionMaxFiles: 20000, TransactionMaxPending: 8, TransactionTTL: 30 * time.Minute,
		StateDir: defaultStateDir(os.Geteuid(), os.Getenv), SSHHostKey: defaultHostKey(os.Geteuid(), os.Getenv), MaxSSHConns: 1024, Keepalive: 30 * time.Second,
		SSHMaxChannels: 512, SSHMaxChannelsPerIP: 256,
		SSHEnvAllowlist: []string{"LANG", "LC_*", "TERM", "COLORTERM"},
		MaxProcs:        "auto",
		LogFormat:       "text", LogLevel: "info",
	}
	if c.Format() != want.Format() {
		t.Errorf("defaults:\n%s\nwant:\n%s", c.Format(), want.Format())
	}
}

func TestPrecedence(t *testing.T) {
	yaml := writeFile(t, "c.yaml", "port: 4000\nshell: sh\nlog-level: debug\nrootDir: /from/file\n")
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want func(Config) bool
		desc string
	}{
		{"default", nil, nil, func(c Config) bool { return c.Port == 3001 }, "port 3001"},
		{"file over default", []string{"--config", yaml}, nil, func(c Config) bool { return c.Port == 4000 && c.Shell == "sh" }, "port 4000 shell sh"},
		{"file via AGENTBE_CONFIG", nil, map[string]string{"AGENTBE_CONFIG": yaml}, func(c Config) bool { return c.Port == 4000 }, "port 4000"},
		{"env over file", []string{"--config", yaml}, map[string]string{"AGENTBE_PORT": "5000"}, func(c Config) bool { return c.Port == 5000 && c.Shell == "sh" }, "port 5000 shell sh"},
		{"reference PORT env", nil, map[string]string{"PORT": "5001"}, func(c Config) bool { return c.Port == 5001 }, "port 5001"},
		{"AGENTBE_PORT over PORT", nil, map[string]string{"PORT": "5001", "AGENTBE_PORT": "5002"}, func(c Config) bool { return c.Port == 5002 }, "port 5002"},
		{"flag over env and file", []string{"--config", yaml, "--port", "6000"}, map[string]string{"AGENTBE_PORT": "5000"}, func(c Config) bool { return c.Port == 6000 && c.LogLevel == "debug" }, "port 6000 level debug"},
		{"empty env is unset", nil, map[string]string{"AGENTBE_PORT": ""}, func(c Config) bool { return c.Port == 3001 }, "port 3001"},
		{"root alias flag", []string{"--rootDir", "/a"}, nil, func(c Config) bool { return c.Root == "/a" }, "root /a"},
		{"root flag", []string{"--root", "/b"}, nil, func(c Config) bool { return c.Root == "/b" }, "root /b"},
		{"root from file alias key", []string{"--config", yaml}, nil, func(c Config) bool { return c.Root == "/from/file" }, "root /from/file"},
		{"WORKSPACE_ROOT", nil, map[string]string{"WORKSPACE_ROOT": "/ws"}, func(c Config) bool { return c.Root == "/ws" }, "root /ws"},
		{"flag root over env", []string{"--root", "/f"}, map[string]string{"AGENTBE_ROOT": "/e"}, func(c Config) bool { return c.Root == "/f" }, "root /f"},
		{"scopePath alias", []string{"--scopePath", "users/u1"}, nil, func(c Config) bool { return c.ScopePath == "users/u1" }, "scope users/u1"},
		{"AUTH_TOKEN", nil, map[string]string{"AUTH_TOKEN": "t1"}, func(c Config) bool { return c.AuthToken == "t1" }, "token t1"},
		{"bool flag bare", []string{"--local-only"}, nil, func(c Config) bool { return c.LocalOnly }, "local-only"},
		{"bool flag false", []string{"--block-dangerous=false"}, nil, func(c Config) bool { return !c.BlockDangerous }, "no blocking"},
		{"bool env", nil, map[string]string{"AGENTBE_DISABLE_SSH_WS": "true"}, func(c Config) bool { return c.DisableSSHWS }, "ssh-ws disabled"},
		{"list env", nil, map[string]string{"AGENTBE_ALLOWED_ORIGINS": "https://a, https://b"}, func(c Config) bool {
			return len(c.AllowedOrigins) == 2 && c.AllowedOrigins[1] == "https://b"
		}, "two origins"},
		{"size flag", []string{"--max-body-bytes", "512KiB"}, nil, func(c Config) bool { return c.MaxBodyBytes == 512<<10 }, "512KiB"},
		{"duration env", nil, map[string]string{"AGENTBE_SHUTDOWN_TIMEOUT": "1m30s"}, func(c Config) bool { return c.ShutdownTimeout == 90*time.Second }, "90s"},
		{"keepalive flag", []string{"--keepalive", "45s"}, nil, func(c Config) bool { return c.Keepalive == 45*time.Second }, "keepalive 45s"},
		{"keepalive's old name as a flag", []string{"--ssh-keepalive", "5s"}, nil, func(c Config) bool { return c.Keepalive == 5*time.Second }, "keepalive 5s"},
		{"keepalive's old name in the environment", nil, map[string]string{"AGENTBE_SSH_KEEPALIVE": "7s"}, func(c Config) bool { return c.Keepalive == 7*time.Second }, "keepalive 7s"},
		{"keepalive's new name over its old one", nil, map[string]string{"AGENTBE_SSH_KEEPALIVE": "7s", "AGENTBE_KEEPALIVE": "9s"}, func(c Config) bool { return c.Keepalive == 9*time.Second }, "keepalive 9s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want(c) {
				t.Errorf("want %s, got:\n%s", tt.desc, c.Format())
			}
		})
	}
}

func TestConfigFileFormats(t *testing.T) {
	for name, content := range map[string]string{
		"c.yaml": "port: 4100\nallowed-origins: [https://a, https://b]\nexec-timeout: 30s\n",
		"c.toml": "port = 4100\nallowed-origins = [\"https://a\", \"https://b\"]\nexec-timeout = \"30s\"\n",
		"c.json": `{"port": 4100, "allowed-origins": ["https://a", "https://b"], "exec_timeout": "30s"}`,
	} {
		t.Run(name, func(t *testing.T) {
			c, err := load(t, []string{"--config", writeFile(t, name, content)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.Port != 4100 || len(c.AllowedOrigins) != 2 || c.ExecTimeout != 30*time.Second {
				t.Errorf("got port %d origins %v timeout %v", c.Port, c.AllowedOrigins, c.ExecTimeout)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	bad := writeFile(t, "bad.yaml", "port: abc\n")
	unknown := writeFile(t, "unknown.yaml", "prot: 3001\n")
	nearAlias := writeFile(t, "alias.toml", "rootDri = \"/srv\"\n")
	farKey := writeFile(t, "far.json", `{"colour": "blue"}`)
	table := writeFile(t, "table.yaml", "port:\n  a: 1\n")
	list := writeFile(t, "list.yaml", "shell: [bash, sh]\n")
	broken := writeFile(t, "broken.yaml", "port: [\n")
	ini := writeFile(t, "c.ini", "port=1\n")
	empty := writeFile(t, "empty-token", "  \n")
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown flag", []string{"--bogus"}, nil, "unknown flag: --bogus"},
		{"port too high", []string{"--port", "70000"}, nil, `invalid argument "70000" for "--port" flag: must be from 1 to 65535`},
		{"max-procs zero", []string{"--max-procs", "0"}, nil, `invalid argument "0" for "--max-procs" flag: must be auto or a whole number from 1 to 4096`},
		{"max-procs word", nil, map[string]string{"AGENTBE_MAX_PROCS": "many"}, `invalid value "many" in AGENTBE_MAX_PROCS: must be auto or a whole number from 1 to 4096`},
		{"port zero", []string{"--port", "0"}, nil, `invalid argument "0" for "--port" flag: must be from 1 to 65535`},
		{"port not a number", []string{"--port", "x"}, nil, `invalid argument "x" for "--port" flag: must be a whole number`},
		{"unknown isolation", []string{"--isolation", "docker"}, nil, `invalid argument "docker" for "--isolation" flag: must be one of auto, bwrap, landlock, software, none`},
		{"unknown exec-network", []string{"--exec-network", "maybe"}, nil, `invalid argument "maybe" for "--exec-network" flag: must be one of auto, true, false`},
		{"unknown shell", []string{"--shell", "zsh"}, nil, `invalid argument "zsh" for "--shell" flag: must be one of auto, bash, sh`},
		{"bad duration", []string{"--shutdown-timeout", "soon"}, nil, `invalid argument "soon" for "--shutdown-timeout" flag: must be a duration such as 10s, 2m or 1m30s`},
		{"negative duration", []string{"--exec-timeout", "-1s"}, nil, `invalid argument "-1s" for "--exec-timeout" flag: must be greater than zero`},
		{"bad size", []string{"--max-body-bytes", "lots"}, nil, `invalid argument "lots" for "--max-body-bytes" flag: must be a size such as 1048576, 512KiB or 4MiB`},
		{"max-concurrent-executions zero", []string{"--max-concurrent-executions", "0"}, nil, `invalid argument "0" for "--max-concurrent-executions" flag: must be from 1 to 10000`},
		{"tool-timeout too short", []string{"--tool-timeout", "10ms"}, nil, `invalid argument "10ms" for "--tool-timeout" flag: must be from 1s to 24h0m0s`},
		{"tool-queue-wait zero", []string{"--tool-queue-wait", "0s"}, nil, `invalid argument "0s" for "--tool-queue-wait" flag: must be from 1ms to 1h0m0s`},
		{"max-concurrent-executions env", nil, map[string]string{"AGENTBE_MAX_CONCURRENT_EXECUTIONS": "abc"}, `invalid value "abc" in AGENTBE_MAX_CONCURRENT_EXECUTIONS: must be a whole number`},
		{"max-connections zero", []string{"--max-connections", "0"}, nil, `invalid argument "0" for "--max-connections" flag: must be from 1 to 1048576`},
		{"max-batch too large", nil, map[string]string{"AGENTBE_MAX_BATCH": "20000"}, `invalid value "20000" in AGENTBE_MAX_BATCH: must be from 1 to 10000`},
		{"max-reply-bytes too small", []string{"--max-reply-bytes", "1KiB"}, nil, `invalid argument "1KiB" for "--max-reply-bytes" flag: must be at least 65536 bytes`},
		{"max-inflight-per-ip zero", []string{"--max-inflight-per-ip", "0"}, nil, `invalid argument "0" for "--max-inflight-per-ip" flag: must be from 1 to 1048576`},
		{"mcp-max-sessions zero", []string{"--mcp-max-sessions", "0"}, nil, `invalid argument "0" for "--mcp-max-sessions" flag: must be from 1 to 1048576`},
		{"mcp-session-idle-timeout zero", nil, map[string]string{"AGENTBE_MCP_SESSION_IDLE_TIMEOUT": "0s"}, `invalid value "0s" in AGENTBE_MCP_SESSION_IDLE_TIMEOUT: must be greater than zero`},
		{"env port", nil, map[string]string{"AGENTBE_PORT": "99999"}, `invalid value "99999" in AGENTBE_PORT: must be from 1 to 65535`},
		{"env isolation", nil, map[string]string{"AGENTBE_ISOLATION": "jail"}, `invalid value "jail" in AGENTBE_ISOLATION: must be one of auto, bwrap, landlock, software, none`},
		{"env bool", nil, map[string]string{"AGENTBE_LOCAL_ONLY": "maybe"}, `invalid value "maybe" in AGENTBE_LOCAL_ONLY: must be true or false`},
		{"file type error", []string{"--config", bad}, nil, `config file ` + bad + `: key "port": invalid value "abc": must be a whole number`},
		{"file unknown key", []string{"--config", unknown}, nil, `config file ` + unknown + `: unknown key "prot"; did you mean "port"? (keys are the flag names)`},
		{"file unknown key near an alias", []string{"--config", nearAlias}, nil, `config file ` + nearAlias + `: unknown key "rootdri"; did you mean "root"?`},
		{"file unknown key near nothing", []string{"--config", farKey}, nil, `config file ` + farKey + `: unknown key "colour" (keys are the flag names, e.g. root, port, auth-token-file)`},
		{"file table value", []string{"--config", table}, nil, `config file ` + table + `: key "port" is a table; expected a single value`},
		{"file list value", []string{"--config", list}, nil, `config file ` + list + `: key "shell" is a list; expected a single value`},
		{"file missing", []string{"--config", "/nonexistent/c.yaml"}, nil, `--config "/nonexistent/c.yaml": file not found`},
		{"file syntax", []string{"--config", broken}, nil, `--config "` + broken + `": `},
		{"file format", []string{"--config", ini}, nil, `--config "` + ini + `": unknown format: use a .yaml, .yml, .toml or .json file`},
		{"token file missing", []string{"--auth-token-file", "/nonexistent/token"}, nil, `--auth-token-file "/nonexistent/token": cannot read: no such file or directory`},
		{"token file empty", []string{"--auth-token-file", empty}, nil, `--auth-token-file "` + empty + `" is empty`},
		{"token and token file", []string{"--auth-token-file", empty}, map[string]string{"AUTH_TOKEN": "x"}, "both an auth token and --auth-token-file are set: use only one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.args, tt.env)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\nwant it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

func TestTokenFile(t *testing.T) {
	p := writeFile(t, "token", "  tok-123\n")
	c, err := load(t, []string{"--auth-token-file", p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.AuthToken != "tok-123" {
		t.Errorf("token %q, want tok-123 (trimmed)", c.AuthToken)
	}
}

func TestValidate(t *testing.T) {
	// The --run-as cases are about the user's name; a daemon that is not
	// root is TestValidateRunAsNeedsRoot's.
	defer func(f func() int) { geteuid = f }(geteuid)
	geteuid = func() int { return 0 }
	dir := t.TempDir()
	file := writeFile(t, "f", "x")
	tests := []struct {
		name string
		mod  func(*Config)
		want string // "" = valid
	}{
		{"ok", func(c *Config) {}, ""},
		{"missing root", func(c *Config) { c.Root = "" }, "missing workspace root: set --root (alias --rootDir), AGENTBE_ROOT, or root in the config file"},
		{"root is a file", func(c *Config) { c.Root = file }, `--root "` + file + `" is a file, not a directory`},
		{"root missing is fine", func(c *Config) { c.Root = filepath.Join(dir, "new") }, ""},
		{"memory root need not exist", func(c *Config) { c.Backend = "memory"; c.Root = "/virtual" }, ""},
		{"tokens with a static scope", func(c *Config) { c.TokensFile, c.ScopePath = "/t.json", "s" }, "--tokens and --scope-path cannot be combined: give each token its scope in /t.json"},
		// The daemon's admission loads the file, once (daemon
		// TestPartsCheckTheirFiles holds its error).
		{"tokens file is not read here", func(c *Config) { c.TokensFile = "/nonexistent/t.json" }, ""},
		{"fsync with the memory backend", func(c *Config) { c.Backend, c.Fsync = "memory", true }, "--fsync makes writes to disk durable; --backend memory keeps the workspace in memory: drop one"},
		{"scope escapes", func(c *Config) { c.ScopePath = "a/../../b" }, `--scope-path "a/../../b": must stay inside the root (no "..")`},
		{"public bind without token", func(c *Config) { c.Bind = "0.0.0.0" }, "--bind 0.0.0.0 is not a loopback address and no auth token is set: set --auth-token-file (or --auth-token, AGENTBE_AUTH_TOKEN), or pass --insecure-no-auth to serve without authentication"},
		{"public bind ipv6 without token", func(c *Config) { c.Bind = "::" }, "--bind :: is not a loopback address"},
		{"public bind with token", func(c *Config) { c.Bind = "0.0.0.0"; c.AuthToken = "t" }, ""},
		{"public bind insecure", func(c *Config) { c.Bind = "0.0.0.0"; c.InsecureNoAuth = true }, ""},
		{"localhost", func(c *Config) { c.Bind = "localhost" }, ""},
		{"ipv6 loopback", func(c *Config) { c.Bind = "::1" }, ""},
		{"127.0.0.2", func(c *Config) { c.Bind = "127.0.0.2" }, ""},
		{"stdio ignores bind", func(c *Config) { c.Bind = "0.0.0.0"; c.LocalOnly = true }, ""},
		{"tls cert without key", func(c *Config) { c.TLSCert = "/c.pem" }, "--tls-cert and --tls-key go together: set both, or neither"},
		{"tls key without cert", func(c *Config) { c.TLSKey = "/k.pem" }, "--tls-cert and --tls-key go together: set both, or neither"},
		{"tls pair", func(c *Config) { c.TLSCert, c.TLSKey = "/c.pem", "/k.pem" }, ""},
		{"per-ip cap above the total", func(c *Config) { c.MaxConns, c.MaxConnsPerIP = 100, 101 }, "--max-connections-per-ip 101 is larger than --max-connections 100"},
		{"per-ip SSH channel share above the total", func(c *Config) { c.SSHMaxChannels, c.SSHMaxChannelsPerIP = 64, 65 }, "--ssh-max-channels-per-ip 65 is larger than --ssh-max-channels 64"},
		{"per-ip cap equal to the total", func(c *Config) { c.MaxConns, c.MaxConnsPerIP = 100, 100 }, ""},
		{"reply limit below the read size", func(c *Config) { c.MaxReplyBytes, c.MaxReadSize = 1<<20, 2<<20 }, "--max-reply-bytes 1048576 is smaller than --max-read-size 2097152"},
		// --check-config runs Validate: a --run-as that names no user must
		// fail it, naming the flag, not only the start (where the sandbox
		// finds it).
		{"run-as names no user", func(c *Config) { c.RunAs = "agentbe-no-such-user" }, `--run-as "agentbe-no-such-user": no such user on this machine`},
		{"run-as an existing user", func(c *Config) { c.RunAs = "root" }, ""},
		{"run-as with the memory backend runs no command", func(c *Config) { c.Backend = "memory"; c.RunAs = "agentbe-no-such-user" }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Root = dir
			tt.mod(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("no error; want %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Errorf("error %q\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

// TestValidateRunAsNeedsRoot: --run-as in a daemon that is not root fails
// Validate (so --check-config) naming the flag and the daemon's uid, as the
// sandbox would refuse it at start.
func TestValidateRunAsNeedsRoot(t *testing.T) {
	defer func(f func() int) { geteuid = f }(geteuid)
	c := Default()
	c.Root, c.RunAs = t.TempDir(), "root"
	geteuid = func() int { return 1000 }
	want := `--run-as "root" needs the daemon to run as root (it runs as uid 1000)`
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Validate as uid 1000: %v; want it to contain %q", err, want)
	}
	geteuid = func() int { return 0 }
	if err := c.Validate(); err != nil {
		t.Errorf("Validate as root: %v", err)
	}
}

func TestValidateMakesRootAbsoluteAndEnsureRootCreates(t *testing.T) {
	t.Chdir(t.TempDir())
	c := Default()
	c.Root = "ws/sub"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(c.Root) {
		t.Fatalf("root %q is not absolute", c.Root)
	}
	created, err := c.EnsureRoot()
	if err != nil || !created {
		t.Fatalf("EnsureRoot = %v, %v; want created", created, err)
	}
	fi, err := os.Stat(c.Root)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755&^umask(t) {
		t.Fatalf("root not created as a 0755 directory: %v %v", fi, err)
	}
	if created, err := c.EnsureRoot(); err != nil || created {
		t.Fatalf("second EnsureRoot = %v, %v; want not created", created, err)
	}
}

// umask is the process's umask, read from the mode of a directory made
// with 0777 in the test's own directory (a fixed name under os.TempDir
// could be a leftover of another run, or of another user).
func umask(t *testing.T) os.FileMode {
	t.Helper()
	p := filepath.Join(t.TempDir(), "umask-probe")
	if err := os.Mkdir(p, 0o777); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return 0o777 &^ fi.Mode().Perm()
}

func TestFormatRedactsToken(t *testing.T) {
	c := Default()
	c.AuthToken = "super-secret-token"
	out := c.Format()
	if strings.Contains(out, "super-secret-token") {
		t.Fatalf("token leaked:\n%s", out)
	}
	if !strings.Contains(out, `auth-token: "[redacted]"`) {
		t.Fatalf("no redacted token line:\n%s", out)
	}
}

// The printed config must load back to the same config (it is documented as
// a valid config file).
func TestFormatRoundTrips(t *testing.T) {
	c := Default()
	c.Root = "/srv/ws"
	c.Port = 4321
	c.AllowedOrigins = []string{"https://a.example", "https://b.example"}
	c.ExecTimeout = 90 * time.Second
	got, err := load(t, []string{"--config", writeFile(t, "c.yaml", c.Format())}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got.ConfigFile = ""
	if got.Format() != c.Format() {
		t.Errorf("round trip:\n%s\nwant:\n%s", got.Format(), c.Format())
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "10": 10, "10B": 10, "2K": 2048, "2KiB": 2048, "3MiB": 3 << 20, "1G": 1 << 30, " 4 MiB ": 4 << 20} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "1.5M", "1TiB", "99999999999999999999"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) succeeded; want error", in)
		}
	}
	for n, want := range map[int64]string{0: "0", 1: "1", 1024: "1KiB", 1536: "1536", 4 << 20: "4MiB", 1 << 30: "1GiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q; want %q", n, got, want)
		}
	}
}

func TestDefaultHostKey(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		euid int
		env  map[string]string
		want string
	}{
		{0, map[string]string{"HOME": "/root"}, "/var/lib/agentbe/ssh_host_ed25519_key"},
		{1000, map[string]string{"HOME": "/home/u"}, "/home/u/.local/state/agentbe/ssh_host_ed25519_key"},
		{1000, map[string]string{"HOME": "/home/u", "XDG_STATE_HOME": "/xdg"}, "/xdg/agentbe/ssh_host_ed25519_key"},
	}
	for _, tt := range tests {
		if got := defaultHostKey(tt.euid, env(tt.env)); got != tt.want {
			t.Errorf("defaultHostKey(%d, %v) = %q; want %q", tt.euid, tt.env, got, tt.want)
		}
	}
}

// docs/configuration.md is the reference users read; it must name every
// setting with its environment variables.
func TestEverySettingIsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, s := range settings {
		if !strings.Contains(doc, "`--"+s.key+"`") {
			t.Errorf("docs/configuration.md does not document --%s", s.key)
		}
		for _, e := range s.env {
			if !strings.Contains(doc, "`"+e+"`") {
				t.Errorf("docs/configuration.md does not name %s", e)
			}
		}
	}
}

// FuzzParseSize: ParseSize never panics, never returns a negative size, and
// what it accepts formats back to the same number.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "1", "4MiB", "512KiB", "1G", " 2 K ", "-1", "1.5M", "9999999999999999999", "1TiB", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, n)
		}
		back, err := ParseSize(FormatSize(n))
		if err != nil || back != n {
			t.Fatalf("ParseSize(FormatSize(%d)) = %d, %v", n, back, err)
		}
	})
}

// FuzzLoadFile: a config file of any content is either loaded or refused
// with an error naming the file; it never panics.
// TestLoadFileErrorIsOneLine: a file the parser refuses is one line
// naming the file, though YAML words its errors over several.
func TestLoadFileErrorIsOneLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte("port = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Default()
	err := loadFile(&c, p)
	if err == nil || !strings.Contains(err.Error(), p) || strings.ContainsAny(err.Error(), "\n\r") || !strings.Contains(err.Error(), "line 1: cannot unmarshal") {
		t.Errorf("error %q: want one line naming the file and the line at fault", err)
	}
}

func FuzzLoadFile(f *testing.F) {
	f.Add("port: 3001\nroot: /srv\n", ".yaml")
	f.Add("port = 1\nallowed-origins = [\"a\"]\n", ".toml")
	f.Add(`{"port": 1, "shell": ["a"]}`, ".json")
	f.Add("port:\n  nested: true\n", ".yml")
	f.Add("port = 1\n", ".yaml")
	f.Fuzz(func(t *testing.T, content, ext string) {
		switch ext {
		case ".yaml", ".yml", ".toml", ".json":
		default:
			ext = ".yaml"
		}
		p := filepath.Join(t.TempDir(), "c"+ext)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		c := Default()
		if err := loadFile(&c, p); err != nil && (!strings.Contains(err.Error(), p) || strings.ContainsAny(err.Error(), "\n\r")) {
			t.Fatalf("error is not one line naming the file: %q", err)
		}
	})
}

func TestExecLimitsAndAllowPatterns(t *testing.T) {
	c, err := load(t, []string{"--allow-commands", `^ssh -V$,^gcloud rsync `, "--exec-max-file-size", "1MiB",
		"--exec-max-cpu", "30s", "--exec-max-processes", "256", "--exec-max-memory", "2GiB", "--exec-max-concurrent", "8"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.AllowCommands) != 2 || c.AllowCommands[1] != "^gcloud rsync" || c.ExecMaxFileSize != 1<<20 ||
		c.ExecMaxCPU != 30*time.Second || c.ExecMaxProcesses != 256 || c.ExecMaxMemory != 2<<30 ||
		c.ExecMaxConcurrent != 8 {
		t.Errorf("got %+v", c)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--allow-commands", "^(unclosed"}, `invalid argument "^(unclosed" for "--allow-commands" flag: pattern "^(unclosed": error parsing regexp: missing closing ): ` + "`^(unclosed`"},
		{[]string{"--exec-max-cpu", "1.5s"}, `invalid argument "1.5s" for "--exec-max-cpu" flag: must be 0 (unchanged) or a whole number of seconds, such as 30s or 5m`},
		{[]string{"--exec-max-processes", "-1"}, `invalid argument "-1" for "--exec-max-processes" flag: must be 0 (unchanged) or more`},
		{[]string{"--exec-max-concurrent", "0"}, `invalid argument "0" for "--exec-max-concurrent" flag: must be greater than zero`},
	} {
		if _, err := load(t, tt.args, nil); err == nil || err.Error() != tt.want {
			t.Errorf("%v: error %v\nwant %s", tt.args, err, tt.want)
		}
	}
}

func TestProcs(t *testing.T) {
	cases := []struct {
		setting   string
		goDefault int
		envSet    bool
		want      int
		why       string
	}{
		{"", 4, false, 2, "auto: half of the 4 CPUs this process may use"},
		{"auto", 1, false, 1, "auto: half of the 1 CPUs this process may use"},
		{"auto", 2, false, 1, "auto: half of the 2 CPUs this process may use"},
		{"auto", 3, false, 1, "auto: half of the 3 CPUs this process may use"},
		{"auto", 16, false, 8, "auto: half of the 16 CPUs this process may use"},
		{"auto", 6, true, 6, "GOMAXPROCS in the environment"},
		{"3", 16, true, 3, "--max-procs"},
		{"1", 1, false, 1, "--max-procs"},
	}
	for _, c := range cases {
		cfg := Config{MaxProcs: c.setting}
		n, why := cfg.Procs(c.goDefault, c.envSet)
		if n != c.want || why != c.why {
			t.Errorf("Procs(%q, go default %d, env %v) = %d, %q; want %d, %q", c.setting, c.goDefault, c.envSet, n, why, c.want, c.why)
		}
		// A burst may use every CPU only where auto chose; an operator's
		// number and GOMAXPROCS from the environment are bounds.
		wantBurst := 0
		if strings.HasPrefix(c.why, "auto") {
			wantBurst = c.goDefault
		}
		if got := cfg.BurstProcs(c.goDefault, c.envSet); got != wantBurst {
			t.Errorf("BurstProcs(%q, go default %d, env %v) = %d; want %d", c.setting, c.goDefault, c.envSet, got, wantBurst)
		}
	}
}

// TestSSHListenNeedsAuth: the SSH port has no unauthenticated mode, on a
// public address or on loopback; --conventional-ssh maps onto it.
func TestSSHListenNeedsAuth(t *testing.T) {
	for _, tc := range []struct {
		listen, keys string
		conventional bool
		want         string
	}{
		{"0.0.0.0:2222", "", false, "--ssh-listen 0.0.0.0:2222 needs authentication"},
		{"127.0.0.1:2222", "", false, "needs authentication"},
		{"", "", true, "--ssh-listen 0.0.0.0:22 needs authentication"},
		{"localhost", "k", false, "want ADDR:PORT"},
		{"127.0.0.1:0", "k", false, "the port must be 1-65535"},
		{"example.com:22", "k", false, "must be an IP address"},
		{":2222", "k", false, ""},
		{"127.0.0.1:2222", "", false, ""}, // with a CA file only, below

	} {
		c := Default()
		c.Root = t.TempDir()
		c.SSHListen, c.SSHAuthorizedKeys, c.ConventionalSSH = tc.listen, tc.keys, tc.conventional
		if tc.want == "" && tc.keys == "" {
			c.SSHTrustedUserCAKeys = "ca.pub"
		}
		err := c.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v; want %q", tc, err, tc.want)
		}
	}
}

// TestNetAllow: the --net-allow-* flags loosen the network door for every
// tool that goes out, and a value that could never match is refused with
// the flag that carried it.
func TestNetAllow(t *testing.T) {
	c, err := load(t, []string{"--net-allow-hosts", "api.internal,*.corp.example", "--net-allow-private",
		"--net-allow-cidrs", "10.1.2.7/24,fd00::/64", "--net-allow-ports", "8443,443"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := c.NetGuard(80, 443)
	if fmt.Sprint(o.AllowHosts) != "[api.internal *.corp.example]" || !o.AllowPrivate ||
		fmt.Sprint(o.AllowPrefixes) != "[10.1.2.0/24 fd00::/64]" || fmt.Sprint(o.AllowPorts) != "[80 443 8443]" {
		t.Errorf("NetGuard(80, 443) = %+v", o)
	}
	if pg := c.NetGuard(5432); fmt.Sprint(pg.AllowPorts) != "[5432 8443 443]" {
		t.Errorf("NetGuard(5432) ports %v", pg.AllowPorts)
	}
	if d, _ := load(t, nil, nil); d.NetAllowPrivate || len(d.NetGuard(80, 443).AllowPrefixes) != 0 || fmt.Sprint(d.NetGuard(80, 443).AllowPorts) != "[80 443]" {
		t.Errorf("defaults loosen the door: %+v", d.NetGuard(80, 443))
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--net-allow-hosts", "https://api.example"}, `invalid argument "https://api.example" for "--net-allow-hosts" flag: "https://api.example" is not a host name or *.domain pattern`},
		{[]string{"--net-allow-hosts", "api.example:8080"}, `"api.example:8080" is not a host name or *.domain pattern`},
		{[]string{"--net-allow-hosts", "*"}, `"*" is not a host name or *.domain pattern`},
		{[]string{"--net-allow-cidrs", "10.0.0.1"}, `invalid argument "10.0.0.1" for "--net-allow-cidrs" flag: "10.0.0.1" is not an address prefix such as 10.1.2.0/24`},
		{[]string{"--net-allow-ports", "0"}, `invalid argument "0" for "--net-allow-ports" flag: "0" is not a port from 1 to 65535`},
		{[]string{"--net-allow-ports", "70000"}, `"70000" is not a port from 1 to 65535`},
	} {
		if _, err := load(t, tt.args, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v\nwant %s", tt.args, err, tt.want)
		}
	}
}

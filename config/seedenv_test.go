package config

import (
	"strings"
	"testing"
	"time"
)

// TestExecutionServiceEnv: the execution service's variables (seed 004)
// set our settings in their own forms, and lose to the AGENTBE_ name and
// to the flag.
func TestExecutionServiceEnv(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want func(Config) bool
	}{
		{nil, map[string]string{"SANDBOX_DIRECTORY": "/workspace"}, func(c Config) bool { return c.Root == "/workspace" }},
		{nil, map[string]string{"SANDBOX_DIRECTORY": "/workspace", "WORKSPACE_ROOT": "/ref"}, func(c Config) bool { return c.Root == "/ref" }},
		{nil, map[string]string{"MCP_CONFIG_PATH": "/etc/mcp_servers.json"}, func(c Config) bool { return c.Upstreams == "/etc/mcp_servers.json" }},
		{nil, map[string]string{"DEFAULT_TIMEOUT": "30"}, func(c Config) bool { return c.ToolTimeout == 30*time.Second }},
		{nil, map[string]string{"DEFAULT_TIMEOUT": " 1.5 "}, func(c Config) bool { return c.ToolTimeout == 1500*time.Millisecond }},
		{nil, map[string]string{"DEFAULT_TIMEOUT": "2m"}, func(c Config) bool { return c.ToolTimeout == 2*time.Minute }},
		{nil, map[string]string{"DEFAULT_TIMEOUT": "30", "AGENTBE_TOOL_TIMEOUT": "5s"}, func(c Config) bool { return c.ToolTimeout == 5*time.Second }},
		{[]string{"--tool-timeout", "6s"}, map[string]string{"DEFAULT_TIMEOUT": "30"}, func(c Config) bool { return c.ToolTimeout == 6*time.Second }},
		{nil, map[string]string{"MAX_CONCURRENT_EXECUTIONS": "4"}, func(c Config) bool { return c.MaxConcurrentCalls == 4 }},
		{nil, map[string]string{"LOG_LEVEL": "INFO"}, func(c Config) bool { return c.LogLevel == "info" }},
		{nil, map[string]string{"LOG_LEVEL": "Warning"}, func(c Config) bool { return c.LogLevel == "warn" }},
		{nil, map[string]string{"LOG_LEVEL": "CRITICAL"}, func(c Config) bool { return c.LogLevel == "error" }},
		{[]string{"--log-level", "debug"}, map[string]string{"LOG_LEVEL": "ERROR"}, func(c Config) bool { return c.LogLevel == "debug" }},
	} {
		c, err := load(t, tt.args, tt.env)
		if err != nil || !tt.want(c) {
			t.Errorf("%v %v: %v\n%s", tt.args, tt.env, err, c.Format())
		}
	}
	for _, tt := range []struct{ env, value, want string }{
		{"DEFAULT_TIMEOUT", "-1", `invalid value "-1" in DEFAULT_TIMEOUT: must be a duration`},
		{"DEFAULT_TIMEOUT", "NaN", `invalid value "NaN" in DEFAULT_TIMEOUT`},
		{"DEFAULT_TIMEOUT", "0.1", `invalid value "0.1" in DEFAULT_TIMEOUT: must be`},
		{"LOG_LEVEL", "TRACE", `invalid value "TRACE" in LOG_LEVEL: must be one of debug, info, warn, error`},
	} {
		_, err := load(t, nil, map[string]string{tt.env: tt.value})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s=%s: %v; want %q", tt.env, tt.value, err, tt.want)
		}
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestExecutionServiceEnv starts the daemon as the execution service's
// deployment does (seed 004, its configuration table): no flag but the
// port, the workspace from SANDBOX_DIRECTORY, the servers from
// MCP_CONFIG_PATH, DEFAULT_TIMEOUT in seconds, MAX_CONCURRENT_EXECUTIONS
// and LOG_LEVEL in Python's capitals; /health serves the workspace and the
// servers. Each alias loses to its AGENTBE_ name and to the flag, and a bad
// value names the variable.
func TestExecutionServiceEnv(t *testing.T) {
	everything, err := filepath.Abs(filepath.Join("..", "..", "interop", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	everything = testenv.File(t, everything, "cd interop && npm ci")
	testenv.Command(t, "nodejs", "node") // the configured server's command
	dir := t.TempDir()
	sandboxDir := filepath.Join(dir, "workspace") // created by the daemon, as the seed's is
	cfgFile := filepath.Join(dir, "mcp_servers.json")
	if err := os.WriteFile(cfgFile, []byte(fmt.Sprintf(`{"servers":[{"name":"everything","command":"node","args":[%q,"stdio"],"allow":["echo"]}]}`, everything)), 0o600); err != nil {
		t.Fatal(err)
	}
	seedEnv := []string{"SANDBOX_DIRECTORY=" + sandboxDir, "MCP_CONFIG_PATH=" + cfgFile, "DEFAULT_TIMEOUT=7",
		"MAX_CONCURRENT_EXECUTIONS=3", "LOG_LEVEL=DEBUG", "HOME=" + t.TempDir()}

	out, errOut, code := run(t, seedEnv, "daemon", "--check-config")
	for _, want := range []string{`root: "` + sandboxDir + `"`, `upstreams: "` + cfgFile + `"`, `tool-timeout: "7s"`,
		"max-concurrent-executions: 3", `log-level: "debug"`} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("--check-config with the seed's variables: exit %d, want %q in\n%s%s", code, want, out, errOut)
		}
	}
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"DEFAULT_TIMEOUT=2.5"}, nil, `tool-timeout: "2.5s"`},
		{[]string{"DEFAULT_TIMEOUT=45s"}, nil, `tool-timeout: "45s"`},
		{[]string{"DEFAULT_TIMEOUT=7", "AGENTBE_TOOL_TIMEOUT=9s"}, nil, `tool-timeout: "9s"`},
		{[]string{"DEFAULT_TIMEOUT=7"}, []string{"--tool-timeout", "11s"}, `tool-timeout: "11s"`},
		{[]string{"LOG_LEVEL=WARNING"}, nil, `log-level: "warn"`},
		{[]string{"LOG_LEVEL=CRITICAL"}, nil, `log-level: "error"`},
		{[]string{"LOG_LEVEL=DEBUG", "AGENTBE_LOG_LEVEL=error"}, nil, `log-level: "error"`},
		{[]string{"MAX_CONCURRENT_EXECUTIONS=3"}, []string{"--max-concurrent-executions", "5"}, "max-concurrent-executions: 5"},
		{[]string{"SANDBOX_DIRECTORY=/seed", "WORKSPACE_ROOT=/ref"}, nil, `root: "/ref"`},
		{[]string{"SANDBOX_DIRECTORY=/seed", "AGENTBE_ROOT=/ours"}, nil, `root: "/ours"`},
	} {
		env := append([]string{"HOME=" + t.TempDir()}, tc.env...)
		if !strings.Contains(strings.Join(tc.env, " "), "ROOT") && !strings.Contains(strings.Join(tc.env, " "), "SANDBOX") {
			env = append(env, "SANDBOX_DIRECTORY="+sandboxDir)
		}
		out, errOut, code := run(t, env, append([]string{"daemon", "--check-config"}, tc.args...)...)
		if !strings.Contains(out, tc.want) {
			t.Errorf("%v %v: exit %d, want %q in\n%s%s", tc.env, tc.args, code, tc.want, out, errOut)
		}
	}
	for _, tc := range []struct{ env, want string }{
		{"LOG_LEVEL=verbose", `invalid value "verbose" in LOG_LEVEL: must be one of debug, info, warn, error`},
		{"DEFAULT_TIMEOUT=soon", `invalid value "soon" in DEFAULT_TIMEOUT: must be a duration`},
		{"DEFAULT_TIMEOUT=100000", `invalid value "100000" in DEFAULT_TIMEOUT: must be`},
		{"MAX_CONCURRENT_EXECUTIONS=lots", `invalid value "lots" in MAX_CONCURRENT_EXECUTIONS: must be a whole number`},
	} {
		_, errOut, code := run(t, []string{"HOME=" + t.TempDir(), "SANDBOX_DIRECTORY=" + sandboxDir, tc.env}, "daemon", "--check-config")
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want %q", tc.env, code, errOut, tc.want)
		}
	}

	// The daemon itself, started with those variables alone.
	p := startDaemonEnv(t, seedEnv)
	var health struct {
		RootDir string            `json:"rootDir"`
		Servers map[string]string `json:"servers"`
	}
	for deadline := time.Now().Add(60 * time.Second); health.Servers["everything"] != "running"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("/health: %+v; want the server running\n%s", health, p.stderr)
		}
		resp, err := http.Get(p.url + "/health")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		health.Servers = nil
		_ = json.Unmarshal(b, &health)
	}
	if health.RootDir != sandboxDir {
		t.Errorf("/health rootDir %q; want SANDBOX_DIRECTORY %q", health.RootDir, sandboxDir)
	}
	if fi, err := os.Stat(sandboxDir); err != nil || !fi.IsDir() {
		t.Errorf("SANDBOX_DIRECTORY not created: %v", err)
	}
	resp, err := http.Post(p.url+"/execute", "application/json", strings.NewReader(`{"tool_name":"echo","arguments":{"message":"seed env"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "seed env") {
		t.Errorf("/execute echo: %d %s", resp.StatusCode, b)
	}
	// The debug lines are the request lines of /health, written after
	// the start-up log; each reaches p.stderr through startDaemonEnv's
	// scanner goroutine, which may not have copied it yet.
	if !p.stderr.WaitFor("level=DEBUG", 30*time.Second) {
		t.Errorf("LOG_LEVEL=DEBUG: no debug line in the log:\n%s", p.stderr)
	}
}

// Package clients_test checks the client setup examples in this directory
// against the shapes their clients read and against the real daemon.
package clients_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/internal/testbin"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// The shapes the clients read. Strict decoding (unknown fields refused)
// catches a key the client would ignore.
type stdioServer struct {
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env,omitempty"`
}

type httpServer struct {
	Type    string            `json:"type,omitempty"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// server is one entry: stdio (command) or HTTP (url).
type server struct {
	stdio *stdioServer
	http  *httpServer
}

func decodeServer(t *testing.T, file, name string, raw json.RawMessage) server {
	t.Helper()
	var probe map[string]any
	json.Unmarshal(raw, &probe)
	if _, ok := probe["url"]; ok {
		var h httpServer
		strictDecode(t, file+" "+name, raw, &h)
		return server{http: &h}
	}
	var s stdioServer
	strictDecode(t, file+" "+name, raw, &s)
	return server{stdio: &s}
}

func strictDecode(t *testing.T, what string, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// daemon runs the built binary with a token on a free loopback port.
type daemon struct {
	url, token, root string
}

func startDaemon(t *testing.T) daemon {
	t.Helper()
	bin := testbin.Path(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "workspace")
	os.Mkdir(root, 0o755)
	token := "example-token-0123456789abcdef0123456789"
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte(token+"\n"), 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "daemon", "--root", root, "--port", strconv.Itoa(port),
		"--auth-token-file", tokenFile, "--ssh-host-key", filepath.Join(dir, "hostkey"), "--isolation", "software")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not come up:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return daemon{url: url, token: token, root: root}
}

type headerRT map[string]string

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// checkTools connects, lists the tools and checks the workspace's are there.
func checkTools(t *testing.T, what string, tr mcp.Transport) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "examples-test", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("%s: connect: %v", what, err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("%s: tools/list: %v", what, err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"read_text_file", "write_file", "exec"} {
		if !slices.Contains(names, want) {
			t.Fatalf("%s: tools %v lack %s", what, names, want)
		}
	}
}

// expand fills a client's placeholders the way the client does: the
// environment (${VAR}, ${env:VAR}), a prompted input (${input:id}), the
// open folder (${workspaceFolder}).
func expand(s string, d daemon, root string) string {
	return regexp.MustCompile(`\$\{(env:|input:)?([A-Za-z_][A-Za-z0-9_-]*)\}`).ReplaceAllStringFunc(s, func(m string) string {
		switch {
		case strings.Contains(m, "AGENTBE_TOKEN"), strings.Contains(m, "input:agentbe-token"):
			return d.token
		case m == "${workspaceFolder}":
			return root
		}
		return m
	})
}

// runServer exercises one entry: a stdio entry runs its command (the built
// binary in agent-backend's place) with its args, an HTTP entry is called
// with its URL (on the test daemon's port) and headers.
func runServer(t *testing.T, what string, s server, d daemon) {
	t.Helper()
	switch {
	case s.stdio != nil:
		if s.stdio.Command != "agent-backend" {
			t.Fatalf("%s: command %q, want agent-backend (from PATH)", what, s.stdio.Command)
		}
		root := t.TempDir()
		var args []string
		for i, a := range s.stdio.Args {
			a = expand(a, d, root)
			if i > 0 && s.stdio.Args[i-1] == "--root" {
				a = root // the example's path, made real
			}
			args = append(args, a)
		}
		if !slices.Contains(args, "--local-only") || args[0] != "daemon" {
			t.Fatalf("%s: args %q: a stdio entry must run `daemon --local-only`", what, args)
		}
		cmd := exec.Command(testbin.Path(t), args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root}
		checkTools(t, what, &mcp.CommandTransport{Command: cmd})
	case s.http != nil:
		if s.http.Type != "" && s.http.Type != "http" {
			t.Fatalf("%s: type %q", what, s.http.Type)
		}
		u := s.http.URL
		if !strings.HasPrefix(u, "http://127.0.0.1:3001/") {
			t.Fatalf("%s: url %s, want the default http://127.0.0.1:3001/mcp", what, u)
		}
		u = d.url + strings.TrimPrefix(u, "http://127.0.0.1:3001")
		hdr := map[string]string{}
		for k, v := range s.http.Headers {
			hdr[k] = expand(v, d, "")
		}
		if hdr["Authorization"] != "Bearer "+d.token {
			t.Fatalf("%s: the Authorization header becomes %q", what, hdr["Authorization"])
		}
		checkTools(t, what, &mcp.StreamableClientTransport{Endpoint: u, HTTPClient: &http.Client{Transport: headerRT(hdr)}, DisableStandaloneSSE: true})
	}
}

func TestClaudeDesktop(t *testing.T) {
	var cfg struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	strictDecode(t, "claude_desktop_config.json", readFile(t, "claude_desktop_config.json"), &cfg)
	s := decodeServer(t, "claude_desktop_config.json", "agentbe", cfg.MCPServers["agentbe"])
	if s.stdio == nil {
		t.Fatal("Claude Desktop's entry is not a stdio command")
	}
	runServer(t, "Claude Desktop", s, daemon{})
}

func TestClaudeCode(t *testing.T) {
	d := startDaemon(t)
	var cfg struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	strictDecode(t, ".mcp.json", readFile(t, ".mcp.json"), &cfg)
	s := decodeServer(t, ".mcp.json", "agentbe", cfg.MCPServers["agentbe"])
	if s.http == nil || s.http.Type != "http" {
		t.Fatalf("Claude Code's .mcp.json entry is not type http: %+v", s.http)
	}
	runServer(t, "Claude Code .mcp.json", s, d)

	// The script: shellcheck-clean, and the claude command it runs (a
	// stand-in on PATH records it) carries the URL and the header.
	t.Run("shellcheck", func(t *testing.T) {
		if out, err := exec.Command(testenv.Command(t, "shellcheck", "shellcheck"), "claude-code.sh").CombinedOutput(); err != nil {
			t.Errorf("shellcheck claude-code.sh: %v\n%s", err, out)
		}
	})
	bin := t.TempDir()
	record := filepath.Join(bin, "argv")
	os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" > "+record+"\n"), 0o755)
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte(d.token+"\n"), 0o600)
	cmd := exec.Command("sh", "claude-code.sh")
	cmd.Env = []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "AGENTBE_TOKEN_FILE=" + tokenFile, "AGENTBE_URL=" + d.url + "/mcp"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("claude-code.sh: %v\n%s", err, out)
	}
	argv := strings.Split(strings.TrimSpace(string(readFile(t, record))), "\n")
	want := []string{"mcp", "add", "--scope", "user", "--transport", "http", "agentbe", d.url + "/mcp", "--header", "Authorization: Bearer " + d.token}
	if !slices.Equal(argv, want) {
		t.Fatalf("claude-code.sh ran claude %q, want %q", argv, want)
	}
	runServer(t, "claude mcp add", server{http: &httpServer{URL: "http://127.0.0.1:3001/mcp", Headers: map[string]string{"Authorization": strings.TrimPrefix(argv[9], "Authorization: ")}}}, d)
}

func TestCursor(t *testing.T) {
	d := startDaemon(t)
	var cfg struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	strictDecode(t, ".cursor/mcp.json", readFile(t, ".cursor/mcp.json"), &cfg)
	if len(cfg.MCPServers) != 2 {
		t.Fatalf("entries: %v", cfg.MCPServers)
	}
	for name, raw := range cfg.MCPServers {
		runServer(t, "Cursor "+name, decodeServer(t, ".cursor/mcp.json", name, raw), d)
	}
}

func TestVSCode(t *testing.T) {
	d := startDaemon(t)
	var cfg struct {
		Inputs []struct {
			Type        string `json:"type"`
			ID          string `json:"id"`
			Description string `json:"description"`
			Password    bool   `json:"password"`
		} `json:"inputs"`
		Servers map[string]json.RawMessage `json:"servers"`
	}
	strictDecode(t, ".vscode/mcp.json", readFile(t, ".vscode/mcp.json"), &cfg)
	if len(cfg.Inputs) != 1 || cfg.Inputs[0].ID != "agentbe-token" || cfg.Inputs[0].Type != "promptString" || !cfg.Inputs[0].Password {
		t.Fatalf("the token input: %+v (it must be a password promptString)", cfg.Inputs)
	}
	if len(cfg.Servers) != 2 {
		t.Fatalf("entries: %v", cfg.Servers)
	}
	for name, raw := range cfg.Servers {
		s := decodeServer(t, ".vscode/mcp.json", name, raw)
		if s.stdio != nil && s.stdio.Type != "stdio" || s.http != nil && s.http.Type != "http" {
			t.Fatalf("VS Code entry %s needs its type", name)
		}
		runServer(t, "VS Code "+name, s, d)
	}
}

// TestNpmClients runs the npm examples with the published client from the
// interop suite's node_modules (cd interop && npm ci), against the daemon
// (remote) and spawning the built binary from PATH (local).
func TestNpmClients(t *testing.T) {
	modules, err := filepath.Abs("../../interop/node_modules/agent-backend")
	if err != nil {
		t.Fatal(err)
	}
	testenv.File(t, modules, "cd interop && npm ci")
	testenv.Command(t, "nodejs", "node") // runs the examples
	d := startDaemon(t)
	// Run from a directory inside interop/, so that `import 'agent-backend'`
	// resolves to the interop suite's node_modules.
	work, err := os.MkdirTemp("../../interop", ".tmp-examples-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	binDir := filepath.Dir(testbin.Path(t))
	for _, tc := range []struct {
		file string
		env  []string
		want []string
	}{
		{"npm-remote.mjs", []string{"AGENTBE_TOKEN=" + d.token, "AGENTBE_ROOT=" + d.root, "AGENTBE_PORT=" + strings.TrimPrefix(d.url, "http://127.0.0.1:")},
			[]string{"hello from the npm client", "hello.txt"}},
		{"npm-local.mjs", []string{"AGENTBE_ROOT=" + t.TempDir()}, []string{"read_text_file", "exec"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			os.WriteFile(filepath.Join(work, tc.file), readFile(t, tc.file), 0o644)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", tc.file)
			cmd.Dir = work
			// Our binary first on PATH, as the README says for the local spawn.
			cmd.Env = append([]string{"PATH=" + binDir + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, tc.env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("node %s: %v\n%s", tc.file, err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("node %s output lacks %q:\n%s", tc.file, w, out)
				}
			}
		})
	}
}

// TestPythonExampleCompiles: the Python example is at least valid Python
// (the package index it would install from is out of CI's reach).
func TestPythonExampleCompiles(t *testing.T) {
	py := testenv.Command(t, "python3", "python3")
	out, err := exec.Command(py, "-c", "import ast,sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])", "python_remote.py").CombinedOutput()
	if err != nil {
		t.Fatalf("python_remote.py: %v\n%s", err, out)
	}
}

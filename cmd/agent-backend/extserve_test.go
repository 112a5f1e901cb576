package main

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/pflag"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

// Extensions written as a starlark-mcp user writes them: a describe_extension
// returning Extension(...), ToolParameters, handlers taking a params dict.
const (
	greetStar = `
def hello(params):
    return "hello, " + params["name"]

def describe_extension():
    return Extension(
        name = "greet",
        version = "1.0.0",
        description = "Greetings",
        tools = [
            Tool(name = "hello", description = "Greet someone", handler = hello,
                 parameters = [ToolParameter(name = "name", param_type = "string", required = True)]),
        ],
    )
`
	// files reads a file of the workspace (fs) and runs a program there
	// (exec, through the sandbox).
	filesStar = `
def peek(params):
    return fs.read(params["path"])

def here(params):
    r = exec.run("ls", [])
    return r.stdout

def describe_extension():
    return Extension(
        name = "files",
        version = "0.1.0",
        description = "The workspace",
        allowed_exec = ["ls"],
        tools = [
            Tool(name = "peek", description = "Read a file", handler = peek,
                 parameters = [ToolParameter(name = "path", param_type = "string", required = True)]),
            Tool(name = "here", description = "List the working directory", handler = here),
        ],
    )
`
	brokenStar = `
def describe_extension():
    return Extension(name = "broken", tools = [Tool(name = "x", handler = undefined_handler)])
`
)

// extDirs makes an extensions directory holding files (name → source) and
// a separate workspace holding marker.txt.
func extDirs(t *testing.T, files map[string]string) (extDir, root string) {
	t.Helper()
	extDir, root = filepath.Join(t.TempDir(), "extensions"), t.TempDir()
	if err := os.Mkdir(extDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(extDir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "marker.txt"), []byte("in the workspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return extDir, root
}

// serveExt starts `agent-backend <args>` as an MCP client starts a stdio
// server (Claude Desktop, Zed) and connects the go-sdk client to it. The
// returned func closes the session and returns the exit status.
func serveExt(t *testing.T, args ...string) (*mcp.ClientSession, *syncbuf.Buffer, func() int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	client := mcp.NewClient(&mcp.Implementation{Name: "claude-desktop-like", Version: "1.0.0"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr.String())
	}
	closed := false
	end := func() int {
		if !closed {
			closed = true
			_ = session.Close() // closes stdin; the server ends at EOF
		}
		return cmd.ProcessState.ExitCode()
	}
	t.Cleanup(func() { end() })
	return session, stderr, end
}

func toolNames(t *testing.T, s *mcp.ClientSession) []string {
	t.Helper()
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

func callText(t *testing.T, s *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// TestExtensionsServe drives the released binary as Claude Desktop does:
// initialize names the server, tools/list holds the extensions' tools under
// their own names and nothing else, tools/call runs them (fs in --root, exec
// through the sandbox with --root as its working directory), and the end of
// stdin ends the server with status 0.
func TestExtensionsServe(t *testing.T) {
	extDir, root := extDirs(t, map[string]string{"greet.star": greetStar, "files.star": filesStar,
		"greet_test.star": "def test_nothing():\n    pass\n"})
	// Both names of the group, and both of the directory's flag.
	for _, args := range [][]string{{"extensions", "serve", "-e", extDir}, {"ext", "serve", "--extensions-dir", extDir}} {
		t.Run(args[0], func(t *testing.T) {
			s, stderr, end := serveExt(t, append(args, "--root", root)...)
			info := s.InitializeResult().ServerInfo
			if info.Name != "agent-backend-extensions" || info.Version != "0.0.0-test" {
				t.Errorf("serverInfo = %q %q, want agent-backend-extensions 0.0.0-test", info.Name, info.Version)
			}
			if got, want := toolNames(t, s), []string{"hello", "here", "peek"}; !slices.Equal(got, want) {
				t.Errorf("tools/list = %v, want %v (the extensions' tools only, by their own names)", got, want)
			}
			if text, isErr := callText(t, s, "hello", map[string]any{"name": "Ada"}); isErr || text != "hello, Ada" {
				t.Errorf("hello: %q (isError %v)", text, isErr)
			}
			if text, isErr := callText(t, s, "peek", map[string]any{"path": "marker.txt"}); isErr || text != "in the workspace\n" {
				t.Errorf("peek marker.txt: %q (isError %v)", text, isErr)
			}
			if text, isErr := callText(t, s, "here", nil); isErr || !strings.Contains(text, "marker.txt") {
				t.Errorf("here (ls in --root): %q (isError %v)", text, isErr)
			}
			// The workspace tools are not there, even by name.
			if _, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": "marker.txt"}}); err == nil || !strings.Contains(err.Error(), `unknown tool "read"`) {
				t.Errorf("the workspace tool read: err %v, want unknown tool", err)
			}
			if code := end(); code != 0 {
				t.Errorf("exit %d after stdin closed\n%s", code, stderr.String())
			}
		})
	}
}

// TestExtensionsServePrefix: --prefix names the tools as the daemon's
// --extensions does.
func TestExtensionsServePrefix(t *testing.T) {
	extDir, root := extDirs(t, map[string]string{"greet.star": greetStar})
	s, _, _ := serveExt(t, "extensions", "serve", "-e", extDir, "--root", root, "--prefix")
	if got := toolNames(t, s); !slices.Equal(got, []string{"greet__hello"}) {
		t.Errorf("tools/list = %v, want [greet__hello]", got)
	}
	if text, isErr := callText(t, s, "greet__hello", map[string]any{"name": "Bo"}); isErr || text != "hello, Bo" {
		t.Errorf("greet__hello: %q (isError %v)", text, isErr)
	}
}

// TestExtensionsServeDefaults: without --root the extensions work in an
// empty scratch directory, removed at exit; -e defaults to ./extensions.
func TestExtensionsServeDefaults(t *testing.T) {
	extDir, _ := extDirs(t, map[string]string{"files.star": filesStar})
	cmd := exec.Command(binary, "extensions", "serve")
	cmd.Dir = filepath.Dir(extDir) // ./extensions
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TMPDIR=" + t.TempDir()}
	tmp := cmd.Env[2][len("TMPDIR="):]
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "zed-like", Version: "1.0.0"}, nil)
	s, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	if text, isErr := callText(t, s, "here", nil); isErr || strings.TrimSpace(text) != "" {
		t.Errorf("here in the scratch workspace: %q (isError %v), want an empty listing", text, isErr)
	}
	scratch, _ := filepath.Glob(filepath.Join(tmp, "agentbe-extensions-*"))
	if len(scratch) != 1 {
		t.Errorf("scratch workspaces while serving: %v, want one", scratch)
	}
	s.Close()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %d\n%s", code, stderr.String())
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "agentbe-extensions-*")); len(left) != 0 {
		var in []string
		filepath.WalkDir(left[0], func(p string, _ fs.DirEntry, _ error) error { in = append(in, p); return nil })
		t.Errorf("scratch workspace left behind: %v (holding %v; exit %v)\n%s", left, in, cmd.ProcessState, stderr.String())
	}
}

// TestExtensionsServeSkipBroken: with --skip-broken a file that does not
// load is logged and the others are served.
func TestExtensionsServeSkipBroken(t *testing.T) {
	extDir, root := extDirs(t, map[string]string{"greet.star": greetStar, "broken.star": brokenStar})
	s, stderr, _ := serveExt(t, "extensions", "serve", "-e", extDir, "--root", root, "--skip-broken")
	if got := toolNames(t, s); !slices.Equal(got, []string{"hello"}) {
		t.Errorf("tools/list = %v, want [hello]", got)
	}
	// The server logged it before it answered, but exec copies its
	// stderr on a goroutine of its own: wait for the line.
	if !stderr.WaitFor("undefined_handler", 30*time.Second) {
		t.Errorf("the load error is not logged:\n%s", stderr.String())
	}
}

// TestExtensionsServeHotReload: a file added while serving is served, and
// the client is told (notifications/tools/list_changed).
func TestExtensionsServeHotReload(t *testing.T) {
	extDir, root := extDirs(t, map[string]string{"files.star": filesStar})
	cmd := exec.Command(binary, "extensions", "serve", "-e", extDir, "--root", root)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	changed := make(chan struct{}, 8)
	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	s, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.WriteFile(filepath.Join(extDir, "greet.star"), []byte(greetStar), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/tools/list_changed after adding greet.star")
	}
	if got := toolNames(t, s); !slices.Contains(got, "hello") {
		t.Errorf("tools/list after the change = %v, want hello among them", got)
	}
}

// TestExtensionsServeHelp: --help explains the command and shows the
// Claude Desktop and Zed configurations, as valid JSON that starts it.
func TestExtensionsServeHelp(t *testing.T) {
	out, _, code := run(t, nil, "extensions", "serve", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"-e, --extensions", "--extensions-dir", "(default \"./extensions\")", "--root", "--isolation", "--prefix",
		"--skip-broken", "agent-backend-extensions", "claude_desktop_config.json", "mcpServers", "context_servers", "allowed_exec", "temporary directory"} {
		if !strings.Contains(out, want) {
			t.Errorf("extensions serve --help lacks %q", want)
		}
	}
	// Each configuration is JSON a user can paste, and its args are a
	// command line this binary accepts.
	blocks := regexp.MustCompile(`(?ms)^  \{\n.*?^  \}$`).FindAllString(out, -1)
	if len(blocks) != 2 {
		t.Fatalf("want 2 JSON configurations in --help, found %d:\n%s", len(blocks), out)
	}
	for i, key := range []string{"mcpServers", "context_servers"} {
		var conf map[string]map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		}
		if err := json.Unmarshal([]byte(blocks[i]), &conf); err != nil {
			t.Fatalf("configuration %d is not JSON: %v\n%s", i, err, blocks[i])
		}
		srv, ok := conf[key]["extensions"]
		if !ok || !strings.HasSuffix(srv.Command, "/agent-backend") || len(srv.Args) < 2 || srv.Args[0] != "extensions" || srv.Args[1] != "serve" {
			t.Errorf("configuration %d (%s) does not start extensions serve: %+v", i, key, conf)
		}
		// The args parse: --help after them succeeds.
		if _, errOut, code := run(t, nil, append(srv.Args, "--help")...); code != 0 {
			t.Errorf("configuration %d args %v: exit %d: %s", i, srv.Args, code, errOut)
		}
	}
	if out, _, code := run(t, nil, "ext", "--help"); code != 0 || !strings.Contains(out, "serve") {
		t.Errorf("ext --help does not list serve (exit %d):\n%s", code, out)
	}
}

// TestExtensionsServeTakesItsDaemonFlags: a daemon setting whose --help
// says it applies to ext serve is a flag of ext serve, so the advice of
// its errors ("raise --max-stdio-line-bytes") can be followed there.
func TestExtensionsServeTakesItsDaemonFlags(t *testing.T) {
	daemonFlags := pflag.NewFlagSet("daemon", pflag.ContinueOnError)
	config.RegisterFlags(daemonFlags)
	serve := newExtServeCommand().Flags()
	n := 0
	daemonFlags.VisitAll(func(fl *pflag.Flag) {
		if !strings.Contains(fl.Usage, "ext serve") {
			return
		}
		n++
		if serve.Lookup(fl.Name) == nil {
			t.Errorf("--%s: the daemon's --help says it applies to ext serve, which has no such flag", fl.Name)
		}
	})
	if n == 0 {
		t.Fatal("no daemon setting's usage mentions ext serve (--max-stdio-line-bytes's does)")
	}
}

// TestExtensionsServeVersion: --version prints the name and version that
// serverInfo carries.
func TestExtensionsServeVersion(t *testing.T) {
	if out, _, code := run(t, nil, "extensions", "serve", "--version"); code != 0 || out != "agent-backend-extensions v0.0.0-test\n" {
		t.Errorf("extensions serve --version: exit %d, %q", code, out)
	}
}

// TestExtensionsServeBadInput: each bad input stops the start with status
// 1, nothing on stdout (an MCP client would read it), and an error naming
// the flag and the path.
func TestExtensionsServeBadInput(t *testing.T) {
	extDir, root := extDirs(t, map[string]string{"greet.star": greetStar})
	broken, _ := extDirs(t, map[string]string{"greet.star": greetStar, "broken.star": brokenStar})
	// Two files that declare the same tool name collide under bare names.
	twice, _ := extDirs(t, map[string]string{"greet.star": greetStar, "greet2.star": strings.Replace(greetStar, `name = "greet"`, `name = "greet2"`, 1)})
	file := filepath.Join(root, "marker.txt")
	missing := filepath.Join(t.TempDir(), "nope")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"missing -e", []string{"-e", missing, "--root", root}, []string{`--extensions "` + missing + `"`, "not a directory"}},
		{"-e is a file", []string{"-e", file, "--root", t.TempDir()}, []string{`--extensions "` + file + `"`, "not a directory"}},
		{"missing default ./extensions", []string{"--root", root}, []string{`--extensions "./extensions"`, "not a directory"}},
		{"a broken extension", []string{"-e", broken, "--root", root}, []string{`--extensions "` + broken + `"`, "broken.star", "undefined_handler", "--skip-broken", "ext check"}},
		{"a tool name twice", []string{"-e", twice, "--root", root}, []string{`--extensions "` + twice + `"`, `"hello"`, "greet.star", "greet2.star"}},
		{"-e inside --root", []string{"-e", extDir, "--root", filepath.Dir(extDir)}, []string{"--extensions", extDir, "inside the workspace --root"}},
		{"--root is a file", []string{"-e", extDir, "--root", file}, []string{`--root "` + file + `" is a file`}},
		{"--isolation", []string{"-e", extDir, "--root", root, "--isolation", "vm"}, []string{"--isolation", "vm"}},
		{"--log-level", []string{"-e", extDir, "--root", root, "--log-level", "loud"}, []string{`"loud"`, "--log-level"}},
		{"a daemon flag", []string{"-e", extDir, "--root", root, "--port", "3001"}, []string{"unknown flag: --port"}},
		{"a bad AGENTBE_ variable", []string{"-e", extDir, "--root", root}, []string{"AGENTBE_TOOL_TIMEOUT"}},
		{"an argument", []string{extDir}, []string{"unknown command", extDir}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(binary, append([]string{"extensions", "serve"}, tt.args...)...)
			cmd.Dir = t.TempDir()
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
			if tt.name == "a bad AGENTBE_ variable" {
				cmd.Env = append(cmd.Env, "AGENTBE_TOOL_TIMEOUT=soon")
			}
			cmd.Stdin = strings.NewReader("")
			var out, errOut strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); err == nil || code != 1 {
				t.Fatalf("exit %d, want 1\nstderr: %s", code, errOut.String())
			}
			if out.Len() != 0 {
				t.Errorf("stdout: %q", out.String())
			}
			last := errOut.String()
			if i := strings.LastIndex(strings.TrimSpace(last), "\n"); i >= 0 {
				last = last[i+1:]
			}
			if !strings.HasPrefix(last, "agent-backend: ") {
				t.Errorf("last line of stderr %q is not the error", last)
			}
			for _, w := range tt.want {
				if !strings.Contains(last, w) {
					t.Errorf("error %q lacks %q", last, w)
				}
			}
		})
	}
}

// TestExtensionsServeDaemonSettings: the settings it takes come as the
// daemon's do: AGENTBE_* variables (here the directory and the workspace),
// and the daemon's flags for them (here --tool-timeout, which bounds a call).
// The handler that never ends spends its time in long string copies, a few
// Starlark steps each: a loop of additions reaches the step limit (about a
// second of pure Starlark) as soon as the timeout on a fast machine, and the
// call then ends with "too many steps" instead.
func TestExtensionsServeDaemonSettings(t *testing.T) {
	slow := `
def spin(params):
    n = 0
    while True:
        n += len("x" * 200000)
    return n

def describe_extension():
    return Extension(name = "slow", tools = [Tool(name = "spin", description = "Never ends", handler = spin)])
`
	extDir, root := extDirs(t, map[string]string{"greet.star": greetStar, "slow.star": slow})
	cmd := exec.Command(binary, "extensions", "serve", "--tool-timeout", "1s")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "AGENTBE_EXTENSIONS=" + extDir, "AGENTBE_ROOT=" + root}
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil)
	s, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer s.Close()
	if got := toolNames(t, s); !slices.Equal(got, []string{"hello", "spin"}) {
		t.Errorf("tools/list = %v, want [hello spin] from AGENTBE_EXTENSIONS", got)
	}
	// Logged before the server answered; copied by exec's own goroutine.
	if !stderr.WaitFor("root="+root, 30*time.Second) {
		t.Errorf("the workspace is not AGENTBE_ROOT's %s:\n%s", root, stderr.String())
	}
	start := time.Now()
	text, isErr := callText(t, s, "spin", nil)
	if !isErr || !strings.Contains(text, "timed out after 1s") || time.Since(start) > 20*time.Second {
		t.Errorf("spin with --tool-timeout 1s: %q (isError %v) after %v", text, isErr, time.Since(start))
	}
}

// TestExtensionsServeEnv: a client's "env" block reaches the extensions
// that --extensions-env allows (the daemon's rule for env.get), and a set
// variable it does not allow is refused, saying how to allow it.
func TestExtensionsServeEnv(t *testing.T) {
	keyStar := `
def key(params):
    return env.get("MY_API_KEY", "unset")

def describe_extension():
    return Extension(name = "key", tools = [Tool(name = "key", description = "The API key", handler = key)])
`
	extDir, root := extDirs(t, map[string]string{"key.star": keyStar})
	for _, tc := range []struct {
		args   []string
		want   string
		refuse bool
	}{
		{[]string{"--extensions-env", "MY_API_KEY"}, "k-123", false},
		{nil, "--extensions-env", true},
	} {
		cmd := exec.Command(binary, append([]string{"extensions", "serve", "-e", extDir, "--root", root}, tc.args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "MY_API_KEY=k-123"}
		client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil)
		s, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		text, isErr := callText(t, s, "key", nil)
		if isErr != tc.refuse || !strings.Contains(text, tc.want) {
			t.Errorf("%v: %q (isError %v), want %q (isError %v)", tc.args, text, isErr, tc.want, tc.refuse)
		}
		s.Close()
	}
}

// TestExtensionsServeSIGTERM: a client that stops its server with SIGTERM
// (stdin still open) sees it end with status 0 and remove its scratch
// workspace.
func TestExtensionsServeSIGTERM(t *testing.T) {
	extDir, _ := extDirs(t, map[string]string{"greet.star": greetStar})
	tmp := t.TempDir()
	cmd := exec.Command(binary, "extensions", "serve", "-e", extDir)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TMPDIR=" + tmp}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(stderr.String(), "serving the extensions") })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("still running 30 s after SIGTERM\n%s", stderr.String())
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "agentbe-extensions-*")); len(left) != 0 {
		var in []string
		filepath.WalkDir(left[0], func(p string, _ fs.DirEntry, _ error) error { in = append(in, p); return nil })
		t.Errorf("scratch workspace left behind: %v (holding %v; exit %v)\n%s", left, in, cmd.ProcessState, stderr.String())
	}
}

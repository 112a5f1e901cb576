package extensions

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// TestMain puts SQLite's heap limit in force before any test runs, as the
// daemon's first openSQLite does: tests open SQLite themselves to seed
// database files, and the limit can only be set before SQLite initializes.
// TestSQLiteStartsOnFirstUse's child process leaves SQLite alone.
func TestMain(m *testing.M) {
	if os.Getenv(sqliteChildEnv) != "" {
		goleak.VerifyTestMain(m)
	}
	if err := sqliteHeap(); err != nil {
		fmt.Fprintln(os.Stderr, "extensions tests:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

type fixture struct {
	p   *Provider
	reg *registry.Registry
	dir string
	ws  fsops.Workspace
}

const demo = `
def echo(params):
    return params["text"]

def add(params):
    return {"sum": params["a"] + params["b"], "big": params["a"] * 10000000000000000}

def mcp_result(params):
    return {"content": [{"type": "text", "text": "raw"}], "isError": True}

def spin(params):
    n = 0
    while True:
        n += 1

def grow(params):
    l = []
    while True:
        l.append("x" * 1000)

def run(params):
    r = exec.run(params["cmd"], params.get("args", []))
    return r.stdout.strip() + " exit=" + str(r.exit_code)

def fetch(params):
    return http.get(params["url"]).body

def files(params):
    fs.write("notes/a.txt", "hello")
    return fs.read(params.get("path", "notes/a.txt"))

def getenv(params):
    return env.get(params["name"], "unset")

def describe_extension():
    return Extension(
        name = "demo",
        version = "1.0.0",
        description = "tests",
        allowed_exec = ["echo", "sudo"],
        env = ["EXT_VISIBLE", "EXT_TOKEN_HOLDER"],
        tools = [
            Tool(name = "echo", description = "echoes", handler = echo,
                 parameters = [ToolParameter(name = "text", param_type = "string", required = True)],
                 annotations = {"readOnlyHint": True}),
            Tool(name = "add", description = "adds", handler = add, parameters = [
                ToolParameter(name = "a", param_type = "integer", required = True),
                ToolParameter(name = "b", param_type = "integer", default = 5)]),
            Tool(name = "mcp_result", description = "a raw MCP result", handler = mcp_result),
            Tool(name = "spin", description = "loops forever", handler = spin),
            Tool(name = "grow", description = "allocates forever", handler = grow),
            Tool(name = "run", description = "exec", handler = run),
            Tool(name = "fetch", description = "http", handler = fetch),
            Tool(name = "files", description = "fs", handler = files),
            Tool(name = "getenv", description = "env", handler = getenv),
        ],
    )
`

func start(t *testing.T, files map[string]string, mod func(*Options)) *fixture {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		write(t, dir, name, src)
	}
	return startIn(t, dir, mod)
}

// startB serves dir for a benchmark (the default limits, a 1 ms debounce).
func startB(b *testing.B, dir string) *fixture {
	return startIn(b, dir, func(o *Options) { o.MaxSteps = DefaultMaxSteps; o.Debounce = time.Millisecond })
}

func startIn(t testing.TB, dir string, mod func(*Options)) *fixture {
	root := t.TempDir()
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	exe, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: ws.Root()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exe.Close() })
	reg := registry.New(registry.Options{})
	opts := Options{Dir: dir, Registry: reg, Workspace: ws, Executor: exe, MaxSteps: 2_000_000, Debounce: 20 * time.Millisecond,
		Secrets: clip.NewSecrets("daemon-token"),
		Getenv: func(k string) (string, bool) {
			return map[string]string{"EXT_VISIBLE": "seen", "EXT_HIDDEN": "secret", "EXT_TOKEN_HOLDER": "x-daemon-token-y"}[k], true
		}}
	if mod != nil {
		mod(&opts)
	}
	p, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return &fixture{p: p, reg: opts.Registry, dir: dir, ws: ws}
}

func write(t *testing.T, dir, name, src string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) call(t *testing.T, tool, args string) (string, bool, errcode.Code) {
	t.Helper()
	return f.callCtx(t, context.Background(), tool, args)
}

func (f *fixture) callB(b *testing.B, tool, args string) (string, bool, errcode.Code) {
	return f.callCtx(b, context.Background(), tool, args)
}

func (f *fixture) callCtx(t testing.TB, ctx context.Context, tool, args string) (string, bool, errcode.Code) {
	t.Helper()
	res, err := f.reg.Call(ctx, tool, registry.Call{Args: json.RawMessage(args), Workspace: f.ws})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		b.WriteString(c.(*mcp.TextContent).Text)
	}
	return b.String(), res.IsError, registry.Code(res)
}

func TestToolsAndCalls(t *testing.T) {
	f := start(t, map[string]string{"demo.star": demo, "demo_test.star": "not an extension (", "notes.txt": "x"}, nil)
	tl, ok := f.reg.Lookup("demo__echo")
	if !ok || tl.Description != "echoes" || !tl.Annotations.ReadOnlyHint {
		t.Fatalf("demo__echo: %+v %v", tl, ok)
	}
	schema, _ := json.Marshal(tl.InputSchema)
	if string(schema) != `{"properties":{"text":{"type":"string"}},"required":["text"],"type":"object"}` {
		t.Errorf("schema %s", schema)
	}
	if len(f.reg.List()) != 9 {
		t.Errorf("%d tools", len(f.reg.List()))
	}
	for _, tc := range []struct {
		tool, args, want string
		isErr            bool
	}{
		{"demo__echo", `{"text":"hi"}`, "hi", false},
		{"demo__echo", `{}`, `missing required parameter "text"`, true},
		{"demo__add", `{"a":2}`, `{"big":20000000000000000,"sum":7}`, false},
		{"demo__add", `{"a":9007199254740993,"b":1}`, `"sum":9007199254740994`, false},
		{"demo__mcp_result", `{}`, "raw", true},
		{"demo__run", `{"cmd":"echo","args":["a b"]}`, "a b exit=0", false},
		{"demo__run", `{"cmd":"ls"}`, `exec.run: "ls" is not in the allowed_exec of extension demo`, true},
		{"demo__run", `{"cmd":"sudo","args":["id"]}`, "exec.run: ", true},
		{"demo__fetch", `{"url":"http://169.254.169.254/latest/meta-data/"}`, "refused", true},
		{"demo__fetch", `{"url":"http://localhost/"}`, "is this machine", true},
		{"demo__files", `{}`, "hello", false},
		{"demo__files", `{"path":"../../etc/passwd"}`, "fs.read: ", true},
		{"demo__getenv", `{"name":"EXT_VISIBLE"}`, "seen", false},
		{"demo__getenv", `{"name":"EXT_HIDDEN"}`, "env.get: EXT_HIDDEN is set, but extension demo may not read it: list it in the extension's env=[...] or the operator's --extensions-env", true},
		{"demo__getenv", `{"name":"EXT_TOKEN_HOLDER"}`, "env.get: EXT_TOKEN_HOLDER holds a secret of the daemon's (its auth or operator token); it is never given to an extension", true},
	} {
		txt, isErr, _ := f.call(t, tc.tool, tc.args)
		if isErr != tc.isErr || !strings.Contains(txt, tc.want) {
			t.Errorf("%s %s: %q isError=%v; want %q isError=%v", tc.tool, tc.args, txt, isErr, tc.want, tc.isErr)
		}
	}
}

// TestLimits: a loop and an allocation without end are stopped by the step
// limit; a long call is stopped by its deadline; the provider keeps serving.
func TestLimits(t *testing.T) {
	f := start(t, map[string]string{"demo.star": demo}, nil)
	for _, tool := range []string{"demo__spin", "demo__grow"} {
		txt, isErr, _ := f.call(t, tool, `{}`)
		if !isErr || !strings.Contains(txt, "too many steps") {
			t.Errorf("%s: %q %v", tool, txt, isErr)
		}
	}
	g := start(t, map[string]string{"demo.star": demo}, func(o *Options) { o.MaxSteps = 1 << 62 })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	// The handler returns (the registry runs it on this goroutine) only
	// once the thread was cancelled.
	txt, isErr, _ := g.callCtx(t, ctx, "demo__spin", `{}`)
	if !isErr || !strings.Contains(txt, "cancelled") {
		t.Errorf("deadline: %q %v", txt, isErr)
	}
	if txt, _, _ := g.call(t, "demo__echo", `{"text":"still here"}`); txt != "still here" {
		t.Errorf("after the limits: %q", txt)
	}
}

// TestHotReload: an edit is served after list_changed; a broken edit keeps
// the last good version and shows in Health; a deleted file's tools go.
func TestHotReload(t *testing.T) {
	v1 := "def h(p):\n    return 'v1'\ndef describe_extension():\n    return Extension(name='hot', tools=[Tool(name='t', handler=h)])\n"
	f := start(t, map[string]string{"hot.star": v1}, nil)
	var changes atomic.Int32
	unsub := f.reg.Subscribe(func() { changes.Add(1) })
	defer unsub()
	if txt, _, _ := f.call(t, "hot__t", `{}`); txt != "v1" {
		t.Fatalf("v1: %q", txt)
	}
	write(t, f.dir, "hot.star", strings.Replace(v1, "'v1'", "'v2'", 1))
	waitFor(t, "v2", func() bool { txt, _, _ := f.call(t, "hot__t", `{}`); return txt == "v2" })
	if changes.Load() == 0 {
		t.Error("no registry change for the edit")
	}
	write(t, f.dir, "hot.star", "def describe_extension(:\n")
	waitFor(t, "the failure in Health", func() bool { h := f.p.Health(); return len(h) == 1 && h[0].State == "failed" })
	if h := f.p.Health()[0]; !strings.Contains(h.LastError, "hot.star:1:") || h.Tools != 1 {
		t.Errorf("health: %+v", h)
	}
	if txt, _, _ := f.call(t, "hot__t", `{}`); txt != "v2" {
		t.Errorf("the last good version: %q", txt)
	}
	os.Remove(filepath.Join(f.dir, "hot.star"))
	waitFor(t, "the tools gone", func() bool { _, ok := f.reg.Lookup("hot__t"); return !ok })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second) // a hang guard
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLoadErrors: each bad file gets an error with its file and line, and
// load() stays inside the directory.
func TestLoadErrors(t *testing.T) {
	f := start(t, map[string]string{
		"syntax.star":     "def f(:\n",
		"nodescribe.star": "x = 1\n",
		"badname.star":    "def describe_extension():\n    return Extension(name='a__b', tools=[])\n",
		"escape.star":     "load('../outside.star', 'x')\ndef describe_extension():\n    return Extension(name='e', tools=[])\n",
		"helper.star":     "load('lib.star', 'greet')\ndef h(p):\n    return greet(p.get('n', 'you'))\ndef describe_extension():\n    return Extension(name='helper', tools=[Tool(name='hi', handler=h)])\n",
		"lib.star":        "def greet(n):\n    return 'hello ' + n\ndef describe_extension():\n    return Extension(name='lib', tools=[])\n",
		"bad_tool.star":   "def describe_extension():\n    return Extension(name='bt', tools=[Tool(name='x')])\n",
		"bad_hosts.star":  "def describe_extension():\n    return Extension(name='bh', allowed_db_hosts=['::1', 'db.example:5432'], tools=[])\n",
		"long_names.star": longNames,
	}, nil)
	errs := map[string]string{}
	for _, h := range f.p.Health() {
		errs[h.File] = h.LastError
	}
	for file, want := range map[string]string{
		"syntax.star":     "syntax.star:1:",
		"nodescribe.star": "no describe_extension()",
		"badname.star":    `name "a__b"`,
		"escape.star":     "only .star files inside the extensions directory",
		"bad_tool.star":   `tool "x" has no handler`,
		"bad_hosts.star":  `allowed_db_hosts: "db.example:5432" must be a host name or an address, without a port`,
		"long_names.star": `served as "` + strings.Repeat("e", 32) + "__" + strings.Repeat("t", 32) + `", 66 characters`,
		"helper.star":     "",
	} {
		if !strings.Contains(errs[file], want) || (want == "" && errs[file] != "") {
			t.Errorf("%s: %q; want %q", file, errs[file], want)
		}
	}
	if txt, _, _ := f.call(t, "helper__hi", `{"n":"ext"}`); txt != "hello ext" {
		t.Errorf("load(): %q", txt)
	}
	// `ext check` refuses what the daemon's registry would: an extension
	// and a tool name each within 32 but over 64 served together.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "long_names.star"), []byte(longNames), 0o600); err != nil {
		t.Fatal(err)
	}
	if errs, _, err := Check(dir); err != nil || len(errs) != 1 || !strings.Contains(errs[0].Error(), "served as") {
		t.Errorf("Check of over-long served names: %v %v", errs, err)
	}
}

// longNames declares an extension and a tool of 32 characters each.
var longNames = "def h(p):\n    return 'x'\ndef describe_extension():\n    return Extension(name='" + strings.Repeat("e", 32) +
	"', tools=[Tool(name='" + strings.Repeat("t", 32) + "', handler=h)])\n"

// TestHTTPThroughTheDoor: http.get reaches a loopback server only because
// the client admits it explicitly; the response's JSON is decoded.
func TestHTTPThroughTheDoor(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"ok":true,"n":[1,2]}`)) }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	src := "def h(p):\n    r = http.get(p['url'])\n    return {'status': r.status, 'n': r.json['n']}\n" +
		"def describe_extension():\n    return Extension(name='web', tools=[Tool(name='get', handler=h)])\n"
	f := start(t, map[string]string{"web.star": src}, func(o *Options) {
		o.Net = netguard.New(netguard.Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, AllowPorts: []uint16{uint16(port)}})
	})
	if txt, isErr, _ := f.call(t, "web__get", `{"url":"`+srv.URL+`/"}`); isErr || txt != `{"n":[1,2],"status":200}` {
		t.Errorf("%q %v", txt, isErr)
	}
}

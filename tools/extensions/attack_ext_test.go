package extensions

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// This file is the attack review of extension calls (docs/security.md):
// a client with a token calling an extension's tools with hostile
// arguments, and an extension author's code, against the doors the
// modules go through (fsops, sandbox, netguard) and the call's bounds.

// hostile is an extension whose tools hand their arguments straight to the
// modules, as a careless extension would.
const hostile = `
def read(p):
    return fs.read(p["path"])
def write(p):
    fs.write(p["path"], p.get("content", "x"))
    return "written"
def ls(p):
    return fs.list(p["path"])
def exists(p):
    return fs.exists(p["path"])
def run(p):
    r = exec.run(p["cmd"], p.get("args", []))
    return {"out": r.stdout, "err": r.stderr, "code": r.exit_code}
def get(p):
    r = http.get(p["url"])
    return {"status": r.status, "len": len(r.body), "truncated": r.truncated, "url": r.url}
def decode(p):
    return json.decode(p["s"])
def rec(p):
    def f(n):
        return f(n + 1)
    return f(0)
def repeat(p):
    return len("x" * p["n"])
def shift(p):
    return 1 << p["n"]
def fn(p):
    return fn
def cycle(p):
    l = []
    l.append(l)
    return l
def nan(p):
    return {"v": float(p["f"])}
def big(p):
    return "x" * p["n"]
def content(p):
    return {"content": [{"type": "text", "text": fs.read(p["path"])}]}
def describe_extension():
    return Extension(name = "h", allowed_exec = ["echo", "env", "bash", "FOO=bar"], tools = [
        Tool(name = n, handler = h, annotations = {"readOnlyHint": True})
        for n, h in [("read", read), ("write", write), ("ls", ls), ("exists", exists), ("run", run), ("get", get),
                     ("decode", decode), ("rec", rec), ("repeat", repeat), ("shift", shift), ("fn", fn),
                     ("cycle", cycle), ("nan", nan), ("big", big), ("content", content)]
    ])
`

// callWS calls tool in ws as call (a read-only or scoped caller).
func (f *fixture) callAs(t *testing.T, call registry.Call, tool, args string) (string, bool) {
	t.Helper()
	call.Args = json.RawMessage(args)
	res, err := f.reg.Call(context.Background(), tool, call)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		b.WriteString(c.(*mcp.TextContent).Text)
	}
	return b.String(), res.IsError
}

// TestAttackExtFSConfinement: fs.read/write/list/exists keep to the call's
// workspace: "..", absolute paths, symlinks planted in the workspace that
// lead out (to a directory, /dev/zero, /proc/self/environ), a FIFO (never
// waited on), a read-only caller's write and a scope's way up are refused.
func TestAttackExtFSConfinement(t *testing.T) {
	f := start(t, map[string]string{"h.star": hostile}, nil)
	root := f.ws.Root()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("outside secret"), 0o644)
	os.Mkdir(filepath.Join(root, "sub"), 0o755)
	os.WriteFile(filepath.Join(root, "sub", "in.txt"), []byte("inside"), 0o644)
	for name, target := range map[string]string{"out": outside, "outfile": filepath.Join(outside, "secret"),
		"zero": "/dev/zero", "environ": "/proc/self/environ", "rel": "../" + filepath.Base(outside) + "/secret", "newout": filepath.Join(outside, "new")} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "latin1.txt"), []byte("caf\xe9 \xff\xfe"), 0o644)
	for _, tc := range []struct{ tool, path, want string }{
		{"h__read", "../" + filepath.Base(outside) + "/secret", "escapes"},
		{"h__read", filepath.Join(outside, "secret"), ""},
		{"h__read", "/etc/passwd", ""},
		{"h__read", "out/secret", "escapes"},
		{"h__read", "outfile", "escapes"},
		{"h__read", "rel", "escapes"},
		{"h__read", "zero", "escapes"},
		{"h__read", "environ", "escapes"},
		{"h__read", "fifo", "not a regular file"},
		{"h__read", "/proc/self/environ", ""},
		{"h__write", "out/planted", "escapes"},
		{"h__write", "outfile", "escapes"},
		{"h__write", "newout", "escapes"},
		{"h__write", "../planted", "escapes"},
		{"h__ls", "out", "escapes"},
		{"h__ls", "..", "escapes"},
		{"h__exists", "out/secret", "escapes"},
		{"h__exists", "outfile", "escapes"},
	} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			txt, isErr, _ := f.call(t, tc.tool, fmt.Sprintf(`{"path":%q}`, tc.path))
			if !isErr || strings.Contains(txt, "outside secret") || !strings.Contains(txt, tc.want) {
				t.Errorf("%s %q: %q isError=%v; want a refusal with %q", tc.tool, tc.path, txt, isErr, tc.want)
			}
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second): // a hang guard: a FIFO must never be waited on
			t.Fatalf("%s %q did not return", tc.tool, tc.path)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Error("a write landed outside the workspace")
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Error("a write through a dangling link landed outside the workspace")
	}
	// Bytes that are not UTF-8 come back as valid UTF-8 JSON text, as a
	// string result and inside an MCP result dict.
	for _, tool := range []string{"h__read", "h__content"} {
		res, err := f.reg.Call(context.Background(), tool, registry.Call{Args: json.RawMessage(`{"path":"latin1.txt"}`), Workspace: f.ws})
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(res)
		if err != nil || !utf8.Valid(b) || res.IsError {
			t.Errorf("%s of non-UTF-8 bytes: %s %v", tool, b, err)
		}
	}
	// A read-only caller's workspace refuses the write; a scoped caller's
	// ".." stops at the scope.
	if txt, isErr := f.callAs(t, registry.Call{Workspace: fsops.ReadOnly(f.ws)}, "h__write", `{"path":"ro.txt"}`); !isErr || !strings.Contains(txt, "read-only") {
		t.Errorf("read-only write: %q %v", txt, isErr)
	}
	if _, err := os.Stat(filepath.Join(root, "ro.txt")); err == nil {
		t.Error("the read-only caller's write landed")
	}
	scope, err := f.ws.Scope("sub")
	if err != nil {
		t.Fatal(err)
	}
	defer scope.Close()
	if txt, isErr := f.callAs(t, registry.Call{Workspace: scope}, "h__read", `{"path":"in.txt"}`); isErr || txt != "inside" {
		t.Errorf("scoped read: %q %v", txt, isErr)
	}
	for _, p := range []string{"../latin1.txt", "../sub/../latin1.txt", "/latin1.txt"} {
		if txt, isErr := f.callAs(t, registry.Call{Workspace: scope}, "h__read", fmt.Sprintf(`{"path":%q}`, p)); !isErr || strings.Contains(txt, "caf") {
			t.Errorf("scoped read of %q: %q %v", p, txt, isErr)
		}
	}
}

// TestAttackExtHTTPAddresses: the network door refuses every spelling of
// this machine, the unspecified address and the metadata address, and
// names that resolve to them, before anything is dialled.
func TestAttackExtHTTPAddresses(t *testing.T) {
	dialled := make(chan string, 64)
	f := start(t, map[string]string{"h.star": hostile}, func(o *Options) {
		o.Net = netguard.New(netguard.Options{Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
			dialled <- host
			switch host {
			case "loop.example":
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			case "loop6.example":
				return []netip.Addr{netip.MustParseAddr("::1")}, nil
			case "mapped.example":
				return []netip.Addr{netip.MustParseAddr("::ffff:169.254.169.254")}, nil
			case "mixed.example": // a public address beside a private one: only the public one may be dialled
				return []netip.Addr{netip.MustParseAddr("10.0.0.1")}, nil
			}
			return nil, fmt.Errorf("no such host %s", host)
		}})
	})
	for _, u := range []string{
		"http://127.0.0.1/", "http://127.0.0.2/", "http://[::1]/", "http://0.0.0.0/", "http://[::]/",
		"http://169.254.169.254/latest/meta-data/", "http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/",
		"http://[::ffff:169.254.169.254]/", "http://[fe80::1]/", "http://2130706433/", "http://0177.0.0.1/",
		"http://0x7f000001/", "http://0x7f.1/", "http://127.1/", "http://localhost/", "http://LOCALHOST./",
		"http://x.localhost/", "http://metadata.google.internal/", "http://loop.example/", "http://loop6.example/",
		"http://mapped.example/", "http://mixed.example/", "http://10.0.0.1/", "http://192.168.1.1/", "http://100.64.0.1/",
		"http://127.0.0.1:8080/", "file:///etc/passwd", "gopher://127.0.0.1/",
	} {
		txt, isErr, _ := f.call(t, "h__get", fmt.Sprintf(`{"url":%q}`, u))
		if !isErr || !strings.Contains(txt, "refused") {
			t.Errorf("%s: %q isError=%v; want refused", u, txt, isErr)
		}
	}
}

// TestAttackExtHTTPServers: against loopback servers the test admits (only
// 127.0.0.1 at the allowed server's port): a redirect to a forbidden
// address or port is refused, a huge body is cut at the door's cap and
// the result at its own, a body that never ends and a server that sends
// its headers a byte at a time end at the door's deadline, and nothing is
// left running (goleak, TestMain).
func TestAttackExtHTTPServers(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("other port")) }))
	defer other.Close()
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/to-loop2":
			http.Redirect(w, r, "http://127.0.0.2"+strings.TrimPrefix(r.Host, "127.0.0.1")+"/", http.StatusFound)
		case "/to-v6":
			http.Redirect(w, r, "http://[::1]"+strings.TrimPrefix(r.Host, "127.0.0.1")+"/", http.StatusTemporaryRedirect)
		case "/to-other-port":
			http.Redirect(w, r, other.URL+"/", http.StatusFound)
		case "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/huge":
			chunk := []byte(strings.Repeat("y", 1<<20))
			for range 20 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "/endless":
			w.(http.Flusher).Flush()
			for {
				if _, err := w.Write([]byte("z")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-stop:
					return
				case <-r.Context().Done():
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
	}))
	defer srv.Close()
	defer close(stop)
	// slowloris: a raw server that sends its status line a byte at a time, never finishing.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				c.Read(buf)
				for _, b := range []byte("HTTP/1.1 200 OK\r\nX-Slow: ") {
					if _, err := c.Write([]byte{b}); err != nil {
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
				for {
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
					}
					if _, err := c.Write([]byte("a")); err != nil {
						return
					}
				}
			}()
		}
	}()
	srvPort := srv.Listener.Addr().(*net.TCPAddr).Port
	slowPort := ln.Addr().(*net.TCPAddr).Port
	door := func(timeout time.Duration) func(*Options) {
		return func(o *Options) {
			o.Net = netguard.New(netguard.Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
				AllowPorts: []uint16{uint16(srvPort), uint16(slowPort)}, Timeout: timeout})
		}
	}
	// The redirects and the cut body meet no deadline: a door of 30 s, so
	// that reading 10 MiB under -race on a loaded machine is not cut by it.
	// The endless and slowloris servers end at the 2 s door's deadline.
	f := start(t, map[string]string{"h.star": hostile}, door(30*time.Second))
	slow := start(t, map[string]string{"h.star": hostile}, door(2*time.Second))
	for _, path := range []string{"/to-metadata", "/to-loop2", "/to-v6", "/to-other-port", "/to-file"} {
		txt, isErr, _ := f.call(t, "h__get", fmt.Sprintf(`{"url":%q}`, srv.URL+path))
		if !isErr || !strings.Contains(txt, "refused") || strings.Contains(txt, "other port") {
			t.Errorf("redirect %s: %q isError=%v; want refused", path, txt, isErr)
		}
	}
	txt, isErr, _ := f.call(t, "h__get", fmt.Sprintf(`{"url":%q}`, srv.URL+"/huge"))
	if isErr || !strings.Contains(txt, `"len":10485760`) || !strings.Contains(txt, `"truncated":true`) {
		t.Errorf("huge body: %q %v", txt, isErr)
	}
	for _, u := range []string{srv.URL + "/endless", fmt.Sprintf("http://127.0.0.1:%d/", slowPort)} {
		begin := time.Now()
		txt, isErr, _ := slow.call(t, "h__get", fmt.Sprintf(`{"url":%q}`, u))
		if !isErr || !strings.Contains(txt, "deadline") && !strings.Contains(txt, "timeout") && !strings.Contains(txt, "Timeout") {
			t.Errorf("%s: %q %v (after %s); want the door's deadline", u, txt, isErr, time.Since(begin))
		}
	}
	f.p.opts.Net.CloseIdleConnections()
	slow.p.opts.Net.CloseIdleConnections()
}

// TestAttackExtExecPolicy: exec.run quotes every word, so the program
// judged is the program run: arguments are data, an allowed_exec entry
// written as an assignment is a program name (no variable set), a wrapper
// in allowed_exec does not carry a refused program past the policy, and a
// read-only or no-exec caller reaches no extension tool that can run one.
func TestAttackExtExecPolicy(t *testing.T) {
	f := start(t, map[string]string{"h.star": hostile}, nil)
	for _, tc := range []struct {
		args, want string
		isErr      bool
	}{
		{`{"cmd":"echo","args":["$(id)","; id","` + "`id`" + `","a'b"]}`, `"out":"$(id) ; id ` + "`id`" + ` a'b\n"`, false},
		{`{"cmd":"FOO=bar","args":["echo","injected"]}`, `"code":127`, false},
		{`{"cmd":"env","args":["LD_PRELOAD=/x.so","sudo","id"]}`, "privilege-escalation", true},
		{`{"cmd":"bash","args":["-c","sudo id"]}`, "privilege-escalation", true},
		{`{"cmd":"bash","args":["-c","$(printf sudo) id"]}`, "unjudgeable", true},
		{`{"cmd":"/bin/echo"}`, "not in the allowed_exec", true},
		{`{"cmd":"echo ","args":[]}`, "not in the allowed_exec", true},
	} {
		txt, isErr, _ := f.call(t, "h__run", tc.args)
		if isErr != tc.isErr || !strings.Contains(txt, tc.want) || strings.Contains(txt, "injected\\n") {
			t.Errorf("%s: %q isError=%v; want %q isError=%v", tc.args, txt, isErr, tc.want, tc.isErr)
		}
	}
	for _, call := range []registry.Call{{ReadOnly: true, Workspace: fsops.ReadOnly(f.ws)}, {NoExec: true, Workspace: f.ws}} {
		if txt, isErr := f.callAs(t, call, "h__read", `{"path":"x"}`); !isErr || !strings.Contains(txt, "may not run commands") {
			t.Errorf("%+v: %q %v", call, txt, isErr)
		}
	}
}

// TestAttackExtComputeBounds: recursion ends at Starlark's depth bound,
// repetition and shifts at Starlark's caps, json.decode of deep or huge
// input at the daemon's bounds, and results that are not JSON (a
// function, a cycle, NaN, Inf) or too long are error results naming why.
func TestAttackExtComputeBounds(t *testing.T) {
	f := start(t, map[string]string{"h.star": hostile}, func(o *Options) { o.MaxSteps = DefaultMaxSteps })
	for _, tc := range []struct{ tool, args, want string }{
		{"h__rec", `{}`, "Starlark stack overflow"},
		{"h__repeat", `{"n":1073741824}`, "excessive repeat"},
		{"h__repeat", `{"n":4294967296}`, "too large"},
		{"h__shift", `{"n":100000000}`, "shift count too large"},
		{"h__decode", `{"s":"` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `"}`, "nested more than 100"},
		{"h__decode", `{"s":"[1, ` + strings.Repeat("9", MaxIntDigits+1) + `]"}`, "an integer of 4301 digits: at most 4300"},
		{"h__decode", `{"s":"-` + strings.Repeat("9", 1000000) + `"}`, "an integer of 1000000 digits"},
		{"h__fn", `{}`, "function"},
		{"h__cycle", `{}`, "nested deeper than 100"},
		{"h__nan", `{"f":"nan"}`, "NaN"},
		{"h__nan", `{"f":"inf"}`, "Inf"},
		{"h__big", `{"n":2000000}`, "the limit is 1048576"},
	} {
		txt, isErr, _ := f.call(t, tc.tool, tc.args)
		if !isErr || !strings.Contains(strings.ToLower(txt), strings.ToLower(tc.want)) {
			t.Errorf("%s %s: %q isError=%v; want an error with %q", tc.tool, cutText(tc.args, 80), cutText(txt, 300), isErr, tc.want)
		}
	}
	// Digits inside strings, and long floats, are not integers.
	long := strings.Repeat("9", MaxIntDigits+1)
	for _, doc := range []string{`[\"` + long + `\"]`, `[\"\\\"` + long + `\"]`, `[1.` + long + `]`, `{\"` + long + `\": 1}`} {
		if txt, isErr, _ := f.call(t, "h__decode", `{"s":"`+doc+`"}`); isErr {
			t.Errorf("json.decode(%s): %q", cutText(doc, 40), cutText(txt, 200))
		}
	}
}

// TestAttackExtConcurrentCalls: many calls of one extension at once run
// at most MaxConcurrent at a time (the others wait for a slot until their
// deadline), and nothing is left running after (goleak, TestMain).
func TestAttackExtConcurrentCalls(t *testing.T) {
	var inside, most atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inside.Add(1)
		defer inside.Add(-1)
		if n > DefaultMaxConcurrent {
			// A call that ended at its deadline closed its connection,
			// and its slot went to a waiting call, a moment before this
			// server sees the close and its handler leaves: count again
			// once such handlers have left. Calls that really run at
			// once are held here until release (or their deadline, 500
			// ms after they all started), and are still counted.
			time.Sleep(200 * time.Millisecond)
			n = inside.Load()
		}
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	f := start(t, map[string]string{"h.star": hostile}, func(o *Options) {
		loopback(t, srv)(o)
		o.Registry = registry.New(registry.Options{MaxConcurrent: 64, DefaultTimeout: 500 * time.Millisecond})
	})
	done := make(chan bool)
	for range 16 {
		go func() {
			res, err := f.reg.Call(context.Background(), "h__get", registry.Call{Args: json.RawMessage(fmt.Sprintf(`{"url":%q}`, srv.URL)), Workspace: f.ws})
			done <- err == nil && res.IsError
		}()
	}
	for range 16 {
		if !<-done {
			t.Error("a call did not end in an error at its deadline")
		}
	}
	close(release)
	if m := most.Load(); m < 1 || m > DefaultMaxConcurrent {
		t.Errorf("%d requests of one extension at once; the limit is %d", m, DefaultMaxConcurrent)
	}
	f.p.opts.Net.CloseIdleConnections()
}

// TestAttackExtDeclarations: what an extension declares is bounded and
// checked when the file loads: odd tool names, two tools or parameters of
// one name, a description or schema made by a loop, thousands of tools or
// parameters, a tool name another file (or a built-in provider, with bare
// names) holds, and load() of a path outside the directory, through a
// symlink there too, are load errors; the others keep serving.
func TestAttackExtDeclarations(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "lib.star"), []byte("x = 1\n"), 0o644)
	ext := func(name, tools string) string {
		return "def h(p):\n    return 'ok'\ndef describe_extension():\n    return Extension(name = '" + name + "', tools = " + tools + ")\n"
	}
	files := map[string]string{
		"good.star":       ext("good", "[Tool(name = 't', handler = h)]"),
		"same.star":       ext("good", "[Tool(name = 't', handler = h)]"),
		"odd.star":        ext("odd", "[Tool(name = '../x', handler = h)]"),
		"odd2.star":       ext("odd2", "[Tool(name = 'a b', handler = h)]"),
		"odd3.star":       ext("odd3", "[Tool(name = '\u00e9t\u00e9', handler = h)]"),
		"long.star":       ext("long", "[Tool(name = 'x' * 33, handler = h)]"),
		"twice.star":      ext("twice", "[Tool(name = 't', handler = h), Tool(name = 't', handler = h)]"),
		"twoparams.star":  ext("twoparams", "[Tool(name = 't', handler = h, parameters = [ToolParameter(name = 'a'), ToolParameter(name = 'a', required = True)])]"),
		"hugedesc.star":   ext("hugedesc", "[Tool(name = 't', handler = h, description = 'x' * (1 << 22))]"),
		"hugeparam.star":  ext("hugeparam", "[Tool(name = 't', handler = h, parameters = [ToolParameter(name = 'p', description = 'x' * 70000)])]"),
		"hugeext.star":    "def describe_extension():\n    return Extension(name = 'hugeext', description = 'x' * 100000, tools = [])\n",
		"manytools.star":  "def h(p):\n    return 1\ndef describe_extension():\n    return Extension(name = 'many', tools = [Tool(name = 't%d' % i, handler = h) for i in range(100000)])\n",
		"manyparams.star": ext("manyparams", "[Tool(name = 't', handler = h, parameters = [ToolParameter(name = 'p%d' % i) for i in range(100000)])]"),
		"bigdefault.star": ext("bigdefault", "[Tool(name = 't', handler = h, parameters = [ToolParameter(name = 'p', param_type = 'array', default = '[' + '1,' * 40000 + '1]')])]"),
		"notstruct.star":  ext("notstruct", "[{'name': 't', 'handler': h}]"),
		"abs.star":        "load('" + filepath.Join(outside, "lib.star") + "', 'x')\n" + ext("abs", "[]"),
		"up.star":         "load('../" + filepath.Base(outside) + "/lib.star', 'x')\n" + ext("up", "[]"),
		"viasym.star":     "load('sub/sym.star', 'x')\n" + ext("viasym", "[]"),
		"builtin.star":    ext("builtin", "[Tool(name = 'read_file', handler = h)]"),
	}
	dir := t.TempDir()
	for name, src := range files {
		write(t, dir, name, src)
	}
	// In a subdirectory: a link out among the extension files stops the
	// start (CheckDir, TestConfigMapLinkOutRefused).
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "lib.star"), filepath.Join(dir, "sub", "sym.star")); err != nil {
		t.Fatal(err)
	}
	reg := registry.New(registry.Options{})
	if err := reg.Set("builtin", []registry.Tool{{Name: "read_file", Handler: func(context.Context, registry.Call) *mcp.CallToolResult { return nil }}}); err != nil {
		t.Fatal(err)
	}
	f := startIn(t, dir, func(o *Options) { o.Registry = reg; o.BareNames = true; o.MaxSteps = DefaultMaxSteps })
	errs := map[string]string{}
	for _, h := range f.p.Health() {
		errs[h.File] = h.LastError
	}
	for file, want := range map[string]string{
		"good.star":       "",
		"same.star":       `"t"`,
		"odd.star":        `tool name "../x"`,
		"odd2.star":       `tool name "a b"`,
		"odd3.star":       "tool name",
		"long.star":       "at most 32",
		"twice.star":      `two tools are named "t"`,
		"twoparams.star":  `two parameters are named "a"`,
		"hugedesc.star":   "more than 65536 bytes",
		"hugeparam.star":  "more than 65536 bytes",
		"hugeext.star":    "the limit is 65536",
		"manytools.star":  "more than 256 tools",
		"manyparams.star": "more than 256 parameters",
		"bigdefault.star": "more than 65536 bytes",
		"notstruct.star":  "tools must hold Tool(...)",
		"abs.star":        "only .star files inside the extensions directory",
		"up.star":         "only .star files inside the extensions directory",
		"viasym.star":     "not a file inside the extensions directory",
		"builtin.star":    `"read_file"`,
	} {
		if got := errs[file]; want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("%s: %q; want %q", file, cutText(got, 300), want)
		}
	}
	if txt, isErr, _ := f.call(t, "t", `{}`); isErr || txt != "ok" {
		t.Errorf("the good extension: %q %v", txt, isErr)
	}
	for _, tl := range reg.List() {
		// What tools/list sends of it (a Tool's Handler is no JSON).
		b, err := json.Marshal(mcp.Tool{Name: tl.Name, Title: tl.Title, Description: tl.Description, InputSchema: tl.InputSchema, Annotations: tl.Annotations})
		if err != nil || len(b) > MaxDeclBytes+1024 {
			t.Errorf("tool %s is listed with %d bytes (%v)", tl.Name, len(b), err)
		}
	}
}

// TestAttackExtReloadRace: calls running while their file is rewritten
// again and again each finish on one version or the other, never on a mix
// and never with an error (run it with -race).
func TestAttackExtReloadRace(t *testing.T) {
	src := func(v int) string {
		return fmt.Sprintf("V = %d\ndef h(p):\n    n = 0\n    for i in range(1000):\n        n += V\n    return str(n // 1000)\ndef describe_extension():\n    return Extension(name = 'race', tools = [Tool(name = 't', handler = h)])\n", v)
	}
	f := start(t, map[string]string{"race.star": src(1)}, func(o *Options) { o.Debounce = time.Millisecond })
	var changes atomic.Int32
	defer f.reg.Subscribe(func() { changes.Add(1) })()
	stop := make(chan struct{})
	writes := make(chan struct{})
	go func() {
		defer close(writes)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// Rewritten in place (not renamed), so a reload can read it half written.
			os.WriteFile(filepath.Join(f.dir, "race.star"), []byte(src(1+i%2)), 0o644)
			time.Sleep(time.Millisecond)
		}
	}()
	errc := make(chan string, 8)
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 200 || changes.Load() < 4 && i < 100000; i++ {
				res, err := f.reg.Call(context.Background(), "race__t", registry.Call{Args: json.RawMessage(`{}`), Workspace: f.ws})
				if err != nil {
					errc <- err.Error()
					return
				}
				txt := res.Content[0].(*mcp.TextContent).Text
				if res.IsError || txt != "1" && txt != "2" {
					errc <- txt
					return
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
	close(stop)
	<-writes
	select {
	case e := <-errc:
		t.Errorf("a call during reloads: %q", e)
	default:
	}
	if changes.Load() < 4 {
		t.Errorf("%d reloads while the calls ran", changes.Load())
	}
}

// TestAttackExtHeapBounded: a handler that keeps what it allocates, in
// large steps ("x" * n) or small ones, or that recurses to Starlark's
// depth bound (about 256 MiB of stack), is cancelled once the daemon's heap
// and stacks pass MaxHeapBytes, long before the step limit (which let a
// loop of small appends hold 5 GB); the file's top-level code too; the
// next call runs.
func TestAttackExtHeapBounded(t *testing.T) {
	const limit = 128 << 20
	src := `
def gulps(p):
    l = []
    for i in range(40):
        l.append("x" * (1 << 25))
    return len(l)
def bites(p):
    l = []
    for i in range(10000000):
        l.append("x" * 100)
    return len(l)
def deep(p):
    def f(n):
        return f(n + 1)
    return f(0)
def small(p):
    return "small"
def describe_extension():
    return Extension(name = "mem", tools = [Tool(name = "gulps", handler = gulps), Tool(name = "bites", handler = bites),
                                            Tool(name = "deep", handler = deep),
                                            Tool(name = "small", handler = small)])
`
	atLoad := "L = []\nfor i in range(40):\n    L.append('x' * (1 << 25))\ndef describe_extension():\n    return Extension(name = 'atload', tools = [])\n"
	bounded := func(o *Options) {
		o.MaxSteps = DefaultMaxSteps
		o.MaxHeapBytes = limit
	}
	// Each file on its own: the bound cancels every load running when it
	// trips (it cannot tell which allocated), so mem.star loading beside
	// atload.star could be cancelled with it.
	loads := start(t, map[string]string{"atload.star": atLoad}, bounded)
	seen := false
	for _, h := range loads.p.Health() {
		if h.File == "atload.star" {
			seen = true
			if !strings.Contains(h.LastError, "past the 128 MiB") {
				t.Errorf("top-level code: %+v", h)
			}
		}
	}
	if !seen {
		t.Errorf("atload.star has no health entry: %+v", loads.p.Health())
	}
	f := start(t, map[string]string{"mem.star": src}, bounded)
	for _, tool := range []string{"mem__gulps", "mem__bites", "mem__deep"} {
		txt, isErr, _ := f.call(t, tool, `{}`)
		if !isErr || !strings.Contains(txt, "past the 128 MiB extension calls may run with") {
			t.Errorf("%s: %q isError=%v; want the heap bound", tool, cutText(txt, 300), isErr)
		}
	}
	if txt, isErr, _ := f.call(t, "mem__small", `{}`); isErr || txt != "small" {
		t.Errorf("after: %q %v", txt, isErr)
	}
}

// TestAttackExtLoadThroughLinkedDir: a directory named through a symlink
// serves its files, and their load() of one another, while a load() of a
// file outside it, through a link in it, stays refused.
func TestAttackExtLoadThroughLinkedDir(t *testing.T) {
	real, outside := t.TempDir(), t.TempDir()
	write(t, real, "lib.star", "def greet(n):\n    return 'hello ' + n\n")
	write(t, outside, "evil.star", "x = 1\n")
	write(t, real, "helper.star", "load('lib.star', 'greet')\ndef h(p):\n    return greet('x')\ndef describe_extension():\n    return Extension(name='helper', tools=[Tool(name='hi', handler=h)])\n")
	write(t, real, "escape.star", "load('sub/evil.star', 'x')\ndef describe_extension():\n    return Extension(name='escape', tools=[])\n")
	// In a subdirectory: a link out among the extension files stops the
	// start (CheckDir, TestConfigMapLinkOutRefused).
	if err := os.Mkdir(filepath.Join(real, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "evil.star"), filepath.Join(real, "sub", "evil.star")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "ext")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	f := startIn(t, link, nil)
	if txt, isErr, _ := f.call(t, "helper__hi", `{}`); isErr || txt != "hello x" {
		t.Errorf("load() in a linked directory: %q %v (%+v)", txt, isErr, f.p.Health())
	}
	for _, h := range f.p.Health() {
		if h.File == "escape.star" && !strings.Contains(h.LastError, "not a file inside the extensions directory") {
			t.Errorf("load() through a link out: %+v", h)
		}
	}
}

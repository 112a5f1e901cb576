package mcphttp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"
	"github.com/agentbe/agentbe-daemon/tools/registry"
	"github.com/agentbe/agentbe-daemon/tools/workspace"
)

func TestMain(m *testing.M) {
	sandboxexec.Main() // the landlock mode's trampoline: its commands run through this binary
	goleak.VerifyTestMain(m)
}

// fixedTime is the mtime/atime of every fixture file, so results that show
// timestamps are stable.
var fixedTime = time.Date(2025, 1, 2, 3, 4, 5, 678_000_000, time.UTC)

// writeFixture lays out the workspace every golden test runs against (the
// same tree the reference was probed with; see testdata/README).
func writeFixture(t testing.TB, root string) {
	t.Helper()
	files := map[string]string{
		"a.txt":               "line1\nline2\nline3\n",
		"b.txt":               "no newline",
		"empty.txt":           "",
		"edit.txt":            "alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta\ntheta\niota\nkappa\n",
		"dup.txt":             "foo\nfoo\nbar\n",
		"img.png":             "\x89PNG\r\n\x1a\nxxxx",
		"snd.wav":             "RIFFxxxxWAVE",
		"data.json":           `{"a":1}`,
		"sub/s.txt":           "hello sub\n",
		"sub/deep/d.md":       "deep\n",
		"node_modules/x/i.js": "module\n",
		".git/HEAD":           "ref\n",
		".env":                ".hidden\n",
		"users/u1/f.txt":      "u1 secret\n",
		"users/u2/secret.txt": "u2 secret\n",
		"sized.bin":           strings.Repeat("z", 3000),
		"long.txt":            strings.Repeat("x", 2500) + "\nshort\n",
	}
	var big strings.Builder
	for i := 1; i <= 1500; i++ {
		fmt.Fprintf(&big, "%d\n", i)
	}
	files["big.txt"] = big.String()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(root, "link_out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(root, "link_in")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(root, "dir_out")); err != nil {
		t.Fatal(err)
	}
	// Stable modes (the golden answers hold them, and the modes given above
	// pass through the umask) and timestamps: directories last, children
	// first.
	var paths []string
	filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { paths = append(paths, p); return nil })
	sort.Sort(sort.Reverse(sort.StringSlice(paths)))
	for _, p := range paths {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink == 0 {
			if p != root {
				mode := os.FileMode(0o644)
				if fi.IsDir() {
					mode = 0o755
				}
				if err := os.Chmod(p, mode); err != nil {
					t.Fatal(err)
				}
			}
			os.Chtimes(p, fixedTime, fixedTime)
		}
	}
}

// env is a running server over a fixture workspace.
type env struct {
	root string
	ws   fsops.Workspace
	ex   sandbox.Executor
	srv  *Server
	http *httptest.Server
}

type envOpt func(*Options)

// newEnv builds a directory workspace with the fixture, a software-mode
// executor, a Server and a loopback HTTP server at /mcp.
func newEnv(t testing.TB, opts ...envOpt) *env {
	t.Helper()
	root := t.TempDir()
	writeFixture(t, root)
	return newEnvAt(t, root, opts...)
}

func newEnvAt(t testing.TB, root string, opts ...envOpt) *env {
	t.Helper()
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: ws.Root()})
	if err != nil {
		t.Fatal(err)
	}
	return newEnvWith(t, ws, ex, append([]envOpt{func(o *Options) { o.RootDir = root }}, opts...)...)
}

// newEnvWith serves ws with ex; the cleanup closes both.
func newEnvWith(t testing.TB, ws fsops.Workspace, ex sandbox.Executor, opts ...envOpt) *env {
	t.Helper()
	o := Options{Workspace: ws, RootDir: ws.Root(), Version: "test"}
	for _, f := range opts {
		f(&o)
	}
	if o.StaticScope != "" {
		sc, err := ws.Scope(o.StaticScope)
		if err != nil {
			t.Fatal(err)
		}
		o.Workspace = sc
	}
	if o.Registry == nil {
		o.Registry = wsRegistry(o.Workspace, ex, 20*time.Second)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler())
	hs := httptest.NewServer(mux)
	e := &env{root: ws.Root(), ws: ws, ex: ex, srv: srv, http: hs}
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
		ex.Close()
		ws.Close()
	})
	return e
}

func (e *env) url() string { return e.http.URL + "/mcp" }

// headerRT adds fixed headers to every request.
type headerRT struct {
	h    http.Header
	next http.RoundTripper
}

func (rt headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range rt.h {
		r.Header[k] = v
	}
	return rt.next.RoundTrip(r)
}

// connect returns a go-sdk client session over streamable HTTP, sending hdr
// with every request.
func (e *env) connect(t testing.TB, hdr http.Header) *mcp.ClientSession {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   e.url(),
		HTTPClient: &http.Client{Transport: headerRT{h: hdr, next: tr}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call runs a tool and renders its result as the goldens show it.
func call(t testing.TB, cs *mcp.ClientSession, name string, args any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "protocol error: " + err.Error()
	}
	return render(res)
}

// render shows a result: "isError: true" when set, then each content block.
func render(res *mcp.CallToolResult) string {
	var b strings.Builder
	if res.IsError {
		b.WriteString("isError: true\n")
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			b.WriteString("text:\n" + c.Text + "\n")
		case *mcp.ImageContent:
			fmt.Fprintf(&b, "image %s: %s\n", c.MIMEType, base64.StdEncoding.EncodeToString(c.Data))
		case *mcp.AudioContent:
			fmt.Fprintf(&b, "audio %s: %s\n", c.MIMEType, base64.StdEncoding.EncodeToString(c.Data))
		case *mcp.EmbeddedResource:
			fmt.Fprintf(&b, "resource %s %s: %s\n", c.Resource.URI, c.Resource.MIMEType, base64.StdEncoding.EncodeToString(c.Resource.Blob))
		default:
			j, _ := json.Marshal(c)
			fmt.Fprintf(&b, "other: %s\n", j)
		}
	}
	return b.String()
}

// wsRegistry is a registry serving the workspace tools of ws (package
// workspace, tools/workspace), as the daemon wires it.
func wsRegistry(ws fsops.Workspace, ex sandbox.Executor, execTimeout time.Duration) *registry.Registry {
	r := registry.New(registry.Options{})
	if err := r.Set("workspace", workspace.Tools(ws, workspace.ExecEnv{Executor: ex, Timeout: execTimeout})); err != nil {
		panic(err)
	}
	return r
}

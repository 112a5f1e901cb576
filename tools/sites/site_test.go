package sites

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// exampleSite copies examples/site into a temporary directory (the tests
// edit pages) and serves it.
func exampleSite(t *testing.T, mod func(*Options)) (*Site, string) {
	t.Helper()
	return exampleSiteTB(t, mod)
}

func exampleSiteB(b *testing.B) (*Site, string) { return exampleSiteTB(b, nil) }

func exampleSiteTB(t testing.TB, mod func(*Options)) (*Site, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../examples/site")); err != nil {
		t.Fatal(err)
	}
	ws, err := fsops.NewDir(dir, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	exe, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: ws.Root()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exe.Close() })
	opts := Options{Workspace: ws, Executor: exe, Env: map[string]string{"SITE_GREETING": "hello from the operator"}}
	if mod != nil {
		mod(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, ws.Root()
}

// serve is the site's handler behind the default admission: loopback
// origins, no token.
func serve(s *Site) http.Handler {
	return s.Handler(admit.Rules{Guard: httpguard.New(httpguard.Options{})})
}

type reply struct {
	status int
	ctype  string
	body   string
	action ActionResponse
}

func do(t *testing.T, h http.Handler, method, target, body string) reply {
	t.Helper()
	req := httptest.NewRequest(method, "http://site"+target, strings.NewReader(body))
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	if strings.Contains(target, "..") {
		req.URL.Path = target // as a raw client can send it
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	r := reply{status: rec.Code, ctype: rec.Header().Get("Content-Type"), body: rec.Body.String()}
	if method == http.MethodPost {
		if err := json.Unmarshal(rec.Body.Bytes(), &r.action); err != nil {
			t.Fatalf("POST %s: not JSON: %s", target, rec.Body)
		}
	}
	return r
}

func post(t *testing.T, h http.Handler, target string, req ActionRequest) reply {
	t.Helper()
	b, _ := json.Marshal(req)
	return do(t, h, http.MethodPost, target, string(b))
}

// TestHTTPStatuses walks the reference's status table end to end.
func TestHTTPStatuses(t *testing.T) {
	s, root := exampleSite(t, func(o *Options) { o.Timeout = 500 * time.Millisecond })
	h := serve(s)
	if err := os.WriteFile(filepath.Join(root, "plain.md"), []byte("# no tools here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "broken.md"), []byte("---\ntools:\n  - [cat, {path: x}]\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, method, target, body string
		status                     int
		want                       string // in the body (GET) or stdout+stderr (POST)
	}{
		{"GET the front page", "GET", "/", "", 200, "# Example tool site"},
		{"GET a directory's README", "GET", "/data", "", 200, "# Data"},
		{"GET a page without .md", "GET", "/guide", "", 200, "# Using this site"},
		{"GET any file", "GET", "/data/cities.csv", "", 200, "Tokyo,JP"},
		{"GET missing", "GET", "/nope", "", 404, "no page at /nope"},
		{"GET traversal", "GET", "/../../etc/passwd", "", 403, "path traversal"},
		{"POST allowed", "POST", "/", `{"command":["ls"]}`, 200, "guide.md"},
		{"POST with placeholder args", "POST", "/", `{"command":["cat","{file}"],"args":{"file":"guide.md"}}`, 200, "Using this site"},
		{"POST nested page", "POST", "/data", `{"command":["grep","-c","JP","cities.csv"]}`, 200, "1\n"},
		{"POST not allowed", "POST", "/", `{"command":["rm","-rf","data"]}`, 403, "command not allowed by /README.md"},
		{"POST extra argument after ;", "POST", "/", `{"command":["cat","guide.md","-n"]}`, 403, "not allowed"},
		{"POST empty command", "POST", "/", `{"command":[]}`, 400, "empty command"},
		{"POST bad body", "POST", "/", `{"cmd":["ls"]}`, 400, `the body must be {"command"`},
		{"POST no frontmatter", "POST", "/plain", `{"command":["ls"]}`, 400, "declares no tools"},
		{"POST broken frontmatter", "POST", "/broken", `{"command":["ls"]}`, 400, `frontmatter line 3: unknown key "path"`},
		{"POST traversal in an argument", "POST", "/", `{"command":["wc","-l","../README.md"]}`, 403, "contains \"..\""},
		{"POST absolute argument", "POST", "/", `{"command":["wc","-l","/etc/passwd"]}`, 403, "absolute path"},
		{"POST missing page", "POST", "/nope", `{"command":["ls"]}`, 404, "no page"},
		{"POST body too large", "POST", "/", `{"command":["echo","` + strings.Repeat("x", MaxRequestBytes) + `"]}`, 413, "over 64 KiB"},
		{"POST reserved env", "POST", "/", `{"command":["ls"],"env":{"LD_PRELOAD":"x.so"}}`, 400, "LD_PRELOAD is reserved"},
		{"POST PATH env", "POST", "/", `{"command":["ls"],"env":{"PATH":"/tmp"}}`, 400, "PATH is reserved"},
		{"POST PS4 env", "POST", "/", `{"command":["ls"],"env":{"PS4":"$(id)"}}`, 400, "PS4 is reserved"},
		{"POST control character", "POST", "/", `{"command":["ls"],"env":{"X":"a\nb"}}`, 400, "control character"},
		{"PUT", "PUT", "/", ``, 405, "use GET"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, h, tc.method, tc.target, tc.body)
			got := r.body
			if tc.method == "POST" {
				got = r.action.Stdout + r.action.Stderr
			}
			if r.status != tc.status || !strings.Contains(got, tc.want) {
				t.Fatalf("%d %q; want %d containing %q", r.status, got, tc.status, tc.want)
			}
		})
	}
	if r := do(t, h, "GET", "/", ""); r.ctype != "text/markdown; charset=utf-8" {
		t.Errorf("page content type %q", r.ctype)
	}
}

// TestRealExitCodeAndStreams: the response keeps the real exit status and
// stdout and stderr apart.
func TestRealExitCodeAndStreams(t *testing.T) {
	s, root := exampleSite(t, nil)
	writePage(t, root, "x.md", "---\ntools:\n  - [ls, {}]\n---\n")
	r := post(t, serve(s), "/x", ActionRequest{Command: []string{"ls", "no-such-file"}})
	if r.status != 200 || r.action.Returncode != 2 || r.action.Stdout != "" || !strings.Contains(r.action.Stderr, "No such file") {
		t.Errorf("%d %+v", r.status, r.action)
	}
}

func writePage(t *testing.T, root, name, body string) { writePageB(t, root, name, body) }

func writePageB(t testing.TB, root, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVarsOnlyFromTheOperator: $VAR in a spec literal is expanded from the
// operator's environment after validation; a $VAR the agent sends (through
// a placeholder, or with the request's env) is never expanded.
func TestVarsOnlyFromTheOperator(t *testing.T) {
	s, _ := exampleSite(t, nil)
	h := serve(s)
	r := post(t, h, "/", ActionRequest{Command: []string{"echo", "greeting: $SITE_GREETING"}})
	if r.status != 200 || r.action.Stdout != "greeting: hello from the operator\n" {
		t.Errorf("operator var: %d %+v", r.status, r.action)
	}
	r = post(t, h, "/", ActionRequest{Command: []string{"echo", "$SITE_GREETING"}, Env: map[string]string{"SITE_GREETING": "from the agent"}})
	if r.status != 200 || r.action.Stdout != "$SITE_GREETING\n" {
		t.Errorf("a placeholder's $VAR was expanded: %d %+v", r.status, r.action)
	}
	r = post(t, h, "/", ActionRequest{Command: []string{"echo", "{x}"}, Args: map[string]string{"x": "$SITE_GREETING"}})
	if r.status != 200 || r.action.Stdout != "$SITE_GREETING\n" {
		t.Errorf("an args value's $VAR was expanded: %d %+v", r.status, r.action)
	}
	// A spec literal using a variable the operator did not set.
	s2, root := exampleSite(t, func(o *Options) { o.Env = nil })
	_ = root
	r = post(t, serve(s2), "/", ActionRequest{Command: []string{"echo", "greeting: $SITE_GREETING"}})
	if r.status != 500 || !strings.Contains(r.action.Stderr, "does not define $SITE_GREETING") || !strings.Contains(r.action.Stderr, "sets it with --site-env-file") {
		t.Errorf("missing operator var: %d %+v", r.status, r.action)
	}
	// `site serve` names its own flag.
	s3, _ := exampleSite(t, func(o *Options) { o.Env, o.EnvFlag = nil, "--env-file" })
	r = post(t, serve(s3), "/", ActionRequest{Command: []string{"echo", "greeting: $SITE_GREETING"}})
	if r.status != 500 || !strings.HasSuffix(strings.TrimSpace(r.action.Stderr), "the operator sets it with --env-file") {
		t.Errorf("missing operator var under site serve: %d %+v", r.status, r.action)
	}
}

// TestTimeoutKillsTheTree: a command past the timeout gets 408 and leaves
// no process behind.
func TestTimeoutKillsTheTree(t *testing.T) {
	s, root := exampleSite(t, func(o *Options) { o.Timeout = 300 * time.Millisecond })
	writePage(t, root, "slow.md", "---\ntools:\n  - [sleep, {}, \";\"]\n---\n")
	mark := strconv.FormatInt(time.Now().UnixNano()%1e6, 10) + ".25"
	r := post(t, serve(s), "/slow", ActionRequest{Command: []string{"sleep", mark}})
	if r.status != http.StatusRequestTimeout || !strings.Contains(r.action.Stderr, "timed out after 300ms") {
		t.Fatalf("%d %+v", r.status, r.action)
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(cmd), mark) {
			t.Errorf("process %s (%q) still running after the timeout", e.Name(), cmd)
		}
	}
}

// TestOutputCappedWhileStreaming: `yes` writes until the timeout; what is
// kept is bounded by MaxOutput (head and tail, with the notice).
func TestOutputCappedWhileStreaming(t *testing.T) {
	s, root := exampleSite(t, func(o *Options) { o.Timeout = 500 * time.Millisecond; o.MaxOutput = 4096 })
	writePage(t, root, "yes.md", "---\ntools:\n  - [yes, \";\"]\n---\n")
	r := post(t, serve(s), "/yes", ActionRequest{Command: []string{"yes"}})
	if r.status != http.StatusRequestTimeout || len(r.action.Stdout) > 8192 || !strings.Contains(r.action.Stdout, "truncated") {
		t.Errorf("%d, stdout of %d bytes: %.200q", r.status, len(r.action.Stdout), r.action.Stdout)
	}
}

// TestGlob: paths relative to the page, no way out, capped with a note.
func TestGlob(t *testing.T) {
	s, root := exampleSite(t, func(o *Options) { o.MaxListItems = 2 })
	h := serve(s)
	r := post(t, h, "/", ActionRequest{Command: []string{"glob", "[gR]*.md"}})
	if r.status != 200 || r.action.Stdout != "guide.md\nREADME.md\n" || r.action.Stderr != "" {
		t.Errorf("glob: %d %+v", r.status, r.action)
	}
	for i := range 3 {
		writePage(t, root, fmt.Sprintf("p%d.md", i), "x")
	}
	r = post(t, h, "/", ActionRequest{Command: []string{"glob", "*.md"}})
	if strings.Count(r.action.Stdout, "\n") != 2 || !strings.Contains(r.action.Stderr, "6 matches; the first 2 are listed") {
		t.Errorf("capped glob: %+v", r.action)
	}
	if r := post(t, h, "/", ActionRequest{Command: []string{"glob", "../*"}}); r.status != 403 {
		t.Errorf("glob out: %d %+v", r.status, r.action)
	}
	writePage(t, root, "data/g.md", "---\ntools:\n  - [glob, {}]\n---\n")
	if r := post(t, h, "/data/g", ActionRequest{Command: []string{"glob", "*.csv"}}); r.action.Stdout != "cities.csv\n" {
		t.Errorf("glob from a nested page: %+v", r.action)
	}
}

// TestWatchMode: an edited page's tools apply on the next request.
func TestWatchMode(t *testing.T) {
	s, root := exampleSite(t, nil)
	writePage(t, root, "w.md", "---\ntools:\n  - [echo, one]\n---\n")
	h := serve(s)
	if r := post(t, h, "/w", ActionRequest{Command: []string{"echo", "one"}}); r.status != 200 {
		t.Fatalf("%d %+v", r.status, r.action)
	}
	writePage(t, root, "w.md", "---\ntools:\n  - [echo, two, \";\"]\n---\n")
	future := time.Now().Add(2 * time.Second) // a new mtime even on coarse clocks
	os.Chtimes(filepath.Join(root, "w.md"), future, future)
	if r := post(t, h, "/w", ActionRequest{Command: []string{"echo", "one"}}); r.status != 403 {
		t.Errorf("the old tool still runs: %d", r.status)
	}
	if r := post(t, h, "/w", ActionRequest{Command: []string{"echo", "two"}}); r.status != 200 || r.action.Stdout != "two\n" {
		t.Errorf("the new tool: %d %+v", r.status, r.action)
	}
}

func TestNewNeedsREADME(t *testing.T) {
	dir := t.TempDir()
	ws, _ := fsops.NewDir(dir, fsops.Options{})
	defer ws.Close()
	exe, _ := sandbox.New(sandbox.Config{Mode: sandbox.ModeNone, WorkspaceRoot: ws.Root()})
	defer exe.Close()
	if _, err := New(Options{Workspace: ws, Executor: exe}); err == nil || !strings.Contains(err.Error(), "has no README.md") {
		t.Errorf("New without README.md: %v", err)
	}
}

// TestCurl: the builtin goes through the network door: a refused address
// is 403 (the server never sees the request), an allowed one answers, a
// dead one is 502, and only -X, -H and -d are taken.
func TestCurl(t *testing.T) {
	hits := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hits <- r.Method + " " + r.Header.Get("X-Test") + " " + string(b)
		w.Write([]byte("from the server"))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	allowed := netguard.New(netguard.Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, AllowPorts: []uint16{uint16(port)}})
	defer allowed.CloseIdleConnections()
	for _, tc := range []struct {
		name   string
		net    *netguard.Client
		argv   []string
		status int
		want   string
	}{
		{"refused loopback", nil, []string{"curl", srv.URL}, 403, "security: refused"},
		{"refused metadata", nil, []string{"curl", "http://169.254.169.254/latest/meta-data/"}, 403, "prohibited IP"},
		{"allowed", allowed, []string{"curl", "-X", "PUT", "-H", "X-Test: yes", "-d", "payload", srv.URL}, 200, "from the server"},
		{"unsupported flag", allowed, []string{"curl", "-o", "out", srv.URL}, 400, "-o is not supported"},
		{"no URL", allowed, []string{"curl", "-X", "GET"}, 400, "no URL"},
		{"network error", netguard.New(netguard.Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, AllowPorts: []uint16{1}}), []string{"curl", "http://127.0.0.1:1/"}, 502, "curl:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, root := exampleSite(t, func(o *Options) { o.Net = tc.net })
			writePage(t, root, "net.md", "---\ntools:\n  - [curl]\n---\n")
			r := post(t, serve(s), "/net", ActionRequest{Command: tc.argv})
			if r.status != tc.status || !strings.Contains(r.action.Stdout+r.action.Stderr, tc.want) {
				t.Fatalf("%d %+v; want %d containing %q", r.status, r.action, tc.status, tc.want)
			}
		})
	}
	select {
	case h := <-hits:
		if h != "PUT yes payload" {
			t.Errorf("the allowed request arrived as %q", h)
		}
	default:
		t.Error("the allowed request never arrived")
	}
	if len(hits) != 0 {
		t.Errorf("a refused request reached the server: %q", <-hits)
	}
}

// TestComponents: ```component blocks run (validated like a POST) when the
// page is read and are replaced by their output or an [eval error: ...];
// other fences stay as written.
func TestComponents(t *testing.T) {
	// The timeout leaves a loaded machine time for the quick components;
	// the sleep outlives it.
	s, root := exampleSite(t, func(o *Options) { o.ComponentTimeout = 2 * time.Second })
	page := "---\ntools:\n  - [echo, {}]\n  - [ls, {}]\n  - [sleep, {}]\n---\n# Report\n\n" +
		"```component\necho counted 42\n```\n\n" +
		"```sh\necho not a component\n```\n\n" +
		"```component\nls no-such-file\n```\n\n" +
		"```component\nrm -rf data\n```\n\n" +
		"```component\necho a | wc\n```\n\n" +
		"```component\nsleep 30\n```\nend\n"
	writePage(t, root, "report.md", page)
	r := do(t, serve(s), "GET", "/report", "")
	for _, want := range []string{
		"# Report\n\ncounted 42\n\n",
		"```sh\necho not a component\n```",
		"[eval error: exit 2 — ls: cannot access 'no-such-file': No such file or directory]",
		"[eval error: command not allowed by /report.md",
		"[eval error: '|': component commands run without a shell",
		"[eval error: timed out after 2s]\nend\n",
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("page lacks %q:\n%s", want, r.body)
		}
	}
	if strings.Contains(r.body, "```component") {
		t.Errorf("a component block was left in:\n%s", r.body)
	}
	// The bound on blocks, on a site with the default component timeout:
	// at 300 ms a loaded machine timed one of the 20 echoes out.
	many := strings.Builder{}
	many.WriteString("---\ntools:\n  - [echo, {}]\n---\n")
	for i := range MaxComponents + 2 {
		fmt.Fprintf(&many, "```component\necho block%d\n```\n", i)
	}
	ms, mroot := exampleSite(t, nil)
	writePage(t, mroot, "many.md", many.String())
	r = do(t, serve(ms), "GET", "/many", "")
	if !strings.Contains(r.body, fmt.Sprintf("block%d\n", MaxComponents-1)) || strings.Contains(r.body, fmt.Sprintf("block%d\n", MaxComponents)) ||
		strings.Count(r.body, "more than 20 component blocks") != 2 {
		t.Errorf("more than %d blocks:\n%s", MaxComponents, r.body)
	}
}

// TestAgentFilesAndOverview: AGENTS.md and index.html are written when
// missing and never overwritten; a browser's GET / shows the README
// rendered (escaped, no script links) and every page with its tools.
func TestAgentFilesAndOverview(t *testing.T) {
	s, root := exampleSite(t, nil)
	for _, f := range []string{"AGENTS.md", "index.html"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil || !strings.Contains(string(b), "Using this tool site") {
			t.Errorf("%s: %v %.80q", f, err, b)
		}
	}
	writePage(t, root, "AGENTS.md", "custom rules")
	ws, _ := fsops.NewDir(root, fsops.Options{})
	defer ws.Close()
	exe, _ := sandbox.New(sandbox.Config{Mode: sandbox.ModeNone, WorkspaceRoot: ws.Root()})
	defer exe.Close()
	if _, err := New(Options{Workspace: ws, Executor: exe}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "AGENTS.md")); string(b) != "custom rules" {
		t.Errorf("AGENTS.md overwritten: %q", b)
	}
	writePage(t, root, "README.md", "---\ntools:\n  - [ls]\n---\n# Title <script>\n\n[evil](javascript:alert(1)) [ok](guide.md)\n")
	req := httptest.NewRequest("GET", "http://site/", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	rec := httptest.NewRecorder()
	serve(s).ServeHTTP(rec, req)
	body := rec.Body.String()
	for _, want := range []string{"<h1>Title &lt;script&gt;</h1>", `<a href="guide.md">ok</a>`, `<a href="/data/README.md">data/README.md</a>`,
		"<code>[&#34;head&#34;, &#34;-n&#34;", "text/html"} {
		if !strings.Contains(body+rec.Header().Get("Content-Type"), want) {
			t.Errorf("overview lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "javascript:") || strings.Contains(body, "<script>") {
		t.Errorf("overview carries script:\n%s", body)
	}
	if r := do(t, serve(s), "GET", "/", ""); !strings.HasPrefix(r.ctype, "text/markdown") {
		t.Errorf("an agent's GET / (no text/html in Accept): %s", r.ctype)
	}
}

// TestExampleAgentFiles: the example site carries the AGENTS.md and
// index.html a first serve writes, so serving it leaves a checkout clean.
func TestExampleAgentFiles(t *testing.T) {
	for name, want := range map[string]string{"AGENTS.md": AgentsMD, "index.html": indexHTML(AgentsMD)} {
		got, err := os.ReadFile(filepath.Join("../../examples/site", name))
		if err != nil || string(got) != want {
			t.Errorf("examples/site/%s differs from what New writes (delete it and run `agent-backend site serve examples/site` once): %v", name, err)
		}
	}
}

// TestEnvCannotWidenTheAllowedCommands: a page that allows only
// `git status` must not run anything else, whatever env the request sets.
// GIT_CONFIG_* makes git run core.fsmonitor as a command; that and every
// other variable that makes programs run code (sandbox.EnvRunsCode) is
// refused before anything runs.
func TestEnvCannotWidenTheAllowedCommands(t *testing.T) {
	testenv.Command(t, "git", "git")
	s, root := exampleSite(t, nil)
	os.Mkdir(filepath.Join(root, "repo"), 0o755)
	writePage(t, root, "repo/README.md", "---\ntools:\n  - [git, status]\n---\n# repo\n")
	if out, err := exec.Command("git", "init", "-q", filepath.Join(root, "repo")).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	h := serve(s)
	for _, env := range []map[string]string{
		{"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": "touch pwned; false"},
		{"git_config_count": "1"},
		{"XDG_CONFIG_HOME": "."},
		{"PAGER": "touch pwned"},
		{"NODE_OPTIONS": "--require ./x.js"},
	} {
		r := post(t, h, "/repo/README.md", ActionRequest{Command: []string{"git", "status"}, Env: env})
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, "can make the command run other code") {
			t.Errorf("env %v: %d %s", env, r.status, r.body)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "repo", "pwned")); err == nil {
		t.Fatal("the request's env ran a command the page does not allow")
	}
	if r := post(t, h, "/repo/README.md", ActionRequest{Command: []string{"git", "status"}, Env: map[string]string{"TZ": "UTC"}}); r.status != http.StatusOK {
		t.Fatalf("an ordinary variable: %d %s", r.status, r.body)
	}
}

// TestOptionValuePaths: an argument whose option value is an absolute path
// or climbs (--output=/x, -o/x, --dir=../x) is refused like a bare one.
func TestOptionValuePaths(t *testing.T) {
	s, root := exampleSite(t, nil)
	os.Mkdir(filepath.Join(root, "opts"), 0o755)
	writePage(t, root, "opts/README.md", "---\ntools:\n  - [sort, {}]\n  - [sort, {}, {}]\n---\n# opts\n")
	h := serve(s)
	for _, arg := range []string{"--output=/tmp/x", "-o/tmp/x", "--dir=../x", "/etc/passwd", "a/../../b", "--include-dir=/usr", "-rkn/x"} {
		r := post(t, h, "/opts/README.md", ActionRequest{Command: []string{"sort", arg, "README.md"}})
		if r.status != http.StatusForbidden {
			t.Errorf("%q: %d %s", arg, r.status, r.body)
		}
	}
	if r := post(t, h, "/opts/README.md", ActionRequest{Command: []string{"sort", "-r", "README.md"}}); r.status != http.StatusOK {
		t.Errorf("an ordinary option: %d %s", r.status, r.body)
	}
}

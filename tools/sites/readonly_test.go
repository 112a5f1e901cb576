package sites

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// bareSite is a site of README.md and guide.md, without AGENTS.md and
// index.html, in a new directory; more pages by name and body.
func bareSite(t *testing.T, pages map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "site")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	all := map[string]string{"README.md": "---\ntools:\n  - [ls]\n  - [glob, {}]\n---\n# site\n", "guide.md": "# guide\n"}
	for k, v := range pages {
		all[k] = v
	}
	for name, body := range all {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// openSite serves the site in dir, as sites.New does at a start, with
// ws wrapped by wrap when it is not nil; it returns the Site or New's
// error, and the log.
func openSite(t *testing.T, dir string, wrap func(fsops.Workspace) fsops.Workspace, mod func(*Options)) (*Site, *syncbuf.Buffer, error) {
	t.Helper()
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
	logs := &syncbuf.Buffer{}
	opts := Options{Workspace: ws, Executor: exe, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	if wrap != nil {
		opts.Workspace = wrap(ws)
	}
	if mod != nil {
		mod(&opts)
	}
	s, err := New(opts)
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, logs, err
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// checkAgentFilesServed: the site answers GET /AGENTS.md, /AGENTS and
// /index.html with the daemon's own files, lists AGENTS.md in its
// overview, and a POST to it is the 400 of a page without tools.
func checkAgentFilesServed(t *testing.T, s *Site) {
	t.Helper()
	h := serve(s)
	for _, p := range []string{"/AGENTS.md", "/AGENTS"} {
		if r := do(t, h, http.MethodGet, p, ""); r.status != http.StatusOK || r.body != AgentsMD || !strings.HasPrefix(r.ctype, "text/markdown") {
			t.Errorf("GET %s: %d %s %.60q", p, r.status, r.ctype, r.body)
		}
	}
	if r := do(t, h, http.MethodGet, "/index.html", ""); r.status != http.StatusOK || r.body != indexHTML(AgentsMD) || !strings.HasPrefix(r.ctype, "text/html") {
		t.Errorf("GET /index.html: %d %s %.60q", r.status, r.ctype, r.body)
	}
	if r := post(t, h, "/AGENTS.md", ActionRequest{Command: []string{"ls"}}); r.status != http.StatusBadRequest || !strings.Contains(r.action.Stderr, "declares no tools") {
		t.Errorf("POST /AGENTS.md: %d %+v", r.status, r.action)
	}
	if got := s.pageList(context.Background()); !slices.Contains(got, "AGENTS.md") {
		t.Errorf("the overview's pages: %v, want AGENTS.md among them", got)
	}
}

// TestReadOnlySiteServesAgentFilesFromMemory: a site whose directory
// cannot be written (a read-only mount as root, a-w otherwise) and lacks
// AGENTS.md and index.html starts, leaves the directory as it is, and
// serves both from memory as it would serve them written; one line of the
// log says so and why.
func TestReadOnlySiteServesAgentFilesFromMemory(t *testing.T) {
	dir := bareSite(t, nil)
	testenv.ReadOnlyDir(t, dir)
	s, logs, err := openSite(t, dir, nil, nil)
	if err != nil {
		t.Fatalf("New on a read-only site: %v", err)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{"README.md", "guide.md"}) {
		t.Errorf("the read-only directory holds %v", got)
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "serving the missing agent files from memory") || !strings.Contains(logs.String(), "cannot be written") {
		t.Errorf("the log at start (%d lines), want one that says the files are served from memory and why:\n%s", n, logs)
	}
	checkAgentFilesServed(t, s)
}

// TestWritableSiteGetsAgentFilesWritten: a site that can be written gets
// AGENTS.md and index.html written, and an existing one is not touched.
func TestWritableSiteGetsAgentFilesWritten(t *testing.T) {
	dir := bareSite(t, map[string]string{"AGENTS.md": "the site's own rules\n"})
	s, logs, err := openSite(t, dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "index.html")); err != nil || string(b) != indexHTML(AgentsMD) {
		t.Errorf("index.html written: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "AGENTS.md")); err != nil || string(b) != "the site's own rules\n" {
		t.Errorf("the site's own AGENTS.md: %q %v", b, err)
	}
	if len(s.mem) != 0 || !strings.Contains(logs.String(), "wrote the missing agent files") || !strings.Contains(logs.String(), "written=[index.html]") {
		t.Errorf("from memory: %v; log:\n%s", s.mem, logs)
	}
	// --no-init: nothing written, nothing served.
	dir = bareSite(t, nil)
	s, logs, err = openSite(t, dir, nil, func(o *Options) { o.NoAgentFiles = true })
	if err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{"README.md", "guide.md"}) || len(s.mem) != 0 || !strings.Contains(logs.String(), "neither written nor served") {
		t.Errorf("NoAgentFiles: %v %v\n%s", got, s.mem, logs)
	}
	if r := do(t, serve(s), http.MethodGet, "/AGENTS.md", ""); r.status != http.StatusNotFound {
		t.Errorf("GET /AGENTS.md with NoAgentFiles: %d", r.status)
	}
}

// failingWrites is a workspace whose write of one file fails with err.
type failingWrites struct {
	fsops.Workspace
	name string
	err  error
}

func (f failingWrites) WriteFile(p string, data []byte) error {
	if p == f.name {
		return f.err
	}
	return f.Workspace.WriteFile(p, data)
}

// TestAgentFilesAllOrNone: when index.html cannot be written after
// AGENTS.md was, AGENTS.md is removed again: a directory that refuses the
// write (permission) gets both served from memory, and any other failure
// (a full disk) stops the start, leaving the directory as it was.
func TestAgentFilesAllOrNone(t *testing.T) {
	for _, tc := range []struct {
		code   errcode.Code
		starts bool
	}{{errcode.PermissionDenied, true}, {errcode.WriteFailed, false}} {
		dir := bareSite(t, nil)
		fail := &errcode.Error{Code: tc.code, Op: "write", Path: "index.html", Msg: "refused by the test"}
		s, logs, err := openSite(t, dir, func(ws fsops.Workspace) fsops.Workspace { return failingWrites{ws, "index.html", fail} }, nil)
		if got := dirNames(t, dir); !slices.Equal(got, []string{"README.md", "guide.md"}) {
			t.Errorf("%s: the directory holds %v, want it as it was", tc.code, got)
		}
		if !tc.starts {
			if err == nil || !strings.Contains(err.Error(), "writing index.html") {
				t.Errorf("%s: New: %v, want the write's error", tc.code, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: New: %v", tc.code, err)
		}
		if len(s.mem) != 2 || !strings.Contains(logs.String(), "from memory") {
			t.Errorf("%s: from memory: %v\n%s", tc.code, s.mem, logs)
		}
		checkAgentFilesServed(t, s)
	}
}

// TestConfigMapSiteAgentFiles: a site mounted from a ConfigMap that holds
// no AGENTS.md gets none written into the volume, which only the kubelet
// writes (even where the test's volume could be), and serves both from
// memory; mounted read-only as the kubelet mounts it, the same.
func TestConfigMapSiteAgentFiles(t *testing.T) {
	for _, ro := range []bool{false, true} {
		vol := filepath.Join(t.TempDir(), "site")
		testenv.ConfigMapVolume(t, vol, map[string]string{"README.md": "---\ntools:\n  - [ls]\n---\n# site\n", "guide.md": "# guide\n"})
		if ro {
			testenv.ReadOnlyDir(t, vol)
		}
		s, logs, err := openSite(t, vol, nil, nil)
		if err != nil {
			t.Fatalf("read-only %v: %v", ro, err)
		}
		for _, name := range []string{"AGENTS.md", "index.html"} {
			if _, err := os.Lstat(filepath.Join(vol, name)); !os.IsNotExist(err) {
				t.Errorf("read-only %v: %s in the volume: %v", ro, name, err)
			}
		}
		if !strings.Contains(logs.String(), "from memory") || !strings.Contains(logs.String(), "..data") {
			t.Errorf("read-only %v: log:\n%s", ro, logs)
		}
		checkAgentFilesServed(t, s)
	}
}

// TestConfigMapSiteGlob: glob on a page of a site mounted from a
// ConfigMap lists each file once, by its own name, not again under the
// kubelet's ..data and timestamped directories, as the overview does;
// the files are still read through them.
func TestConfigMapSiteGlob(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "site")
	testenv.ConfigMapVolume(t, vol, map[string]string{
		"README.md": "---\ntools:\n  - [glob, {}]\n---\n# site\n", "guide.md": "# guide\n", "cities.csv": "a,b\n",
	})
	s, _, err := openSite(t, vol, nil, func(o *Options) { o.NoAgentFiles = true })
	if err != nil {
		t.Fatal(err)
	}
	if page, data, err := s.Read("/..data/guide.md"); err != nil || page != "..data/guide.md" || string(data) != "# guide\n" {
		t.Errorf("/..data/guide.md, the same file as /guide.md: %s %q %v", page, data, err)
	}
	for pattern, want := range map[string]string{
		"**":      "README.md\ncities.csv\nguide.md\n",
		"*.md":    "README.md\nguide.md\n",
		"**/*.md": "README.md\nguide.md\n",
	} {
		res, err := s.Run(context.Background(), "README.md", ActionRequest{Command: []string{"glob", pattern}})
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Split(strings.TrimSpace(res.Stdout), "\n")
		slices.Sort(got)
		if strings.Join(got, "\n")+"\n" != want || res.Stderr != "" {
			t.Errorf("glob %s: %q %q; want %q", pattern, res.Stdout, res.Stderr, want)
		}
	}
}

// TestOverviewJudgesEachRequest: the overview judges its pages with one
// judge per request; a directory that its group or others may write
// since the last request is refused on the next: its pages show the
// refusal instead of their tools, and show them again once it is put
// right.
func TestOverviewJudgesEachRequest(t *testing.T) {
	dir := bareSite(t, map[string]string{"area/a.md": "---\ntools:\n  - [wc, -l, {}]\n---\n# a\n", "area/b.md": "---\ntools:\n  - [date]\n---\n# b\n"})
	s, _, err := openSite(t, dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := serve(s)
	overview := func() string {
		req := httptest.NewRequest(http.MethodGet, "http://site/", nil)
		req.Header.Set("Accept", "text/html")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /: %d %s", rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	const refused = "another user than the operator could change this page"
	if b := overview(); !strings.Contains(b, "&#34;wc&#34;") || !strings.Contains(b, "&#34;date&#34;") || strings.Contains(b, refused) {
		t.Fatalf("the overview before:\n%s", b)
	}
	area := filepath.Join(dir, "area")
	if err := os.Chmod(area, 0o777); err != nil {
		t.Fatal(err)
	}
	b := overview()
	if strings.Count(b, refused) != 2 || strings.Contains(b, "&#34;wc&#34;") || !strings.Contains(b, "&#34;ls&#34;") {
		t.Fatalf("the overview with %s writable by others: want area's two pages refused, README.md's tools listed:\n%s", area, b)
	}
	if err := os.Chmod(area, 0o755); err != nil {
		t.Fatal(err)
	}
	if b := overview(); !strings.Contains(b, "&#34;date&#34;") || strings.Contains(b, refused) {
		t.Fatalf("the overview put right:\n%s", b)
	}
}

//go:build starlarkmcp

package extensions

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// TestPublishedStarlarkMCPExtensions runs starlark-mcp's own published
// extensions and test files, unchanged, from the directory
// STARLARK_MCP_EXTENSIONS names (the extensions/ folder of a checkout of
// github.com/connyay/starlark-mcp; they are not part of this repository,
// and no module proxy serves them, so the test is built only with the
// starlarkmcp tag, which asks for it):
//
//	STARLARK_MCP_EXTENSIONS=$HOME/src/starlark-mcp/extensions go test -tags starlarkmcp -run TestPublishedStarlarkMCPExtensions ./tools/extensions/
//
// The tests of starlarkmcp_test.go hold the same behaviour with this
// repository's own extensions written in their style, and run always.
func TestPublishedStarlarkMCPExtensions(t *testing.T) {
	src := os.Getenv("STARLARK_MCP_EXTENSIONS")
	if src == "" {
		t.Fatal("the starlarkmcp tag asks for this test: set STARLARK_MCP_EXTENSIONS to the extensions/ folder of a starlark-mcp checkout")
	}
	dir := t.TempDir()
	for _, name := range []string{"cat_facts.star", "cat_facts_test.star", "test_extension.star", "test_extension_test.star", "testing_test.star",
		"sqlite.star", "postgres.star", "plane.star", "docker.star", "github.star", "kubectl.star"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		write(t, dir, name, string(b))
	}

	// Their test files pass under ext test.
	var out strings.Builder
	ok, err := RunTests(context.Background(), TestOptions{Dir: dir, Out: &out, Verbose: true})
	if err != nil || !ok {
		t.Errorf("ext test: ok=%v err=%v\n%s", ok, err, out.String())
	}

	// A stand-in for Plane's API on loopback, which the door admits
	// explicitly.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != "plane-key" || r.URL.Path != "/api/v1/workspaces/acme/projects/" {
			http.Error(w, `{"detail":"not found"}`, 404)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"results":[{"id":"p1","name":"Website","identifier":"WEB","description":"The site"}]}`))
	}))
	defer api.Close()
	u, _ := url.Parse(api.URL)
	apiPort, _ := strconv.Atoi(u.Port())
	pgPort, pgPassword := startPostgres(t)
	vars := map[string]string{
		"PLANE_API_KEY": "plane-key", "PLANE_WORKSPACE_SLUG": "acme", "PLANE_BASE_URL": api.URL,
		"POSTGRES_HOST": "127.0.0.1", "POSTGRES_PORT": strconv.Itoa(pgPort), "POSTGRES_PASSWORD": pgPassword,
	}
	emptyPath := t.TempDir()
	f := startIn(t, dir, func(o *Options) {
		o.Getenv = func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
		o.EnvAllow = []string{"PLANE_*", "POSTGRES_*"}
		o.DBHosts = []string{"127.0.0.1"}
		loop := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		o.Net = netguard.New(netguard.Options{AllowPrefixes: loop, AllowPorts: []uint16{uint16(apiPort)}})
		o.PostgresNet = netguard.New(netguard.Options{AllowPrefixes: loop, AllowPorts: []uint16{uint16(pgPort)}})
		exe, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: o.Workspace.Root(), Env: map[string]string{"PATH": emptyPath + ":/usr/bin:/bin"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { exe.Close() })
		o.Executor = exe
	})
	for _, h := range f.p.Health() {
		if h.State != "ready" {
			t.Errorf("%s: %s %s", h.File, h.State, h.LastError)
		}
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(f.ws.Root(), "shop.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL DEFAULT 'x'); INSERT INTO items (name) VALUES ('pen'), ('ink')"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	for _, tc := range []struct {
		tool, args, want string
		isErr            bool
	}{
		{"cat_facts__get_cat_fact", `{}`, "cat", false}, // compared in lower case: one of its facts
		{"test_extension__test_tool", `{"message":"hi"}`, "hi", false},
		{"test_extension__structured_response_tool", `{"name":"Ann","count":2}`, "Greeting: Hello, Ann!\nItems: item_0, item_1", false},
		{"sqlite_explorer__sqlite_list_tables", `{"db_path":"shop.db"}`, "Found 1 tables:\n  - items\n", false},
		{"sqlite_explorer__sqlite_describe_table", `{"db_path":"shop.db","table":"items"}`, "DEFAULT 'x'", false},
		{"sqlite_explorer__sqlite_query", `{"db_path":"shop.db","query":"SELECT name FROM items ORDER BY id"}`, `[{"name":"pen"},{"name":"ink"}]`, false},
		{"sqlite_explorer__sqlite_analyze", `{"db_path":"shop.db"}`, "Database integrity: ✓ OK", false},
		{"sqlite_explorer__sqlite_sample_data", `{"db_path":"shop.db","table":"items"}`, `"name":"ink"`, false},
		{"postgres__postgres_execute_sql", `{"sql":"CREATE TABLE t (id int, note text DEFAULT 'n')"}`, "Affected rows: 0", false},
		{"postgres__postgres_execute_sql", `{"sql":"INSERT INTO t VALUES ($1), ($2)","params":[1,2]}`, "Affected rows: 2", false},
		{"postgres__postgres_list_tables", `{}`, "📋 t", false},
		{"postgres__postgres_describe_table", `{"table_name":"t"}`, "Default: 'n'::text", false},
		{"postgres__postgres_list_databases", `{}`, "postgres", false},
		{"plane__plane_list_projects", `{}`, "Website (WEB)", false},
		{"docker__docker_list_containers", `{}`, "Error: Failed to list containers: ", true},
		{"kubectl__k8s_cluster_info", `{}`, "Error: Failed to get cluster info: ", true},
		{"github__github_pr_review_comments", `{"repo":"a/b","pr_number":"1"}`, "Error: Failed to fetch PR comments: ", true},
	} {
		txt, isErr, _ := f.call(t, tc.tool, tc.args)
		got := txt
		if tc.tool == "cat_facts__get_cat_fact" {
			got = strings.ToLower(txt)
		}
		if isErr != tc.isErr || !strings.Contains(got, tc.want) {
			t.Errorf("%s %s: %q isError=%v; want %q isError=%v", tc.tool, tc.args, txt, isErr, tc.want, tc.isErr)
		}
	}
}

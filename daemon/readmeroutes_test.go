package daemon

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestReadmeEndpointsTable: the endpoint table of README.md ("One port")
// names every route the daemon can serve, and nothing else: each path of
// its first column (`GET /tools`, `POST /approvals/{id}`, `/preview/{port}/…`,
// read up to its first "{") is a route of parts, and each route of parts
// but the catch-all "/" is named. docs/architecture.md's route table, which
// TestRouteTable holds, is the full account; this keeps the README's short
// one from naming a route the daemon lost or missing one it gained.
func TestReadmeEndpointsTable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const header = "| endpoint | what |"
	lines := strings.Split(string(b), "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) == header })
	if start < 0 {
		t.Fatalf("README.md has no table headed %q", header)
	}
	code := map[string]bool{}
	for _, r := range allRoutes(parts) {
		code[r.pattern] = true
	}
	span := regexp.MustCompile("`([^`]*)`")
	named := map[string]bool{}
	for i := start + 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		first := strings.SplitN(strings.TrimPrefix(lines[i], "|"), "|", 2)[0]
		spans := span.FindAllStringSubmatch(first, -1)
		if len(spans) == 0 {
			t.Errorf("README.md:%d: an endpoint row names its paths in backticks", i+1)
		}
		for _, m := range spans {
			path := m[1]
			if j := strings.IndexByte(path, '/'); j >= 0 {
				path = path[j:] // drop the methods
			}
			if j := strings.IndexByte(path, '{'); j >= 0 {
				path = path[:j] // /site/{path} is the route /site/
			}
			switch {
			case code[path]:
				named[path] = true
			case code[path+"/"]:
				named[path+"/"] = true
			default:
				t.Errorf("README.md:%d names %s, which the daemon does not serve (daemon/parts.go)", i+1, m[1])
			}
		}
	}
	for p := range code {
		if p == routeOtherwise || named[p] {
			continue
		}
		// /approvals and /approvals/ are one endpoint's list and items.
		if q, ok := strings.CutSuffix(p, "/"); ok && named[q] {
			continue
		}
		t.Errorf("the daemon serves %s (daemon/parts.go), which README.md's endpoint table does not name", p)
	}
	if len(named) < 8 {
		t.Fatalf("README.md's endpoint table names only %d routes; the pattern no longer matches its rows", len(named))
	}
}

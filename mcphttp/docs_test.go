package mcphttp

import (
	"context"
	"os"
	"sort"
	"strings"
	"testing"
)

// TestDocsListEveryTool keeps docs/mcp.md in step with the code: every tool a
// Server registers (over a directory workspace with an executor, the fullest
// tool set) must be named in the docs as `name`.
func TestDocsListEveryTool(t *testing.T) {
	doc, err := os.ReadFile("../docs/mcp.md")
	if err != nil {
		t.Fatalf("reading the MCP docs: %v", err)
	}
	e := newEnvAt(t, t.TempDir())

	// The tools as a client sees them, and as the Server registered them.
	res, err := e.connect(t, nil).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	var registered []string
	for name := range e.srv.tools {
		registered = append(registered, name)
	}
	sort.Strings(names)
	sort.Strings(registered)
	if strings.Join(names, ",") != strings.Join(registered, ",") {
		t.Fatalf("tools/list %v differs from the registered tools %v", names, registered)
	}
	for _, want := range []string{"exec", "grep", "read_text_file"} {
		if _, ok := e.srv.tools[want]; !ok {
			t.Fatalf("tool %q is not registered; the test needs the full tool set", want)
		}
	}

	for _, name := range names {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/mcp.md does not mention the tool `%s`; document it", name)
		}
	}
}

package mcphttp

import (
	"context"
	"os"
	"sort"
	"strings"
	"testing"
)

// TestDocsListEveryTool keeps the docs in step with the code: every tool a
// Server registers (over a directory workspace with an executor, the fullest
// tool set) must be named as `name` in docs/mcp.md (the tool reference) and
// in docs/protocol.md (the wire contract).
func TestDocsListEveryTool(t *testing.T) {
	docs := []string{"../../docs/mcp.md", "../../docs/protocol.md"}
	texts := make([]string, len(docs))
	for i, path := range docs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		texts[i] = string(b)
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
	for _, tl := range e.srv.reg.List() {
		name := tl.Name
		registered = append(registered, name)
	}
	sort.Strings(names)
	sort.Strings(registered)
	if strings.Join(names, ",") != strings.Join(registered, ",") {
		t.Fatalf("tools/list %v differs from the registered tools %v", names, registered)
	}
	for _, want := range []string{"exec", "grep", "read_text_file"} {
		if _, ok := e.srv.reg.Lookup(want); !ok {
			t.Fatalf("tool %q is not registered; the test needs the full tool set", want)
		}
	}

	for i, path := range docs {
		for _, name := range names {
			if !strings.Contains(texts[i], "`"+name+"`") {
				t.Errorf("%s does not mention the tool `%s`; document it", strings.TrimPrefix(path, "../../"), name)
			}
		}
	}
}

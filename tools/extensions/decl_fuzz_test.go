package extensions

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// FuzzDeclarations: an extension file whose describe_extension() declares
// any names, parameter, type and default is refused with a LoadError
// naming the file, or taken with declarations the registry takes too:
// each tool's name as served (extension__tool) and its input schema.
func FuzzDeclarations(f *testing.F) {
	f.Add("echo", "say", "text", "string", `"hi"`, "printf")
	f.Add("calc", "add", "b", "integer", "5", "cat")
	f.Add(strings.Repeat("e", 32), strings.Repeat("t", 32), "x", "number", "1.5", "cat")
	f.Add("a__b", "t", "", "bool", "True", "")
	f.Add("x", "t", "p", "array", "[1, 2]", "/bin/sh")
	f.Add("x", "t", "p", "object", `{"a": 1}`, "a b")
	f.Add("x", "t", "p", "vm", "None", "")
	dir := f.TempDir()
	p, err := newProvider(Options{Dir: dir})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, ext, tool, param, typ, def, exe string) {
		if strings.ContainsAny(def, "\n\r\\") || len(def) > 64 {
			return // the default is source text: one short literal
		}
		src := fmt.Sprintf(`def handler(args):
    return "ok"

def describe_extension():
    return Extension(name = %q, version = "1", allowed_exec = [%q],
        tools = [Tool(name = %q, description = "d", handler = handler,
            parameters = [ToolParameter(name = %q, param_type = %q, default = %s)])])
`, ext, exe, tool, param, typ, def)
		if err := os.WriteFile(filepath.Join(dir, "x.star"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		e, err := p.loadFile("x.star")
		if err != nil {
			var le *LoadError
			if !errors.As(err, &le) || le.File != "x.star" {
				t.Fatalf("error %v is not a LoadError naming the file", err)
			}
			return
		}
		if !validName(e.Name) || strings.Contains(e.Name, "__") {
			t.Fatalf("extension name %q taken", e.Name)
		}
		for _, c := range e.AllowedExec {
			if c == "" || strings.ContainsAny(c, "/\\ ") {
				t.Fatalf("allowed_exec %q taken", c)
			}
		}
		for _, tl := range e.Tools {
			if err := registry.ValidName(e.Name + "__" + tl.Name); err != nil {
				t.Fatalf("tool %q of %q taken, which the registry refuses: %v", tl.Name, e.Name, err)
			}
			if err := registry.ValidInputSchema(tl.schema()); err != nil {
				t.Fatalf("tool %q: its schema %v, which the registry refuses: %v", tl.Name, tl.schema(), err)
			}
		}
	})
}

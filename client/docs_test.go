package client

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocsListOptionsFields: where docs/client.md lists an options
// struct's fields (`LocalOptions{Root, Isolation, ...}`), the list is every
// exported field of that struct, so a field added to an option type cannot
// stay undocumented and a removed one cannot stay in the docs. An empty
// literal (`ExecOptions{}`) is an example, not a list.
func TestDocsListOptionsFields(t *testing.T) {
	types := map[string]reflect.Type{
		"LocalOptions":  reflect.TypeFor[LocalOptions](),
		"MemoryOptions": reflect.TypeFor[MemoryOptions](),
		"RemoteOptions": reflect.TypeFor[RemoteOptions](),
		"ScopeOptions":  reflect.TypeFor[ScopeOptions](),
		"SSHOptions":    reflect.TypeFor[SSHOptions](),
		"PoolOptions":   reflect.TypeFor[PoolOptions[any]](),
		"LogOptions":    reflect.TypeFor[LogOptions](),
	}
	b, err := os.ReadFile("../docs/client.md")
	if err != nil {
		t.Fatal(err)
	}
	list := regexp.MustCompile(`\b([A-Za-z]+Options)(?:\[[A-Za-z]+\])?\{([A-Za-z][A-Za-z, ]*)\}`)
	n := 0
	for i, line := range strings.Split(string(b), "\n") {
		for _, m := range list.FindAllStringSubmatch(line, -1) {
			typ, ok := types[m[1]]
			if !ok {
				t.Errorf("docs/client.md:%d lists the fields of %s, which this test does not know: add it to types", i+1, m[1])
				continue
			}
			n++
			var doc, code []string
			for _, f := range strings.Split(m[2], ",") {
				doc = append(doc, strings.TrimSpace(f))
			}
			for f := range typ.Fields() {
				if f.IsExported() {
					code = append(code, f.Name)
				}
			}
			for _, f := range code {
				if !slices.Contains(doc, f) {
					t.Errorf("docs/client.md:%d: %s has the field %s, which the list leaves out", i+1, m[1], f)
				}
			}
			for _, f := range doc {
				if !slices.Contains(code, f) {
					t.Errorf("docs/client.md:%d: %s has no field %s", i+1, m[1], f)
				}
			}
		}
	}
	if n < 5 {
		t.Fatalf("docs/client.md lists the fields of only %d option types; the pattern no longer matches how it lists them", n)
	}
}

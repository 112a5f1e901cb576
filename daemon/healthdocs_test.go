package daemon

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestDocsNameEveryHealthField: the /health rows of README.md's endpoint
// table and of docs/protocol.md name every field /health can answer (each
// JSON name of healthBody, as `name` or "name"), so a field added to
// /health cannot stay undocumented.
func TestDocsNameEveryHealthField(t *testing.T) {
	var fields []string
	for f := range reflect.TypeFor[healthBody]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			t.Fatalf("healthBody.%s has no JSON name", f.Name)
		}
		fields = append(fields, name)
	}
	if len(fields) < 10 {
		t.Fatalf("healthBody has only %d fields; the test reads the wrong type", len(fields))
	}
	for _, doc := range []struct{ path, row string }{
		{"../README.md", "| `GET /health` |"},
		{"../docs/protocol.md", "| `GET /health` (or `HEAD`) |"},
	} {
		b, err := os.ReadFile(doc.path)
		if err != nil {
			t.Fatal(err)
		}
		var row string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, doc.row) {
				row = l
			}
		}
		if row == "" {
			t.Errorf("%s has no row starting %q", doc.path, doc.row)
			continue
		}
		for _, f := range fields {
			if !strings.Contains(row, "`"+f+"`") && !strings.Contains(row, `"`+f+`"`) {
				t.Errorf("%s: the /health row does not name %q (healthBody, daemon/daemon.go)", strings.TrimPrefix(doc.path, "../"), f)
			}
		}
	}
}

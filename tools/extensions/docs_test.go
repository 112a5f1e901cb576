package extensions

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestDocsNameEveryModuleFunction: docs/extensions.md names each function of
// the modules the daemon gives (exec, http, fs, env, sqlite, postgres) and
// of testing, and
// names none that does not exist.
func TestDocsNameEveryModuleFunction(t *testing.T) {
	doc, err := os.ReadFile("../../docs/extensions.md")
	if err != nil {
		t.Fatal(err)
	}
	p, err := newProvider(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	mods := p.predeclared()
	mods["testing"] = testingModule()
	var runtime []string
	for _, name := range []string{"exec", "http", "fs", "env", "sqlite", "postgres", "testing"} {
		for _, fn := range mods[name].(interface{ AttrNames() []string }).AttrNames() {
			runtime = append(runtime, name+"."+fn)
		}
	}
	sort.Strings(runtime)
	for _, f := range runtime {
		if !strings.Contains(string(doc), "`"+f+"(") && !strings.Contains(string(doc), " "+f+"`") && !strings.Contains(string(doc), "`"+f+"`") {
			t.Errorf("docs/extensions.md does not document %s", f)
		}
	}
	documented := regexp.MustCompile("`((?:exec|http|fs|env|sqlite|postgres|testing)\\.[a-z_]+)\\(").FindAllStringSubmatch(string(doc), -1)
	for _, m := range documented {
		found := false
		for _, f := range runtime {
			found = found || f == m[1]
		}
		if !found {
			t.Errorf("docs/extensions.md documents %s, which does not exist", m[1])
		}
	}
}

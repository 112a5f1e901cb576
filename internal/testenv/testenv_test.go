package testenv

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records how a test would have ended.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Fatalf(f string, a ...any) { r.fatal = fmt.Sprintf(f, a...) }
func (r *recorder) Skipf(f string, a ...any)  { r.skip = fmt.Sprintf(f, a...) }
func (r *recorder) ended() (fatal, skip string) {
	return r.fatal, r.skip
}
func (r *recorder) reset()         { r.fatal, r.skip = "", "" }
func (r *recorder) String() string { return "fatal=" + r.fatal + " skip=" + r.skip }
func newRecorder(t *testing.T) *recorder {
	return &recorder{TB: t}
}

func TestInCI(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "true": true, "1": true, "yes": true} {
		t.Setenv("CI", v)
		if got := InCI(); got != want {
			t.Errorf("CI=%q: InCI() = %v, want %v", v, got, want)
		}
	}
}

// TestMissingSkipsLocallyFailsInCI: the one decision this package makes.
func TestMissingSkipsLocallyFailsInCI(t *testing.T) {
	r := newRecorder(t)
	t.Setenv("CI", "")
	Missing(r, "frob is not installed (apt-get install frob)")
	if fatal, skip := r.ended(); fatal != "" || !strings.Contains(skip, "frob is not installed (apt-get install frob)") {
		t.Errorf("outside CI: %s; want a skip naming what is missing", r)
	}
	r.reset()
	t.Setenv("CI", "true")
	Missing(r, "frob is not installed (apt-get install frob)")
	if fatal, skip := r.ended(); skip != "" || !strings.Contains(fatal, "frob is not installed") || !strings.Contains(fatal, "CI=true") {
		t.Errorf("in CI: %s; want a failure naming what is missing and why it fails", r)
	}
}

func TestCommandAndFile(t *testing.T) {
	t.Setenv("CI", "")
	r := newRecorder(t)
	if p := Command(r, "coreutils", "no-such-program-agentbe", "sh"); p == "" || r.skip != "" {
		t.Errorf("Command found %q (%s); want sh's path", p, r)
	}
	r.reset()
	Command(r, "frobnicator", "no-such-program-agentbe", "no-such-either-agentbe")
	if !strings.Contains(r.skip, "none of no-such-program-agentbe or no-such-either-agentbe is installed (apt-get install frobnicator)") {
		t.Errorf("Command of missing programs: %s", r)
	}
	r.reset()
	if p := File(r, "testenv.go", "nothing"); p != "testenv.go" || r.skip != "" {
		t.Errorf("File of an existing file: %q, %s", p, r)
	}
	File(r, "no-such-file", "cd interop && npm ci")
	if !strings.Contains(r.skip, "no-such-file is missing (run: cd interop && npm ci)") {
		t.Errorf("File of a missing file: %s", r)
	}
}

// TestOneHome keeps the decision here: no other test file of the
// repository (its three modules) reads CI itself, where it could skip in CI
// or fail on a developer's machine by its own rule.
func TestOneHome(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	here, _ := filepath.Abs(".")
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || filepath.Dir(path) == here {
			return nil
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), `Getenv("CI")`) || strings.Contains(string(b), `LookupEnv("CI")`) {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s reads CI itself; use internal/testenv (Missing, Command, File)", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("looked at %d Go files; the check saw too little", files)
	}
}

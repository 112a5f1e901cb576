package srcscan

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Errorf was given.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestExceptions: an exception a file used passes; one no file used, or
// given no reason, fails the test, naming the list and the file; a file
// not listed is not allowed, whatever its separators.
func TestExceptions(t *testing.T) {
	e := NewExceptions("otherThings", map[string]string{
		"a/used.go":   "the reason",
		"b/unused.go": "a reason too",
		"c/blank.go":  " ",
	})
	for _, rel := range []string{"a/used.go", "c/blank.go"} {
		if !e.Allows(rel) {
			t.Errorf("Allows(%s) = false for a listed file", rel)
		}
	}
	if e.Allows("d/other.go") || e.Allows("a/used.go.bak") {
		t.Error("Allows is true for a file not listed")
	}
	r := &recorder{TB: t}
	e.Check(r, "does the thing")
	slices.Sort(r.errs)
	want := []string{
		"otherThings lists b/unused.go, which no longer does the thing: drop it",
		"otherThings lists c/blank.go without a reason",
	}
	if !slices.Equal(r.errs, want) {
		t.Errorf("Check reported:\n%s\nwant:\n%s", strings.Join(r.errs, "\n"), strings.Join(want, "\n"))
	}
}

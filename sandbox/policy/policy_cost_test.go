package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// costCases are short commands whose judgement once took seconds to
// minutes of CPU (a security review): symlinks on disk resolved with
// EvalSymlinks per prefix, and the left side of a pipeline re-walked at
// every |. Judged in a workspace holding `s -> .` and a directory d.
var costCases = []struct {
	name, cmd string
	refused   bool // UNSAFE_COMMAND unjudgeable, else accepted
	maxVisits int  // work counted by the judgement, in visits
	maxFS     int  // Lstat/Readlink/Stat calls
}{
	// 8 KB; took 5.5 s (120 KB: 65 s, 34 GB allocated). Deeper than any
	// path the kernel resolves: unjudgeable.
	{"rm-symlink-deep", "rm -rf " + strings.Repeat("s/", 4000) + "*", true, 1000, 0},
	{"rm-symlink-30x", "rm -rf" + strings.Repeat(" "+strings.Repeat("s/", 2000)+"*", 30), true, 3000, 0},
	{"write-symlink-deep", "echo x > " + strings.Repeat("s/", 4000) + "f", true, 1000, 0},
	// More symlinks than the kernel follows (ELOOP): unjudgeable.
	{"rm-symlink-loop", "rm -rf " + strings.Repeat("s/", 200) + "*", true, 200, 10},
	{"write-symlink-loop", "echo x > " + strings.Repeat("s/", 200) + "f", true, 200, 10},
	// Within the kernel's bounds: judged, each component looked up once.
	{"rm-symlink-ok", "rm -rf " + strings.Repeat("s/", 30) + "*", false, 200, 10},
	{"write-symlink-ok", "echo x > " + strings.Repeat("s/", 30) + "f", false, 200, 10},
	// 500 `cd s` took over 20 s: the directory is deeper than the kernel
	// resolves. 300 took 1.1 s.
	{"cd-symlink-500", strings.Repeat("cd s; ", 500), true, 20_000, 10},
	{"cd-symlink-300", strings.Repeat("cd s; ", 300), true, 20_000, 10},
	{"cd-symlink-30", strings.Repeat("cd s; ", 30) + "rm -rf d", false, 3000, 10},
	{"cd-up-down", strings.Repeat("cd d; cd ..; ", 2000), false, 80_000, 10},
	// 28 KB took 3.5 s, 56 KB 17 s: now linear.
	{"pipe-true-4000", strings.Repeat("true | ", 4000) + "true", false, 60_000, 0},
	{"pipe-cat-9000", strings.Repeat("cat | ", 9000) + "cat", false, 130_000, 0},
	{"pipe-true-18000", strings.Repeat("true | ", 18000) + "true", true, maxVisits + 1000, 0},
	{"pipe-curl-sh", "curl -s x | " + strings.Repeat("cat | ", 4000) + "sh", false, 0, 0}, // refused: checked below
	// >(...) asked whether its command downloads, once per substitution.
	{"procsubst-5000", "tee" + strings.Repeat(" >(true)", 5000), false, 100_000, 0},
}

// TestPolicyCostBounded judges each cost case in both modes and asserts on
// the work counted (visits and file system calls), never on the time taken,
// which a loaded machine varies; the judgement's one-minute deadline is the
// hang guard (a case past it is refused, which fails the case). The time is
// logged, for a reader comparing runs.
func TestPolicyCostBounded(t *testing.T) {
	root := t.TempDir()
	if err := os.Symlink(".", filepath.Join(root, "s")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range costCases {
		for _, escapes := range []bool{true, false} {
			p := mustPolicy(t, escapes)
			t0 := time.Now()
			c, err := p.judge(Parse(tc.cmd), nil, root, root, time.Minute)
			took := time.Since(t0)
			t.Logf("%s escapes=%v len=%d visits=%d fs=%d %v: %v", tc.name, escapes, len(tc.cmd), c.visits, c.fsCalls, took.Round(time.Millisecond), shorten(errString(err)))
			if tc.name == "pipe-curl-sh" {
				var e *errcode.Error
				if !errors.As(err, &e) || e.Code != errcode.DangerousOperation || !strings.Contains(e.Msg, RulePipeToShell) {
					t.Errorf("%s escapes=%v: got %v, want a %s refusal", tc.name, escapes, err, RulePipeToShell)
				}
				continue
			}
			if tc.refused {
				var e *errcode.Error
				if !errors.As(err, &e) || e.Code != errcode.UnsafeCommand || !strings.Contains(e.Msg, RuleUnjudgeable) {
					t.Errorf("%s escapes=%v: got %v, want UNSAFE_COMMAND %s", tc.name, escapes, err, RuleUnjudgeable)
				}
			} else if err != nil {
				t.Errorf("%s escapes=%v: refused: %v", tc.name, escapes, err)
			}
			if c.visits > tc.maxVisits {
				t.Errorf("%s escapes=%v: %d visits, want at most %d", tc.name, escapes, c.visits, tc.maxVisits)
			}
			if c.fsCalls > tc.maxFS {
				t.Errorf("%s escapes=%v: %d file system calls, want at most %d", tc.name, escapes, c.fsCalls, tc.maxFS)
			}
		}
	}
}

// TestPolicyJudgeTimeLimit: a judgement past its deadline is refused, not
// finished.
func TestPolicyJudgeTimeLimit(t *testing.T) {
	p := mustPolicy(t, true)
	cmd := strings.Repeat("true | ", 4000) + "true"
	_, err := p.judge(Parse(cmd), nil, corpusBoundary, corpusBoundary, time.Nanosecond)
	var e *errcode.Error
	if !errors.As(err, &e) || e.Code != errcode.UnsafeCommand || !strings.Contains(e.Msg, "took too long to judge") {
		t.Fatalf("got %v, want UNSAFE_COMMAND took too long to judge", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestDiskPath: the component-by-component resolution lands where the
// kernel would (EvalSymlinks for paths that exist), keeps what follows a
// missing component, and follows dangling links to their target.
func TestDiskPath(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "a", "b"), 0o755))
	must(os.WriteFile(filepath.Join(root, "a", "f"), nil, 0o644))
	must(os.Symlink("a", filepath.Join(root, "l1")))
	must(os.Symlink("/", filepath.Join(root, "l2")))
	must(os.Symlink("../l1/b", filepath.Join(root, "a", "up")))
	must(os.Symlink("/nonexistent/zz", filepath.Join(root, "dang")))
	must(os.Symlink("loop", filepath.Join(root, "loop")))
	j := func(p ...string) string { return filepath.Join(append([]string{root}, p...)...) }
	for _, tc := range []struct {
		p    string
		last bool
		want string
	}{
		{j("l1", "f"), true, j("a", "f")},
		{j("l1", "b"), false, j("a", "b")},
		{j("l1"), false, j("l1")},
		{j("l1"), true, j("a")},
		{j("l1", "new", "x"), true, j("a", "new", "x")},
		{j("a", "up", "l1"), true, j("a", "b", "l1")},
		{j("a", "up"), true, j("a", "b")},
		{j("l2", "etc", "passwd"), false, "/etc/passwd"},
		{j("dang", "q"), true, "/nonexistent/zz/q"},
		{j("a", "f", "x"), true, j("a", "f", "x")},
		{"/", true, "/"},
		{"/", false, "/"},
	} {
		c := &checker{p: mustPolicy(t, true), boundary: root, deadline: time.Now().Add(time.Minute)}
		got, err := c.diskPath(tc.p, tc.last)
		if err != nil || got != tc.want {
			t.Errorf("diskPath(%s, %v) = %q, %v; want %q", tc.p, tc.last, got, err, tc.want)
		}
		if ev, err := filepath.EvalSymlinks(tc.p); err == nil && tc.last && ev != got {
			t.Errorf("diskPath(%s) = %q; EvalSymlinks says %q", tc.p, got, ev)
		}
	}
	c := &checker{p: mustPolicy(t, true), boundary: root, deadline: time.Now().Add(time.Minute)}
	if _, err := c.diskPath(j("loop", "x"), true); err == nil || !strings.Contains(err.Error(), "symlinks") {
		t.Errorf("a symlink loop: got %v, want a refusal", err)
	}
	if _, err := c.diskPath(j(strings.Repeat("a/", 300)), true); err == nil {
		t.Errorf("a path 300 components deep: got no refusal")
	}
	if _, err := c.diskPath("/"+strings.Repeat("x", 5000), true); err == nil {
		t.Errorf("a path of 5000 bytes: got no refusal")
	}
}

//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/srcscan"
)

// TestModeRuleHasOneHome keeps what differs between isolation modes in the
// strategies: no non-test file of the module compares a Mode constant
// (== or != or a switch case) except isolation.go, where New's table
// chooses a strategy. A new `mode == ModeBwrap` branch in exec.go or a
// mode list of its own in config fails here.
func TestModeRuleHasOneHome(t *testing.T) {
	consts := map[string]bool{}
	for _, m := range Modes() {
		consts["Mode"+strings.ToUpper(string(m[:1]))+string(m[1:])] = true
	}
	if len(consts) != 5 || !consts["ModeBwrap"] {
		t.Fatalf("mode constants %v: the test's mapping from Modes() is stale", consts)
	}
	isMode := func(x ast.Expr) bool {
		switch v := x.(type) {
		case *ast.Ident:
			return consts[v.Name]
		case *ast.SelectorExpr:
			return consts[v.Sel.Name]
		}
		return false
	}
	check := func(name string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			switch v := n.(type) {
			case *ast.BinaryExpr:
				if (v.Op == token.EQL || v.Op == token.NEQ) && (isMode(v.X) || isMode(v.Y)) {
					t.Errorf("%s: compares an isolation mode; ask the strategy (sandbox/isolation.go) or Mode's methods", fset.Position(v.Pos()))
				}
			case *ast.CaseClause:
				for _, x := range v.List {
					if isMode(x) {
						t.Errorf("%s: switches on an isolation mode; ask the strategy (sandbox/isolation.go)", fset.Position(x.Pos()))
					}
				}
			case *ast.CallExpr:
				// A list of mode names of its own (config's oneOf):
				// more than one of them in one call.
				lits := 0
				for _, a := range v.Args {
					if b, ok := a.(*ast.BasicLit); ok && (b.Value == `"bwrap"` || b.Value == `"software"`) {
						lits++
					}
				}
				if lits > 1 {
					t.Errorf("%s: names isolation modes in a call; use sandbox.Modes()", fset.Position(v.Pos()))
				}
			}
			return true
		})
	}
	// This package, outside the selection.
	own, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, name := range own {
		if strings.HasSuffix(name, "_test.go") || name == "isolation.go" {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		seen++
		check(name, fset, f)
	}
	if seen < 10 {
		t.Fatalf("parsed %d files of the package; the check looked at too little", seen)
	}
	srcscan.OtherFiles(t, "..", func(rel string, fset *token.FileSet, f *ast.File) { check(rel, fset, f) })
}

// TestEveryModeResolves: every mode of the list parses to itself and
// builds an executor whose strategy is a concrete one (never auto) that
// reports the same mode as Mode(), and stays that one after commands ran.
// An unknown mode is refused by name with the accepted ones.
func TestEveryModeResolves(t *testing.T) {
	needBwrap(t)
	want := map[Mode]Mode{ModeAuto: ModeBwrap, ModeBwrap: ModeBwrap, ModeLandlock: ModeLandlock, ModeSoftware: ModeSoftware, ModeNone: ModeNone}
	if got := Modes(); len(got) != len(want) {
		t.Fatalf("Modes() = %v; the test knows %d modes", got, len(want))
	}
	for _, m := range Modes() {
		t.Run(string(m), func(t *testing.T) {
			if got, err := ParseMode(strings.ToUpper(string(m))); err != nil || got != m {
				t.Fatalf("ParseMode(%q) = %q, %v", m, got, err)
			}
			e, _ := newExec(t, m)
			x := e.(*executor)
			if x.iso == nil || e.Mode() != want[m] || x.iso.mode() != e.Mode() || !slices.Contains(Modes(), e.Mode()) {
				t.Fatalf("mode %s resolved to %v (strategy %T); want %s", m, e.Mode(), x.iso, want[m])
			}
			if e.Mode().Namespaced() != x.iso.ownsTree() || m.TriesBwrap() != (m == ModeAuto || m == ModeBwrap) {
				t.Fatalf("mode %s: Namespaced %v, ownsTree %v, TriesBwrap %v", m, e.Mode().Namespaced(), x.iso.ownsTree(), m.TriesBwrap())
			}
			before := x.iso
			res, err := e.Run(context.Background(), Request{Command: "echo ok"})
			if err != nil || string(res.Stdout) != "ok\n" {
				t.Fatalf("Run: %q, %v", res.Stdout, err)
			}
			if x.iso != before || e.Mode() != want[m] {
				t.Fatalf("the strategy changed after a command: %T -> %T", before, x.iso)
			}
			// New takes the mode as ParseMode does (case and spaces).
			if up, _ := newExec(t, Mode(" "+strings.ToUpper(string(m)))); up.Mode() != want[m] {
				t.Fatalf("New(%q) resolved to %v; want %s", strings.ToUpper(string(m)), up.Mode(), want[m])
			}
		})
	}
	for _, bad := range []string{"docker", "seccomp", "bwrap2"} {
		_, err := ParseMode(bad)
		if wantMsg := `invalid isolation mode "` + bad + `": want auto, bwrap, landlock, software or none`; err == nil || err.Error() != wantMsg {
			t.Errorf("ParseMode(%q) = %v; want %q", bad, err, wantMsg)
		}
		if _, err := New(Config{Mode: Mode(bad), WorkspaceRoot: workspace(t)}); err == nil || !strings.Contains(err.Error(), `invalid isolation mode "`+bad+`"`) {
			t.Errorf("New(mode %q) = %v", bad, err)
		}
	}
}

// TestRunMatchesStart: Run is built on Start's launch and finish steps, so
// for the same command both see the same exit code, signal, output and
// timeout, in every mode, on the direct path and through the shell.
func TestRunMatchesStart(t *testing.T) {
	needBwrap(t)
	for _, m := range []Mode{ModeBwrap, ModeLandlock, ModeSoftware, ModeNone} {
		t.Run(string(m), func(t *testing.T) {
			e, root := newExec(t, m)
			if err := os.WriteFile(filepath.Join(root, "f"), []byte("data\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				cmd     string
				timeout time.Duration
			}{
				{"cat f", 0}, // direct path
				{"echo out; echo err >&2; exit 3", 0},
				{"kill -TERM $$", 0},
				{"sleep 5 & echo started", 0}, // the background job is killed with the shell
				{"sleep 30", 300 * time.Millisecond},
				{"cat missing", 0},
			} {
				req := Request{Command: c.cmd, Timeout: c.timeout}
				res, rerr := e.Run(context.Background(), req)
				var out, errb bytes.Buffer
				p, serr := e.Start(context.Background(), req, Stdio{Stdout: &out, Stderr: &errb})
				if rerr != nil || serr != nil {
					t.Fatalf("%q: Run %v, Start %v", c.cmd, rerr, serr)
				}
				st, werr := p.Wait()
				if werr != nil {
					t.Fatalf("%q: Wait: %v", c.cmd, werr)
				}
				if res.ExitCode != st.Code || res.Signal != st.Signal || res.TimedOut != st.TimedOut ||
					string(res.Stdout) != out.String() || string(res.Stderr) != errb.String() {
					t.Errorf("%q: Run = code %d %q timedOut %v out %q err %q\nStart = code %d %q timedOut %v out %q err %q",
						c.cmd, res.ExitCode, res.Signal, res.TimedOut, res.Stdout, res.Stderr,
						st.Code, st.Signal, st.TimedOut, out.String(), errb.String())
				}
				if c.timeout > 0 && !res.TimedOut {
					t.Errorf("%q: the timeout did not kill it", c.cmd)
				}
			}
		})
	}
}

package fsops

import (
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/internal/srcscan"
)

// TestWorkDir: "" and "." are the workspace itself; a directory, through a
// symlink that stays inside too, is its scope; a file, a missing path, an
// escape and a link out are refused with their codes.
func TestWorkDir(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"sub/deep", "out"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "f.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(root, "in")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(root, "away")); err != nil {
		t.Fatal(err)
	}
	ws, err := NewDir(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for _, tc := range []struct {
		cwd  string
		want string       // the directory's root, "" when refused
		code errcode.Code // the refusal's
	}{
		{"", root, ""},
		{".", root, ""},
		{"sub", root + "/sub", ""},
		{"/sub/deep/", root + "/sub/deep", ""},
		{"sub/../out", root + "/out", ""},
		{"in", root + "/in", ""},
		{"f.txt", "", errcode.NotADirectory},
		{"missing", "", errcode.NotFound},
		{"../x", "", errcode.PathEscapeAttempt},
		{"away", "", errcode.PathEscapeAttempt},
	} {
		dir, release, err := WorkDir(ws, tc.cwd)
		if tc.want == "" {
			if errcode.Of(err) != tc.code || (tc.code == errcode.NotADirectory) != IsCwdNotDir(err) {
				t.Errorf("WorkDir(%q): %v (%s), want %s", tc.cwd, err, errcode.Of(err), tc.code)
			}
			continue
		}
		if err != nil || dir.Root() != tc.want {
			t.Errorf("WorkDir(%q) = %v, %v; want %s", tc.cwd, dir, err, tc.want)
			continue
		}
		if (tc.cwd == "" || tc.cwd == ".") != (dir == ws) {
			t.Errorf("WorkDir(%q): the workspace itself only for \"\" and \".\"", tc.cwd)
		}
		release()
		if _, err := ws.Stat("."); err != nil {
			t.Errorf("WorkDir(%q)'s release closed the workspace: %v", tc.cwd, err)
		}
	}
	if IsCwdNotDir(&errcode.Error{Code: errcode.NotADirectory, Op: "stat", Msg: "not a directory"}) {
		t.Error("IsCwdNotDir takes another operation's ENOTDIR for WorkDir's refusal")
	}
}

// TestCwdRuleHasOneHome keeps the cwd rule in WorkDir: no other non-test
// file resolves a command's working directory by itself, that is passes
// an expression that names a cwd (an identifier or field "cwd", in any
// case) to a workspace's Resolve, Rel, Stat or Scope. exec, system.run,
// process_start, the tool sites and the upstream servers call WorkDir.
func TestCwdRuleHasOneHome(t *testing.T) {
	resolvers := map[string]bool{"Resolve": true, "Rel": true, "Stat": true, "Scope": true}
	srcscan.OtherFiles(t, "..", func(rel string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !resolvers[sel.Sel.Name] {
				return true
			}
			namesCwd := false
			ast.Inspect(call.Args[0], func(m ast.Node) bool {
				if id, ok := m.(*ast.Ident); ok && strings.EqualFold(id.Name, "cwd") {
					namesCwd = true
				}
				return !namesCwd
			})
			if namesCwd {
				t.Errorf("%s: %s resolves a cwd with %s: use fsops.WorkDir, the one cwd rule", fset.Position(call.Pos()), rel, sel.Sel.Name)
			}
			return true
		})
	})
}

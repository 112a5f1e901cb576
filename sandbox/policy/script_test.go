package policy

import (
	"go/ast"
	"go/token"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/srcscan"
)

// TestParserHasOneHome: shell is parsed in this package only (Parse, and
// the scripts judged inside a command): no other file of the module builds
// a parser, so nothing parses a command a second time, with options of
// its own; the executor reads the Script the policy judged.
func TestParserHasOneHome(t *testing.T) {
	srcscan.OtherFiles(t, "../..", func(_ string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "NewParser" {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "syntax" {
					t.Errorf("%s: syntax.NewParser: parse commands with policy.Parse", fset.Position(sel.Pos()))
				}
			}
			return true
		})
	})
}

// TestParseOnce: Parse parses once and keeps what it found; Check parses
// the command it is given; a command too large is not parsed at all.
func TestParseOnce(t *testing.T) {
	before := ParseCount()
	s := Parse("echo 'unclosed")
	if _, err := s.Syntax(); err == nil {
		t.Fatal("an unclosed quote parsed")
	}
	p := mustPolicy(t, false)
	for i := 0; i < 3; i++ {
		if err := p.CheckScript(s, nil, corpusBoundary, corpusBoundary); err == nil {
			t.Fatal("an unparsable command accepted")
		}
	}
	if n := ParseCount() - before; n != 1 {
		t.Fatalf("one Parse and three judgements parsed %d times", n)
	}
	big := Parse(string(make([]byte, MaxCommandBytes+1)))
	if _, err := big.Syntax(); err == nil || ParseCount()-before != 1 {
		t.Fatalf("a command over MaxCommandBytes was parsed (%v)", err)
	}
	if err := p.CheckScript(big, nil, corpusBoundary, corpusBoundary); err == nil {
		t.Fatal("a command over MaxCommandBytes accepted")
	}
}

package httpguard

import (
	"go/ast"
	gotoken "go/token"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/srcscan"
)

func TestBearerCredentials(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"bEaReR abc", "abc", true},
		{"Bearer   abc", "abc", true},
		{"Bearer\tabc", "abc", true},
		{" \tBearer abc \t", "abc", true},
		{"Bearer a b", "a b", true},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Bearer \t ", "", false},
		{"Bearerabc", "", false},
		{"Basic abc", "", false},
		{"abc", "", false},
		{"", "", false},
		{"Bearer\u00a0abc", "", false},
	}
	for _, tt := range tests {
		got, ok := bearerCredentials(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("bearerCredentials(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestToken(t *testing.T) {
	tests := []struct {
		name        string
		token       string
		auth, query string
		header      bool // AllowsHeader
		either      bool // AllowsHeaderOrQuery
	}{
		{name: "no token configured", header: true, either: true},
		{name: "no token configured, junk sent", auth: "Basic x", query: "token=y", header: true, either: true},
		{name: "missing", token: "t0k"},
		{name: "header", token: "t0k", auth: "bearer t0k", header: true, either: true},
		{name: "wrong header", token: "t0k", auth: "Bearer t0K"},
		{name: "query", token: "t0k", query: "token=t0k", either: true},
		{name: "query, encoded", token: "a b&c", query: "token=a+b%26c", either: true},
		{name: "empty query", token: "t0k", query: "token="},
		{name: "wrong header, right query", token: "t0k", auth: "Bearer x", query: "token=t0k", either: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/x?"+tt.query, nil)
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			tok := NewToken(tt.token)
			if tok.Required() != (tt.token != "") {
				t.Errorf("Required = %v", tok.Required())
			}
			if got := tok.AllowsHeader(r); got != tt.header {
				t.Errorf("AllowsHeader = %v, want %v", got, tt.header)
			}
			if got := tok.AllowsHeaderOrQuery(r); got != tt.either {
				t.Errorf("AllowsHeaderOrQuery = %v, want %v", got, tt.either)
			}
		})
	}
}

// TestTokenRuleHasOneHome keeps the token check here: no other non-test
// file of the module reads the Authorization header or a "token" parameter
// (a Get or Values call with that literal), or imports crypto/subtle.
func TestTokenRuleHasOneHome(t *testing.T) {
	srcscan.OtherFiles(t, "../..", func(rel string, fset *gotoken.FileSet, f *ast.File) {
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "crypto/subtle" {
				t.Errorf("%s imports crypto/subtle: compare the token with internal/httpguard.Token", rel)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			lit, ok2 := call.Args[0].(*ast.BasicLit)
			if !ok || !ok2 || lit.Kind != gotoken.STRING || (sel.Sel.Name != "Get" && sel.Sel.Name != "Values") {
				return true
			}
			arg, _ := strconv.Unquote(lit.Value)
			if strings.EqualFold(arg, "Authorization") || arg == "token" {
				t.Errorf("%s reads %q (%s): check the token with internal/httpguard.Token", rel, arg, fset.Position(call.Pos()))
			}
			return true
		})
	})
}

package admit

import (
	"go/ast"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/srcscan"
)

// otherErrorShapes are the files that write {"error", "message"} by a rule
// of their own, each with the reason.
var otherErrorShapes = map[string]string{
	"internal/httpguard/guard.go": "Refusal.Write, the writer WriteJSONError calls: the Origin and Host rules answer below internal/admit",
	"face/restface/restface.go":   "AmbiguousResponse: the shape with the qualified names that serve a bare tool name (409), written by /execute's own writer",
}

// TestJSONErrorHasOneHome: the daemon's HTTP error body {"error": title,
// "message": what to do} is written by WriteJSONError, with its
// Content-Type and nosniff, so no other file writes the shape itself (a
// struct with both fields, or a map with both keys) and answers with other
// headers.
func TestJSONErrorHasOneHome(t *testing.T) {
	allowed := srcscan.NewExceptions("otherErrorShapes", otherErrorShapes)
	structs := 0
	srcscan.OtherFiles(t, "../..", func(rel string, fset *token.FileSet, f *ast.File) {
		rel = filepath.ToSlash(rel)
		ast.Inspect(f, func(n ast.Node) bool {
			var keys map[string]bool
			switch n := n.(type) {
			case *ast.StructType:
				structs++
				keys = map[string]bool{}
				for _, fl := range n.Fields.List {
					if fl.Tag == nil {
						continue
					}
					tag, err := strconv.Unquote(fl.Tag.Value)
					if err != nil {
						continue
					}
					keys[reflect.StructTag(tag).Get("json")] = true
				}
			case *ast.CompositeLit:
				keys = map[string]bool{}
				for _, e := range n.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					if lit, ok := kv.Key.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						k, _ := strconv.Unquote(lit.Value)
						keys[k] = true
					}
				}
			default:
				return true
			}
			if !keys["error"] || !keys["message"] {
				return true
			}
			if allowed.Allows(rel) {
				return true
			}
			t.Errorf("%s: writes the {\"error\", \"message\"} body itself; use admit.WriteJSONError (or list the file in otherErrorShapes with the reason)", fset.Position(n.Pos()))
			return true
		})
	})
	if structs < 100 {
		t.Fatalf("only %d struct types found: the scan no longer reads the module", structs)
	}
	allowed.Check(t, "writes the {\"error\", \"message\"} body itself")
}

// TestWriteJSONErrorHeaders: the error body goes with its headers.
func TestWriteJSONErrorHeaders(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteJSONError(rec, http.StatusNotFound, "Not Found", "no endpoint at /x")
	if rec.Code != http.StatusNotFound {
		t.Errorf("status %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if v := rec.Header().Get("X-Content-Type-Options"); v != "nosniff" {
		t.Errorf("X-Content-Type-Options %q", v)
	}
	if got, want := rec.Body.String(), `{"error":"Not Found","message":"no endpoint at /x"}`+"\n"; got != want {
		t.Errorf("body %q, want %q", got, want)
	}
}

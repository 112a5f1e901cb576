package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// A schema like server-filesystem's and server-everything's, with the shapes
// the execution service's key list misses: arrays of paths, paths inside
// array items, a path known only by its format.
var testSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"path":    map[string]any{"type": "string"},
		"paths":   map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"edits":   map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}, "text": map[string]any{"type": "string"}}}},
		"out":     map[string]any{"type": "string", "format": "file-path"},
		"options": map[string]any{"type": "object", "properties": map[string]any{"baseDir": map[string]any{"type": "string"}}},
		"query":   map[string]any{"type": "string"},
	},
}

func newChecker(t testing.TB, cwd string) (*PathChecker, fsops.Workspace) {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "ws")
	for _, d := range []string{root, filepath.Join(root, "sub"), filepath.Join(base, "ws2"), filepath.Join(base, "secret")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(base, "secret"), filepath.Join(root, "out-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(root, "in-link")); err != nil {
		t.Fatal(err)
	}
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return NewPathChecker(filepath.Join(ws.Root(), cwd), testSchema), ws
}

func TestPathCheckerRefusesEscapes(t *testing.T) {
	c, ws := newChecker(t, "")
	root := ws.Root()
	ws2 := filepath.Join(filepath.Dir(root), "ws2")
	for _, tc := range []struct {
		name, args string
		where      string // "" = allowed
	}{
		{"relative inside", `{"path":"a/b.txt"}`, ""},
		{"dot-dot inside", `{"path":"sub/../a.txt"}`, ""},
		{"absolute inside", `{"path":"` + root + `/a.txt"}`, ""},
		{"root itself", `{"path":"` + root + `"}`, ""},
		{"link inside", `{"path":"in-link/x"}`, ""},
		{"empty", `{"path":""}`, ""},
		{"not a path key", `{"query":"../../etc/passwd"}`, ""},
		{"tilde", `{"path":"~/notes.md"}`, ""},
		{"dot-dot out", `{"path":"../secret/x"}`, "arguments.path"},
		{"absolute outside", `{"path":"/etc/passwd"}`, "arguments.path"},
		{"sibling with the root as prefix", `{"path":"` + ws2 + `/x"}`, "arguments.path"},
		{"symlink out", `{"path":"out-link/key"}`, "arguments.path"},
		{"NUL", `{"path":"a\u0000b"}`, "arguments.path"},
		{"array of paths", `{"paths":["ok.txt","/etc/shadow"]}`, "arguments.paths[1]"},
		{"path in array items", `{"edits":[{"path":"ok","text":"/etc/x"},{"path":"../../x"}]}`, "arguments.edits[1].path"},
		{"format says path", `{"out":"/tmp/x"}`, "arguments.out"},
		{"name suffix, nested", `{"options":{"baseDir":"/"}}`, "arguments.options.baseDir"},
		{"key not in schema", `{"destination":"../x"}`, "arguments.destination"},
		{"snake case key", `{"file_path":"/etc/x"}`, "arguments.file_path"},
		{"file URI anywhere", `{"query":"file:///etc/passwd"}`, "arguments.query"},
		{"file URI inside", `{"path":"file://` + root + `/a"}`, ""},
		{"remote file URI", `{"path":"file://host/etc"}`, "arguments.path"},
		{"other user's home", `{"path":"~root/.ssh"}`, "arguments.path"},
		// Every spelling of a file URI that Node's fileURLToPath and
		// Python's urllib take as one.
		{"file URI with one slash", `{"query":"file:/etc/passwd"}`, "arguments.query"},
		{"file URI under a path key", `{"path":"file:/etc/passwd"}`, "arguments.path"},
		{"upper-case scheme", `{"query":"FILE:///etc/passwd"}`, "arguments.query"},
		{"mixed-case scheme", `{"uri":"File:///etc/passwd"}`, "arguments.uri"},
		{"percent-encoded climb", `{"path":"file://` + root + `/%2e%2e/secret"}`, "arguments.path"},
		{"one-slash URI inside", `{"path":"file:` + root + `/a"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Check(ws, json.RawMessage(tc.args))
			if tc.where == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *errcode.Error
			if !errors.As(err, &e) || e.Code != errcode.PathEscapeAttempt || e.Hint != "in "+tc.where {
				t.Fatalf("got %v (%#v); want PATH_ESCAPE_ATTEMPT in %s", err, e, tc.where)
			}
		})
	}
}

// TestPathCheckerCwd: relative paths are taken from the upstream's working
// directory, as the upstream itself will take them.
func TestPathCheckerCwd(t *testing.T) {
	c, ws := newChecker(t, "sub")
	if err := c.Check(ws, json.RawMessage(`{"path":"../a.txt"}`)); err != nil {
		t.Errorf("../ from sub is the root: %v", err)
	}
	if err := c.Check(ws, json.RawMessage(`{"path":"../../a.txt"}`)); !errcode.Is(err, errcode.PathEscapeAttempt) {
		t.Errorf("../../ from sub leaves: %v", err)
	}
}

func TestPathCheckerBadJSON(t *testing.T) {
	c, ws := newChecker(t, "")
	if err := c.Check(ws, json.RawMessage(`{"path":`)); !errcode.Is(err, errcode.InvalidArgument) {
		t.Errorf("bad JSON: %v", err)
	}
	if err := c.Check(ws, nil); err != nil {
		t.Errorf("no arguments: %v", err)
	}
}

// FuzzPathChecker: whatever the arguments, an accepted path-keyed string
// resolves inside the workspace.
func FuzzPathChecker(f *testing.F) {
	for _, s := range []string{"a", "../x", "/etc", "sub/../../x", "~/x", "file:///x", "in-link/../..", "out-link"} {
		f.Add(s)
	}
	base := f.TempDir()
	root := filepath.Join(base, "ws")
	if err := os.MkdirAll(filepath.Join(root, "sub"), 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(base, filepath.Join(root, "out-link")); err != nil {
		f.Fatal(err)
	}
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		f.Fatal(err)
	}
	defer ws.Close()
	c := NewPathChecker(ws.Root(), testSchema)
	f.Fuzz(func(t *testing.T, p string) {
		args, _ := json.Marshal(map[string]any{"path": p})
		if c.Check(ws, args) != nil || isFileURI(p) || strings.HasPrefix(p, "~") || p == "" {
			return
		}
		abs := p
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(ws.Root(), p)
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return // does not exist: nothing to follow
		}
		if real != ws.Root() && !strings.HasPrefix(real, ws.Root()+"/") {
			t.Fatalf("accepted %q, which is %s", p, real)
		}
	})
}

// referenceRefusals is the checker as it was written over a generic decode
// (map[string]any, where a map's order is random and a repeated key keeps
// its last value): every refusal it could return, as the error's text with
// its hint. Check, which reads the JSON as it lies, must return one of them,
// or none when there is none.
func referenceRefusals(c *PathChecker, ws fsops.Workspace, args []byte) (refusals []string, invalid bool) {
	var v any
	if json.Unmarshal(args, &v) != nil {
		return nil, true
	}
	var walk func(v any, schema map[string]any, at *argLoc, isPath bool)
	walk = func(v any, schema map[string]any, at *argLoc, isPath bool) {
		isPath = isPath || schemaSaysPath(schema)
		switch x := v.(type) {
		case string:
			if isPath || isFileURI(x) {
				if err := c.checkPath(ws, x, at); err != nil {
					refusals = append(refusals, errText(err))
				}
			}
		case []any:
			items, _ := schema["items"].(map[string]any)
			for i, e := range x {
				walk(e, items, &argLoc{up: at, index: i, isIndex: true}, isPath)
			}
		case map[string]any:
			props, _ := schema["properties"].(map[string]any)
			extra, _ := schema["additionalProperties"].(map[string]any)
			for k, e := range x {
				sub, _ := props[k].(map[string]any)
				if sub == nil {
					sub = extra
				}
				walk(e, sub, &argLoc{up: at, key: k}, pathNameSlow(k))
			}
		}
	}
	walk(v, c.schema, nil, false)
	return refusals, false
}

func errText(err error) string {
	var e *errcode.Error
	if errors.As(err, &e) {
		return string(e.Code) + ": " + err.Error() + " (" + e.Hint + ")"
	}
	return err.Error()
}

// repeatsKeys reports whether some object in the JSON names a key twice.
func repeatsKeys(args []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(args))
	type frame struct {
		obj     bool
		keys    map[string]bool
		wantKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.wantKey {
			if k, ok := tok.(string); ok {
				if top.keys[k] {
					return true
				}
				top.keys[k] = true
				top.wantKey = false
				continue
			}
		}
		if top != nil && top.obj && !top.wantKey {
			top.wantKey = true // this token starts (or is) the value
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, keys: map[string]bool{}, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// checkAgainstReference holds Check to referenceRefusals on one input.
func checkAgainstReference(t *testing.T, c *PathChecker, ws fsops.Workspace, args string) {
	t.Helper()
	want, invalid := referenceRefusals(c, ws, []byte(args))
	err := c.Check(ws, json.RawMessage(args))
	switch {
	case args == "":
		if err != nil {
			t.Fatalf("no arguments: %v", err)
		}
	case invalid:
		if !errcode.Is(err, errcode.InvalidArgument) {
			t.Fatalf("%s: %v, want INVALID_ARGUMENT (not JSON)", args, err)
		}
	case err == nil && len(want) > 0:
		t.Fatalf("%s: accepted; the generic walk refuses: %q", args, want)
	case err != nil && !slices.Contains(want, errText(err)) && !repeatsKeys([]byte(args)):
		t.Fatalf("%s: %s; the generic walk gives one of %q", args, errText(err), want)
	}
}

var referenceArgs = []string{
	`{"path":"a/b.txt"}`, `{"path":"../secret/x"}`, `{"paths":["ok.txt","/etc/shadow"]}`,
	`{"edits":[{"path":"ok","text":"/etc/x"},{"path":"../../x"}]}`, `{"out":"/tmp/x"}`,
	`{"options":{"baseDir":"/"}}`, `{"file_path":"/etc/x"}`, `{"query":"file:///etc/passwd"}`,
	`{"query":"\u0066ile:///etc/passwd"}`, `{"q":"FİLE:///etc"}`, `{"q":"\u212a"}`, `{"path":"a\u0000b"}`,
	`{"p\u0061th":"/etc"}`, `{"FilePath":"/x"}`, `{"målPath":"/x"}`, `{"x":[[["file:/etc"]]]}`,
	`{"path":"\xff/../.."}`, `{"path": "/etc" , "query" : [ 1 , true , null , -2.5e3 , {} , [] ] }`,
	`["/etc", "file:/x"]`, `"file:/etc"`, `null`, `12`, `{"path":`, `{"a":1,}`, `{"path":"ok","path":"/etc"}`,
	`{"path":"/etc","path":"ok"}`, `{"":{"dir":"/x"}}`, `{"options":{"baseDir":"in-link/../../x"}}`,
	`{"path":"~root"}`, `{"path":"~/x"}`, `{"path":"file://host/x"}`, `{"path":"file:x"}`,
}

// TestCheckMatchesGenericWalk: the checker that reads the JSON as it lies
// refuses what the generic decode's walk refuses, with the same words and
// argument name, and accepts what it accepts.
func TestCheckMatchesGenericWalk(t *testing.T) {
	c, ws := newChecker(t, "")
	for _, args := range referenceArgs {
		checkAgainstReference(t, c, ws, args)
	}
}

// FuzzCheckMatchesGenericWalk is TestCheckMatchesGenericWalk on any input.
func FuzzCheckMatchesGenericWalk(f *testing.F) {
	for _, args := range referenceArgs {
		f.Add(args)
	}
	c, ws := newChecker(f, "")
	f.Fuzz(func(t *testing.T, args string) {
		checkAgainstReference(t, c, ws, args)
	})
}

// BenchmarkPathCheck is one call's check: arguments with no path, and with
// a path inside the workspace.
func BenchmarkPathCheck(b *testing.B) {
	c, ws := newChecker(b, "")
	for _, bc := range []struct{ name, args string }{
		{"no-path", `{"text":"hello","count":3,"options":{"verbose":true}}`},
		{"path", `{"path":"sub/a.txt","text":"hello"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Check(ws, json.RawMessage(bc.args)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package extensions

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"

	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// fileOptions is the dialect: while loops, sets, recursion and top-level
// control flow are on (handlers are ordinary programs); the step limit and
// the deadline bound them.
var fileOptions = &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}

// Bounds on what an extension declares: every tools/list sends it, to
// every client, so a description or a schema made by a loop (one step of
// "x" * n makes up to 1 GiB) would be sent, and marshalled, on every list.
const (
	MaxTools  = 256 // tools of one extension
	MaxParams = 256 // parameters of one tool
	// MaxDeclBytes bounds a tool's declaration, its name, title,
	// description and input schema as JSON, and an extension's version
	// and description together.
	MaxDeclBytes = 64 << 10
)

// Extension is one loaded file.
type Extension struct {
	File        string // the file's path relative to the directory
	Name        string
	Version     string
	Description string
	AllowedExec []string // program names exec.run may run
	Env         []string // variables env.get may read
	// AllowedDBHosts are the hosts the postgres module may connect to
	// (through the network door, whose rules still apply).
	AllowedDBHosts []string
	Tools          []Tool
}

// Tool is one tool an extension declares.
type Tool struct {
	Name        string
	Title       string
	Description string
	Params      []Param
	Annotations map[string]bool
	Handler     starlark.Callable
}

// Param is one ToolParameter.
type Param struct {
	Name        string
	Type        string // string, integer, number, boolean, array, object
	Required    bool
	Default     starlark.Value // nil when none
	Description string
}

// validName reports whether name is an extension's or a tool's name: 1 to
// 32 letters, digits, '_' and '-', the first a letter or a digit. A loop,
// not a package-level regexp: `{0,31}` compiles to 31 copies of its class,
// 36 KB allocated at every daemon start, extensions or not.
func validName(name string) bool {
	if name == "" || len(name) > 32 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// constructors are the predeclared Extension, Tool and ToolParameter: they
// return structs, checked when describe_extension's result is read, and
// frozen, as every struct extension code gets.
func constructors() starlark.StringDict {
	mk := func(name string) *starlark.Builtin {
		return starlark.NewBuiltin(name, func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if len(args) > 0 {
				return nil, fmt.Errorf("%s: use keyword arguments (%s(name=..., ...))", name, name)
			}
			s := starlarkstruct.FromKeywords(starlark.String(name), kwargs)
			s.Freeze()
			return s, nil
		})
	}
	return starlark.StringDict{"Extension": mk("Extension"), "Tool": mk("Tool"), "ToolParameter": mk("ToolParameter")}
}

// LoadError is a file that did not load: where, and why.
type LoadError struct {
	File string
	Line int // 0 when unknown
	Msg  string
}

func (e *LoadError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return e.File + ": " + e.Msg
}

// loadFile evaluates one file and reads its describe_extension().
func (p *Provider) loadFile(rel string) (*Extension, error) {
	// Code the daemon runs: read as every file that grants rights is
	// (readSource: opfile's rule, a regular file read without blocking,
	// at most MaxFileBytes, refused when a user other than root and the
	// daemon's could change it, or put it there; a symlink followed only
	// to a file inside the directory).
	src, err := readSource(p.dir, rel)
	if err != nil {
		return nil, &LoadError{File: rel, Msg: err.Error()}
	}
	thread := p.newThread(rel, nil)
	thread.SetMaxExecutionSteps(p.opts.MaxSteps)
	defer p.heap.watch(thread)()
	globals, err := starlark.ExecFileOptions(fileOptions, thread, filepath.Join(p.dir, rel), src, p.predeclared())
	if err != nil {
		return nil, loadError(rel, err)
	}
	describe, ok := globals["describe_extension"].(starlark.Callable)
	if !ok {
		return nil, &LoadError{File: rel, Msg: "no describe_extension() function; an extension file defines one returning Extension(...)"}
	}
	v, err := starlark.Call(thread, describe, nil, nil)
	if err != nil {
		return nil, loadError(rel, err)
	}
	return readExtension(rel, v)
}

func loadError(rel string, err error) error {
	var se syntax.Error
	if e, ok := err.(syntax.Error); ok {
		se = e
		return &LoadError{File: rel, Line: int(se.Pos.Line), Msg: se.Msg}
	}
	if ee, ok := err.(*starlark.EvalError); ok {
		line := 0
		if len(ee.CallStack) > 0 {
			line = int(ee.CallStack[len(ee.CallStack)-1].Pos.Line)
		}
		return &LoadError{File: rel, Line: line, Msg: ee.Msg}
	}
	return &LoadError{File: rel, Msg: err.Error()}
}

// readExtension checks describe_extension's result.
func readExtension(rel string, v starlark.Value) (*Extension, error) {
	bad := func(format string, args ...any) error {
		return &LoadError{File: rel, Msg: "describe_extension(): " + fmt.Sprintf(format, args...)}
	}
	s, ok := v.(*starlarkstruct.Struct)
	if !ok || s.Constructor() != starlark.String("Extension") {
		return nil, bad("must return Extension(...), not %s", v.Type())
	}
	ext := &Extension{File: rel}
	var err error
	if ext.Name, err = strField(s, "name", true); err != nil {
		return nil, bad("%v", err)
	}
	if !validName(ext.Name) || strings.Contains(ext.Name, "__") {
		return nil, bad("name %q: letters, digits, '_' and '-', at most 32, no \"__\" (it prefixes the tools: name__tool)", ext.Name)
	}
	ext.Version, _ = strField(s, "version", false)
	ext.Description, _ = strField(s, "description", false)
	if n := len(ext.Version) + len(ext.Description); n > MaxDeclBytes {
		return nil, bad("version and description take %d bytes; the limit is %d", n, MaxDeclBytes)
	}
	if ext.AllowedExec, err = strList(s, "allowed_exec"); err != nil {
		return nil, bad("%v", err)
	}
	for _, c := range ext.AllowedExec {
		if c == "" || strings.ContainsAny(c, "/\\ ") {
			return nil, bad("allowed_exec: %q must be a plain program name, looked up on PATH", c)
		}
	}
	if ext.Env, err = strList(s, "env"); err != nil {
		return nil, bad("%v", err)
	}
	if ext.AllowedDBHosts, err = strList(s, "allowed_db_hosts"); err != nil {
		return nil, bad("%v", err)
	}
	for _, h := range ext.AllowedDBHosts {
		if _, err := netip.ParseAddr(h); err != nil && (h == "" || strings.ContainsAny(h, "/\\ :@,[]")) {
			return nil, bad("allowed_db_hosts: %q must be a host name or an address, without a port", h)
		}
	}
	tools, err := s.Attr("tools")
	if err != nil || tools == nil {
		return nil, bad("Extension has no tools=[...]")
	}
	it, ok := tools.(starlark.Iterable)
	if !ok {
		return nil, bad("tools must be a list of Tool(...)")
	}
	iter := it.Iterate()
	defer iter.Done()
	var tv starlark.Value
	for iter.Next(&tv) {
		if len(ext.Tools) == MaxTools {
			return nil, bad("more than %d tools", MaxTools)
		}
		t, err := readTool(ext.Name, tv)
		if err != nil {
			return nil, bad("%v", err)
		}
		if slices.ContainsFunc(ext.Tools, func(o Tool) bool { return o.Name == t.Name }) {
			return nil, bad("two tools are named %q", t.Name)
		}
		ext.Tools = append(ext.Tools, t)
	}
	return ext, nil
}

func readTool(extName string, v starlark.Value) (Tool, error) {
	s, ok := v.(*starlarkstruct.Struct)
	if !ok || s.Constructor() != starlark.String("Tool") {
		return Tool{}, fmt.Errorf("tools must hold Tool(...), not %s", v.Type())
	}
	var t Tool
	var err error
	if t.Name, err = strField(s, "name", true); err != nil {
		return Tool{}, err
	}
	if !validName(t.Name) {
		return Tool{}, fmt.Errorf("tool name %q: letters, digits, '_' and '-', at most 32", t.Name)
	}
	// Served as extension__tool, which the registry holds to its limit:
	// a name past it would pass a check here and fail the daemon's load.
	if served := extName + "__" + t.Name; len(served) > registry.MaxNameLen {
		return Tool{}, fmt.Errorf("tool name %q: served as %q, %d characters; the extension's name and the tool's together may be at most %d", t.Name, served, len(served), registry.MaxNameLen-2)
	}
	t.Title, _ = strField(s, "title", false)
	if t.Description, err = strField(s, "description", false); err != nil {
		return Tool{}, err
	}
	h, err := s.Attr("handler")
	if err != nil || h == nil {
		return Tool{}, fmt.Errorf("tool %q has no handler", t.Name)
	}
	if t.Handler, ok = h.(starlark.Callable); !ok {
		return Tool{}, fmt.Errorf("tool %q: handler must be a function, not %s", t.Name, h.Type())
	}
	if a, err := s.Attr("annotations"); err == nil && a != nil {
		d, ok := a.(*starlark.Dict)
		if !ok {
			return Tool{}, fmt.Errorf("tool %q: annotations must be a dict", t.Name)
		}
		t.Annotations = map[string]bool{}
		for _, kv := range d.Items() {
			k, _ := starlark.AsString(kv[0])
			switch k {
			case "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint":
			default:
				return Tool{}, fmt.Errorf("tool %q: unknown annotation %q (readOnlyHint, destructiveHint, idempotentHint, openWorldHint)", t.Name, k)
			}
			t.Annotations[k] = bool(kv[1].Truth())
		}
	}
	if ps, err := s.Attr("parameters"); err == nil && ps != nil {
		it, ok := ps.(starlark.Iterable)
		if !ok {
			return Tool{}, fmt.Errorf("tool %q: parameters must be a list of ToolParameter(...)", t.Name)
		}
		iter := it.Iterate()
		defer iter.Done()
		var pv starlark.Value
		for iter.Next(&pv) {
			if len(t.Params) == MaxParams {
				return Tool{}, fmt.Errorf("tool %q of extension %q: more than %d parameters", t.Name, extName, MaxParams)
			}
			p, err := readParam(pv)
			if err != nil {
				return Tool{}, fmt.Errorf("tool %q of extension %q: %v", t.Name, extName, err)
			}
			if slices.ContainsFunc(t.Params, func(o Param) bool { return o.Name == p.Name }) {
				return Tool{}, fmt.Errorf("tool %q of extension %q: two parameters are named %q", t.Name, extName, p.Name)
			}
			t.Params = append(t.Params, p)
		}
	}
	// The declaration's size, counted as tools/list sends it; the text
	// fields first, so that a huge one is refused before it is copied.
	n := len(t.Name) + len(t.Title) + len(t.Description)
	for _, p := range t.Params {
		n += len(p.Name) + len(p.Description)
	}
	if n <= MaxDeclBytes {
		schema, err := json.Marshal(t.schema())
		if err != nil {
			return Tool{}, fmt.Errorf("tool %q of extension %q: its input schema: %v", t.Name, extName, err)
		}
		n += len(schema)
	}
	if n > MaxDeclBytes {
		return Tool{}, fmt.Errorf("tool %q of extension %q: its name, title, description and input schema take more than %d bytes", t.Name, extName, MaxDeclBytes)
	}
	return t, nil
}

func readParam(v starlark.Value) (Param, error) {
	s, ok := v.(*starlarkstruct.Struct)
	if !ok || s.Constructor() != starlark.String("ToolParameter") {
		return Param{}, fmt.Errorf("parameters must hold ToolParameter(...), not %s", v.Type())
	}
	var p Param
	var err error
	if p.Name, err = strField(s, "name", true); err != nil {
		return Param{}, err
	}
	typ, _ := strField(s, "param_type", false)
	switch typ {
	case "", "string":
		p.Type = "string"
	case "integer", "int":
		p.Type = "integer"
	case "number", "float":
		p.Type = "number"
	case "boolean", "bool":
		p.Type = "boolean"
	case "array", "list":
		p.Type = "array"
	case "object", "dict":
		p.Type = "object"
	default:
		return Param{}, fmt.Errorf("parameter %q: param_type %q is not string, integer, number, boolean, array or object", p.Name, typ)
	}
	if r, err := s.Attr("required"); err == nil && r != nil {
		p.Required = bool(r.Truth())
	}
	if d, err := s.Attr("default"); err == nil && d != nil && d != starlark.None {
		if p.Default, err = coerceDefault(p.Type, d); err != nil {
			return Param{}, fmt.Errorf("parameter %q: default %s: %v", p.Name, d.String(), err)
		}
	}
	p.Description, _ = strField(s, "description", false)
	return p, nil
}

func strField(s *starlarkstruct.Struct, name string, required bool) (string, error) {
	v, err := s.Attr(name)
	if err != nil || v == nil || v == starlark.None {
		if required {
			return "", fmt.Errorf("%s is required", name)
		}
		return "", nil
	}
	str, ok := starlark.AsString(v)
	if !ok {
		return "", fmt.Errorf("%s must be a string, not %s", name, v.Type())
	}
	return str, nil
}

func strList(s *starlarkstruct.Struct, name string) ([]string, error) {
	v, err := s.Attr(name)
	if err != nil || v == nil || v == starlark.None {
		return nil, nil
	}
	it, ok := v.(starlark.Iterable)
	if !ok {
		return nil, fmt.Errorf("%s must be a list of strings", name)
	}
	var out []string
	iter := it.Iterate()
	defer iter.Done()
	var x starlark.Value
	for iter.Next(&x) {
		str, ok := starlark.AsString(x)
		if !ok {
			return nil, fmt.Errorf("%s must be a list of strings, not holding %s", name, x.Type())
		}
		out = append(out, str)
	}
	return out, nil
}

// schema is the tool's JSON Schema from its parameters.
func (t Tool) schema() map[string]any {
	props := map[string]any{}
	var required []string
	for _, p := range t.Params {
		prop := map[string]any{"type": p.Type}
		if p.Description != "" {
			prop["description"] = p.Description
		}
		if p.Default != nil {
			if b, err := ToJSON(p.Default); err == nil {
				prop["default"] = jsonRaw(b)
			}
		}
		props[p.Name] = prop
		if p.Required {
			required = append(required, p.Name)
		}
	}
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// coerceDefault turns a parameter's default into a value of its type, as
// starlark-mcp's published extensions expect: default = "100" on an
// integer parameter arrives as 100, "true" on a boolean as True, a JSON
// text on an array or object as the list or dict it writes.
func coerceDefault(typ string, d starlark.Value) (starlark.Value, error) {
	str, isStr := d.(starlark.String)
	text := strings.TrimSpace(string(str))
	switch typ {
	case "string":
		switch x := d.(type) {
		case starlark.String:
			return x, nil
		case starlark.Int, starlark.Float, starlark.Bool:
			return starlark.String(x.String()), nil
		}
	case "integer":
		switch x := d.(type) {
		case starlark.Int:
			return x, nil
		case starlark.Float:
			if f := float64(x); f == math.Trunc(f) && math.Abs(f) < 1<<53 {
				return starlark.MakeInt64(int64(f)), nil
			}
			return nil, errors.New("is not a whole number")
		case starlark.String:
			n, err := strconv.ParseInt(text, 10, 64)
			if err != nil {
				return nil, errors.New("is not an integer")
			}
			return starlark.MakeInt64(n), nil
		}
	case "number":
		switch x := d.(type) {
		case starlark.Int, starlark.Float:
			return x, nil
		case starlark.String:
			f, err := strconv.ParseFloat(text, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, errors.New("is not a number")
			}
			return starlark.Float(f), nil
		}
	case "boolean":
		switch x := d.(type) {
		case starlark.Bool:
			return x, nil
		case starlark.String:
			switch strings.ToLower(text) {
			case "true":
				return starlark.True, nil
			case "false":
				return starlark.False, nil
			}
			return nil, errors.New("is not true or false")
		}
	case "array", "object":
		v := d
		if isStr {
			var err error
			if v, err = FromJSON([]byte(text)); err != nil {
				return nil, fmt.Errorf("is not the JSON of an %s: %v", typ, err)
			}
		}
		switch v.(type) {
		case *starlark.List, starlark.Tuple:
			if typ == "array" {
				v.Freeze()
				return v, nil
			}
		case *starlark.Dict:
			if typ == "object" {
				v.Freeze()
				return v, nil
			}
		}
		d = v
	}
	article := "a"
	if strings.ContainsRune("aeiou", rune(typ[0])) {
		article = "an"
	}
	return nil, fmt.Errorf("is a %s, not %s %s", d.Type(), article, typ)
}

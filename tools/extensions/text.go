package extensions

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	sljson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// MaxTextBytes bounds the text one conversion of a value makes: str,
// repr, fail, json.encode, json.encode_indent, json.indent, and ToJSON.
//
// Starlark's own conversions have no bound: the text of a list nested 10^5
// deep takes seconds (its cycle check is quadratic in the depth), that of
// a list holding itself twice at each of 30 levels is gigabytes, and a
// tuple nested a few million deep overflows the goroutine's stack, which
// ends the process. Values nest one level per step, so the step limit does
// not stop them. The predeclared str, repr, print and fail and the json
// module here walk a value themselves instead, at most maxDepth deep and
// up to their size, and refuse past either with an error naming it. The
// "%" operator, str.format and the values inside Starlark's own error
// messages still use Starlark's conversion: see docs/extensions.md,
// "Limits".
const MaxTextBytes = 8 << 20

// textWriter writes the text of values as Starlark's str and repr do,
// refusing a value nested more than maxDepth deep or text longer than
// limit. With count set it only counts the bytes (json.encode's check).
type textWriter struct {
	b     strings.Builder
	n     int // bytes written or counted
	limit int
	count bool
	// path holds the lists, dicts and structs being written, as
	// Starlark's writer does, so that a list holding itself is "[...]"
	// (at most maxDepth of them: a slice is quicker than a map).
	path []unsafe.Pointer
	// per value at depth d, counted: line + d*indent (json.encode_indent).
	line, indent int
}

// errNested is made without fmt, whose printer comes from a pool that may be
// empty at initialisation: what the package allocates at start stays the
// same from one start to the next (TestInitDoesNoFeatureWork).
var errNested = errors.New("a value nested more than " + strconv.Itoa(maxDepth) + " deep")

// TextLimitError is text past its bound.
type TextLimitError struct {
	What  string // "a value whose text", "indented text", ...
	Limit int
}

func (e *TextLimitError) Error() string {
	return fmt.Sprintf("%s is longer than %d bytes", e.What, e.Limit)
}

func (w *textWriter) tooLong() error {
	return &TextLimitError{What: "a value whose text", Limit: w.limit}
}

func (w *textWriter) str(s string) {
	w.n += len(s)
	if !w.count {
		w.b.WriteString(s)
	}
}

// quoted writes s quoted (bytes: b"..."), checking its size first: quoting
// makes it longer, never shorter.
func (w *textWriter) quoted(s string, bytes bool) error {
	if w.n+len(s)+2 > w.limit {
		return w.tooLong()
	}
	if w.count {
		w.n += len(s) + 2
		return nil
	}
	w.str(syntax.Quote(s, bytes))
	return nil
}

func (w *textWriter) value(x starlark.Value, depth int) error {
	if depth > maxDepth {
		return errNested
	}
	if r, ok := x.(*record); ok {
		x = r.Dict // a record's text is its dict's
	}
	if w.line > 0 {
		w.n += w.line + depth*w.indent
	}
	if w.n > w.limit {
		return w.tooLong()
	}
	switch x := x.(type) {
	case nil:
		w.str("<nil>")
	case starlark.String:
		return w.quoted(string(x), false)
	case starlark.Bytes:
		return w.quoted(string(x), true)
	case starlark.Int:
		if intTooLong(x, w.limit-w.n) {
			return w.tooLong()
		}
		w.str(x.String())
	case *starlark.List:
		return w.container(unsafe.Pointer(x), "[", "]", depth, func() error { return w.elems(x.Elements(), depth) })
	case starlark.Tuple:
		w.str("(")
		if err := w.elems(x.Elements(), depth); err != nil {
			return err
		}
		if len(x) == 1 {
			w.str(",")
		}
		w.str(")")
	case *starlark.Set:
		w.str("set([")
		if err := w.elems(x.Elements(), depth); err != nil {
			return err
		}
		w.str("])")
	case *starlark.Dict:
		return w.container(unsafe.Pointer(x), "{", "}", depth, func() error {
			sep := ""
			for k, v := range x.Entries() {
				w.str(sep)
				sep = ", "
				if err := w.value(k, depth+1); err != nil {
					return err
				}
				w.str(": ")
				if err := w.value(v, depth+1); err != nil {
					return err
				}
			}
			return nil
		})
	case *starlarkstruct.Struct:
		if c, ok := x.Constructor().(starlark.String); ok {
			w.str(c.GoString())
		} else {
			w.str(x.Constructor().String())
		}
		return w.container(unsafe.Pointer(x), "(", ")", depth, func() error {
			for i := range x.Len() {
				name, v := x.AttrAt(i)
				if i > 0 {
					w.str(", ")
				}
				w.str(name)
				w.str(" = ")
				if err := w.value(v, depth+1); err != nil {
					return err
				}
			}
			return nil
		})
	default:
		// None, bools, floats, functions, modules, times: short texts
		// that hold no other value.
		w.str(x.String())
	}
	if w.n > w.limit {
		return w.tooLong()
	}
	return nil
}

// container writes open, then body unless x is being written already
// ("..."), then close.
func (w *textWriter) container(x unsafe.Pointer, open, close string, depth int, body func() error) error {
	w.str(open)
	if slices.Contains(w.path, x) {
		w.str("...")
	} else {
		w.path = append(w.path, x)
		err := body()
		w.path = w.path[:len(w.path)-1]
		if err != nil {
			return err
		}
	}
	w.str(close)
	if w.line > 0 {
		w.n += w.line + depth*w.indent // the closing line
	}
	if w.n > w.limit {
		return w.tooLong()
	}
	return nil
}

func (w *textWriter) elems(seq func(func(starlark.Value) bool), depth int) error {
	var err error
	i := 0
	seq(func(v starlark.Value) bool {
		if i > 0 {
			w.str(", ")
		}
		i++
		err = w.value(v, depth+1)
		return err == nil
	})
	return err
}

// intTooLong says whether big int x surely has more than left decimal
// digits, without converting it (a big int's text takes long to make); a
// small one is checked once written.
func intTooLong(x starlark.Int, left int) bool {
	if _, ok := x.Int64(); ok {
		return false
	}
	return x.BigInt().BitLen()*3/10 > left // log10(2) > 0.3
}

// valueText is x's text as repr makes it, bounded, but a string as itself
// when rawString is set, and bytes too when rawBytes is (print's way); on
// a text past limit it returns what fit and the error.
func valueText(x starlark.Value, rawString, rawBytes bool, limit int) (string, error) {
	raw, ok := x.(starlark.String)
	if b, isBytes := x.(starlark.Bytes); isBytes && rawBytes {
		raw, ok = starlark.String(b), true
	}
	if ok && rawString {
		if len(raw) > limit {
			return string(raw[:limit]), &TextLimitError{What: "a value whose text", Limit: limit}
		}
		return string(raw), nil
	}
	w := &textWriter{limit: limit}
	err := w.value(x, 0)
	s := w.b.String()
	if len(s) > limit {
		s = s[:limit]
	}
	return s, err
}

// boundedBuiltins are str, repr, print and fail, Starlark's own but with
// the bounds of MaxTextBytes (print: maxPrintBytes, cut rather than
// refused; fail: MaxOutputBytes, cut).
func boundedBuiltins() starlark.StringDict {
	universal := starlark.Universe["str"].(*starlark.Builtin)
	return starlark.StringDict{
		"str": starlark.NewBuiltin("str", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if len(args) == 1 && len(kwargs) == 0 {
				switch args[0].(type) {
				case starlark.String, starlark.Bytes:
					// The string itself, or the bytes as UTF-8.
					return starlark.Call(th, universal, args, nil)
				}
				s, err := valueText(args[0], false, false, MaxTextBytes)
				if err != nil {
					return nil, fmt.Errorf("str: %v", err)
				}
				return starlark.String(s), nil
			}
			return starlark.Call(th, universal, args, kwargs) // its errors
		}),
		"repr": starlark.NewBuiltin("repr", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var x starlark.Value
			if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &x); err != nil {
				return nil, err
			}
			s, err := valueText(x, false, false, MaxTextBytes)
			if err != nil {
				return nil, fmt.Errorf("repr: %v", err)
			}
			return starlark.String(s), nil
		}),
		"print": starlark.NewBuiltin("print", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			msg, err := joinText("print", args, kwargs, maxPrintBytes)
			if err != nil {
				return nil, err
			}
			if th.Print != nil {
				th.Print(th, msg)
			}
			return starlark.None, nil
		}),
		"fail": starlark.NewBuiltin("fail", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			msg, err := joinText("fail", args, kwargs, MaxOutputBytes)
			if err != nil {
				return nil, err
			}
			return nil, errors.New("fail: " + msg)
		}),
	}
}

// joinText is print's and fail's message: the arguments' texts (strings
// raw) joined by sep; a message past limit is cut to it and says so.
func joinText(fn string, args starlark.Tuple, kwargs []starlark.Tuple, limit int) (string, error) {
	sep := " "
	if err := starlark.UnpackArgs(fn, nil, kwargs, "sep?", &sep); err != nil {
		return "", err
	}
	var b strings.Builder
	for i, v := range args {
		if i > 0 {
			b.WriteString(sep)
		}
		s, err := valueText(v, true, fn == "print", max(limit-b.Len(), 0))
		b.WriteString(s)
		var tl *TextLimitError
		if errors.As(err, &tl) || b.Len() > limit {
			return withCutNote(b.String(), limit), nil
		}
		if err != nil {
			return "", fmt.Errorf("%s: %v", fn, err)
		}
	}
	return b.String(), nil
}

// jsonModule is go.starlark.net's json module with its conversions
// bounded: encode and encode_indent check the value's depth and size
// first, indent the size of the indented text, decode the depth of the
// document (its parser recurses once per level).
func jsonModule() *starlarkstruct.Module {
	orig := sljson.Module.Members
	m := &starlarkstruct.Module{Name: "json", Members: starlark.StringDict{}}
	for name, v := range orig {
		m.Members[name] = v
	}
	call := func(th *starlark.Thread, name string, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		return starlark.Call(th, orig[name], args, kwargs)
	}
	// checked returns an error if x's JSON (counted as its text, and for
	// encode_indent each value on a line of its own) would be too long.
	checked := func(name string, args starlark.Tuple, kwargs []starlark.Tuple) error {
		if len(args) != 1 {
			return nil // the original's error
		}
		w := &textWriter{limit: MaxTextBytes, count: true}
		if name == "encode_indent" {
			prefix, indent := "", "\t"
			if err := starlark.UnpackArgs("json.encode_indent", nil, kwargs, "prefix?", &prefix, "indent?", &indent); err != nil {
				return err
			}
			w.line, w.indent = 1+len(prefix), len(indent)
		}
		if err := w.value(args[0], 0); err != nil {
			return fmt.Errorf("json.%s: %v", name, err)
		}
		return nil
	}
	for _, name := range []string{"encode", "encode_indent"} {
		m.Members[name] = starlark.NewBuiltin("json."+name, func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if err := checked(name, args, kwargs); err != nil {
				return nil, err
			}
			v, err := call(th, name, args, kwargs)
			if s, ok := v.(starlark.String); ok && len(s) > MaxTextBytes {
				return nil, fmt.Errorf("json.%s: %v", name, &TextLimitError{What: "a value whose text", Limit: MaxTextBytes})
			}
			return v, err
		})
	}
	m.Members["indent"] = starlark.NewBuiltin("json.indent", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		prefix, indent := "", "\t"
		if err := starlark.UnpackArgs(b.Name(), nil, kwargs, "prefix?", &prefix, "indent?", &indent); err == nil && len(args) == 1 {
			if s, ok := args[0].(starlark.String); ok {
				if n := indentedSize(string(s), len(prefix), len(indent)); n > MaxTextBytes {
					return nil, fmt.Errorf("json.indent: %v", &TextLimitError{What: "indented text", Limit: MaxTextBytes})
				}
			}
		}
		return call(th, "indent", args, kwargs)
	})
	m.Members["decode"] = starlark.NewBuiltin("json.decode", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if len(args) > 0 {
			if s, ok := args[0].(starlark.String); ok && jsonDepth(string(s)) > maxDepth {
				return nil, fmt.Errorf("json.decode: JSON nested more than %d deep", maxDepth)
			}
			// Reading a decimal integer costs time quadratic in its length,
			// in one step the deadline cannot stop: the bound of a call's
			// arguments (MaxIntDigits, convert.go).
			if s, ok := args[0].(starlark.String); ok {
				if n := jsonLongestInt(string(s)); n > MaxIntDigits {
					return nil, fmt.Errorf("json.decode: an integer of %d digits: at most %d (MaxIntDigits)", n, MaxIntDigits)
				}
			}
		}
		return call(th, "decode", args, kwargs)
	})
	return m
}

// jsonLongestInt is the count of digits of the longest integer of JSON
// text s outside its strings (a number with a fraction or an exponent is
// read as a float, which costs no more than its length).
func jsonLongestInt(s string) int {
	longest := 0
	jsonOutside(s, func(i int) int {
		if c := s[i]; c < '0' || c > '9' {
			return i + 1
		}
		j := i
		for j < len(s) && '0' <= s[j] && s[j] <= '9' {
			j++
		}
		if j < len(s) && (s[j] == '.' || s[j] == 'e' || s[j] == 'E') {
			for j < len(s) && strings.IndexByte("0123456789.eE+-", s[j]) >= 0 {
				j++
			}
		} else {
			longest = max(longest, j-i)
		}
		return j
	})
	return longest
}

// jsonScan calls f for each bracket, comma and colon of JSON text s
// outside its strings, with the depth before it.
func jsonScan(s string, f func(c byte, depth int)) {
	depth := 0
	jsonOutside(s, func(i int) int {
		switch c := s[i]; c {
		case '[', '{':
			f(c, depth)
			depth++
		case ']', '}':
			f(c, depth)
			depth--
		case ',', ':':
			f(c, depth)
		}
		return i + 1
	})
}

// jsonOutside calls f with the index of each byte of JSON text s that is
// not inside a string (a string's quotes are inside it); f returns the
// index to go on from, past what it read.
func jsonOutside(s string, f func(i int) int) {
	for i := 0; i < len(s); {
		if s[i] != '"' {
			i = f(i)
			continue
		}
		for i++; i < len(s); i++ { // to the closing quote, escapes skipped
			if s[i] == '\\' {
				i++
			} else if s[i] == '"' {
				i++
				break
			}
		}
	}
}

// jsonDepth is the deepest nesting of JSON text s.
func jsonDepth(s string) int {
	deepest := 0
	jsonScan(s, func(c byte, depth int) {
		if (c == '[' || c == '{') && depth+1 > deepest {
			deepest = depth + 1
		}
	})
	return deepest
}

// indentedSize bounds the length of json.indent's text of s: a newline,
// the prefix and depth indents after each opening bracket and comma and
// before each closing bracket, a space after each colon.
func indentedSize(s string, prefix, indent int) int {
	n := len(s)
	jsonScan(s, func(c byte, depth int) {
		switch c {
		case '[', '{':
			n += 1 + prefix + (depth+1)*indent
		case ']', '}':
			n += 1 + prefix + max(depth-1, 0)*indent
		case ',':
			n += 1 + prefix + depth*indent
		case ':':
			n++
		}
		if n > MaxTextBytes {
			n = MaxTextBytes + 1 // and stays past it
		}
	})
	return n
}

package extensions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"sort"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// maxDepth bounds the nesting converted either way.
const maxDepth = 100

// FromJSON converts a JSON document into Starlark values: objects become
// dicts (keys in document order), arrays lists, numbers ints when they are
// integers (of any size: big ones stay exact) and floats otherwise, null
// None.
func FromJSON(data []byte) (starlark.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := fromJSON(dec, 0)
	if err != nil {
		return nil, err
	}
	// Token, not More: More is false before a stray ']' or '}'.
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("json: unexpected data after the value")
	}
	return v, nil
}

func fromJSON(dec *json.Decoder, depth int) (starlark.Value, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("json: nested deeper than %d", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return starlark.None, nil
	case bool:
		return starlark.Bool(t), nil
	case string:
		return starlark.String(t), nil
	case json.Number:
		return number(string(t))
	case json.Delim:
		switch t {
		case '{':
			d := starlark.NewDict(0)
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := fromJSON(dec, depth+1)
				if err != nil {
					return nil, err
				}
				if err := d.SetKey(starlark.String(kt.(string)), v); err != nil {
					return nil, err
				}
			}
			_, err := dec.Token()
			return d, err
		case '[':
			var elems []starlark.Value
			for dec.More() {
				v, err := fromJSON(dec, depth+1)
				if err != nil {
					return nil, err
				}
				elems = append(elems, v)
			}
			_, err := dec.Token()
			return starlark.NewList(elems), err
		}
	}
	return nil, fmt.Errorf("json: unexpected %v", tok)
}

// MaxIntDigits bounds the decimal digits of an integer in JSON a call's
// arguments or an http response hand an extension (Python's bound, since
// CVE-2020-10735): reading a decimal integer costs time quadratic in its
// length (a million digits took 2 s, three million 19 s), spent before the
// call's thread starts and so outside its deadline.
const MaxIntDigits = 4300

func number(s string) (starlark.Value, error) {
	if !strings.ContainsAny(s, ".eE") && len(strings.TrimPrefix(s, "-")) > MaxIntDigits {
		return nil, fmt.Errorf("json: an integer of %d digits: at most %d (MaxIntDigits)", len(strings.TrimPrefix(s, "-")), MaxIntDigits)
	}
	if i, ok := new(big.Int).SetString(s, 10); ok {
		return starlark.MakeBigInt(i), nil
	}
	var f float64
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		return nil, fmt.Errorf("json: number %s: %v", s, err)
	}
	return starlark.Float(f), nil
}

// ToJSON converts a Starlark value into JSON: None null, bools, ints of any
// size (exact), finite floats, strings, lists and tuples arrays, dicts with
// string keys and structs objects (keys sorted). Anything else — a
// function, a set, a non-string key, NaN — is an error naming what, and so
// is a value nested deeper than maxDepth or whose JSON is longer than
// MaxTextBytes (a *TextLimitError), found before more is written.
func ToJSON(v starlark.Value) ([]byte, error) {
	return toJSONLimit(v, MaxTextBytes)
}

func toJSONLimit(v starlark.Value, limit int) ([]byte, error) {
	j := jsonWriter{limit: limit}
	if err := j.value(v, 0); err != nil {
		return nil, err
	}
	return j.b.Bytes(), nil
}

type jsonWriter struct {
	b     bytes.Buffer
	limit int
}

func (j *jsonWriter) value(v starlark.Value, depth int) error {
	b := &j.b
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d", maxDepth)
	}
	if b.Len() > j.limit {
		return j.tooLong()
	}
	switch x := v.(type) {
	case starlark.NoneType:
		b.WriteString("null")
	case starlark.Bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case starlark.Int:
		if intTooLong(x, j.limit-b.Len()) {
			return j.tooLong()
		}
		b.WriteString(x.String())
	case starlark.Float:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%v has no JSON form", x)
		}
		out, _ := json.Marshal(f)
		b.Write(out)
	case starlark.String:
		return j.str(string(x))
	case starlark.Bytes:
		return j.str(string(x))
	case *starlark.List:
		return j.array(x.Len(), x.Index, depth)
	case starlark.Tuple:
		return j.array(x.Len(), x.Index, depth)
	case *starlark.Dict:
		type kv struct {
			k string
			v starlark.Value
		}
		var items []kv
		for _, it := range x.Items() {
			k, ok := it[0].(starlark.String)
			if !ok {
				return fmt.Errorf("a dict key %s is not a string", it[0].Type())
			}
			items = append(items, kv{string(k), it[1]})
		}
		sort.Slice(items, func(i, j int) bool { return items[i].k < items[j].k })
		b.WriteByte('{')
		for i, it := range items {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(it.k)
			b.Write(k)
			b.WriteByte(':')
			if err := j.value(it.v, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case *record:
		return j.value(x.Dict, depth)
	case *starlarkstruct.Struct:
		d := starlark.StringDict{}
		x.ToStringDict(d)
		dict := starlark.NewDict(len(d))
		for k, v := range d {
			dict.SetKey(starlark.String(k), v)
		}
		return j.value(dict, depth)
	default:
		return fmt.Errorf("a %s has no JSON form", v.Type())
	}
	if b.Len() > j.limit {
		return j.tooLong()
	}
	return nil
}

func (j *jsonWriter) tooLong() error {
	return &TextLimitError{What: "a value whose JSON", Limit: j.limit}
}

// str writes s as a JSON string, checking its size first (quoted, it is
// never shorter).
func (j *jsonWriter) str(s string) error {
	if j.b.Len()+len(s)+2 > j.limit {
		return j.tooLong()
	}
	out, _ := json.Marshal(s)
	j.b.Write(out)
	return nil
}

func (j *jsonWriter) array(n int, at func(int) starlark.Value, depth int) error {
	j.b.WriteByte('[')
	for i := range n {
		if i > 0 {
			j.b.WriteByte(',')
		}
		if err := j.value(at(i), depth+1); err != nil {
			return err
		}
	}
	j.b.WriteByte(']')
	return nil
}

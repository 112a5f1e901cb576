package extensions

import (
	"slices"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// record is the result of exec.run and of the http calls: a frozen dict
// that answers attribute access too. starlark-mcp's extensions index it
// (result["success"], response.get("json", {})); earlier extensions of
// ours read result.success. Its keys are the dict's; its methods (get,
// keys, items, values) are a dict's, and an attribute that is not one of
// them is the key of that name.
//
// Its type is its own name ("result", "response"), not "dict": Starlark's
// dict compares itself only with a *starlark.Dict, so a record that called
// itself a dict would make r == {...} fail inside the interpreter.
type record struct {
	*starlark.Dict
	kind string
}

var (
	_ starlark.HasAttrs        = (*record)(nil)
	_ starlark.IterableMapping = (*record)(nil)
	_ starlark.Sequence        = (*record)(nil)
	_ starlark.Comparable      = (*record)(nil)
)

// newRecord freezes fields into a record; keys are in sorted order.
func newRecord(kind string, fields starlark.StringDict) *record {
	d := starlark.NewDict(len(fields))
	for _, k := range fields.Keys() {
		d.SetKey(starlark.String(k), fields[k])
	}
	d.Freeze()
	return &record{Dict: d, kind: kind}
}

func (r *record) Type() string { return r.kind }

// Attr is a dict method first (get, keys, …), then the key of that name.
func (r *record) Attr(name string) (starlark.Value, error) {
	if v, err := r.Dict.Attr(name); v != nil || err != nil {
		return v, err
	}
	v, found, err := r.Get(starlark.String(name))
	if err != nil || !found {
		return nil, err // Starlark: "result has no .name field or method"
	}
	return v, nil
}

// AttrNames are the dict's methods and the record's keys.
func (r *record) AttrNames() []string {
	names := r.Dict.AttrNames()
	for _, k := range r.Keys() {
		if s, ok := k.(starlark.String); ok {
			names = append(names, string(s))
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// CompareSameType compares two records of one kind as dicts.
func (r *record) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	return r.Dict.CompareSameType(op, y.(*record).Dict, depth)
}

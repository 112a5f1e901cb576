package extensions

import (
	"database/sql"
	"fmt"
	"time"

	"go.starlark.net/starlark"
)

// Bounds of what one sqlite or postgres call returns.
const (
	MaxSQLRows        = 10_000  // rows of one query
	MaxSQLResultBytes = 4 << 20 // the values of one query's rows, summed
	MaxSQLParams      = 1_000   // parameters of one statement
)

// sqlParams converts params=[...] (a list or tuple; None for none) into
// bound values: None, bool, int (64 bits), float, string and bytes.
// Nothing is ever spliced into the SQL.
func sqlParams(fn string, params starlark.Value) ([]any, error) {
	var seq starlark.Indexable
	switch v := params.(type) {
	case nil, starlark.NoneType:
		return nil, nil
	case *starlark.List:
		seq = v
	case starlark.Tuple:
		seq = v
	default:
		return nil, fmt.Errorf("%s: params must be a list of values, not a %s", fn, params.Type())
	}
	if seq.Len() > MaxSQLParams {
		return nil, fmt.Errorf("%s: params: %d values; the limit is %d", fn, seq.Len(), MaxSQLParams)
	}
	out := make([]any, seq.Len())
	for i := range seq.Len() {
		switch v := seq.Index(i).(type) {
		case starlark.NoneType:
			out[i] = nil
		case starlark.Bool:
			out[i] = bool(v)
		case starlark.Int:
			n, ok := v.Int64()
			if !ok {
				return nil, fmt.Errorf("%s: params[%d]: %s does not fit in 64 bits", fn, i, v)
			}
			out[i] = n
		case starlark.Float:
			out[i] = float64(v)
		case starlark.String:
			out[i] = string(v)
		case starlark.Bytes:
			out[i] = []byte(v)
		default:
			return nil, fmt.Errorf("%s: params[%d]: a %s cannot be bound (None, bool, int, float, string or bytes)", fn, i, v.Type())
		}
	}
	return out, nil
}

// sqlRows reads rows into a list of dicts (column → value), refusing more
// than MaxSQLRows rows or MaxSQLResultBytes of values: a query that would
// return more is an error that says how to ask for less, not a result cut
// short without a word.
func sqlRows(fn string, rows *sql.Rows) (*starlark.List, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, fmt.Errorf("%s: %v", fn, err)
	}
	var out []starlark.Value
	size := 0
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if len(out) == MaxSQLRows {
			return nil, fmt.Errorf("%s: more than %d rows; select fewer (WHERE, LIMIT) or page with LIMIT and OFFSET", fn, MaxSQLRows)
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("%s: %v", fn, err)
		}
		d := starlark.NewDict(len(cols))
		for i, c := range cols {
			v, n := sqlValue(vals[i])
			size += n + len(c)
			if size > MaxSQLResultBytes {
				return nil, fmt.Errorf("%s: the rows hold more than %d bytes; select fewer rows or columns", fn, MaxSQLResultBytes)
			}
			d.SetKey(starlark.String(c), v)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	return starlark.NewList(out), nil
}

// sqlValue converts one column value and says about how many bytes it
// holds. Times (a driver's reading of a DATE or TIMESTAMP column) become
// RFC 3339 strings; a type without a Starlark twin becomes its text.
func sqlValue(v any) (starlark.Value, int) {
	switch x := v.(type) {
	case nil:
		return starlark.None, 4
	case int64:
		return starlark.MakeInt64(x), 8
	case float64:
		return starlark.Float(x), 8
	case bool:
		return starlark.Bool(x), 1
	case string:
		return starlark.String(x), len(x)
	case []byte:
		return starlark.Bytes(x), len(x)
	case time.Time:
		return starlark.String(x.Format(time.RFC3339Nano)), 32
	default:
		s := fmt.Sprint(x)
		return starlark.String(s), len(s)
	}
}

// sqlExecResult is execute's answer.
func sqlExecResult(res sql.Result) starlark.Value {
	n, err := res.RowsAffected()
	if err != nil {
		n = -1
	}
	id, err := res.LastInsertId()
	var last starlark.Value = starlark.MakeInt64(id)
	if err != nil {
		last = starlark.None // postgres has no last insert id (RETURNING gives it)
	}
	d := starlark.NewDict(2)
	d.SetKey(starlark.String("rows_affected"), starlark.MakeInt64(n))
	d.SetKey(starlark.String("last_insert_id"), last)
	return d
}

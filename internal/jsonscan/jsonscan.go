// Package jsonscan finds the end of a JSON value in bytes without decoding
// it: the one place the hand-written readers of JSON (the stdio face's
// reply drain, the browser's accessibility-tree scanner) skip what they do
// not read, and the one walk of an object's keys as written (Keys). It
// checks no syntax beyond what finding the end needs; a
// reader that must reject bad JSON checks it elsewhere.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// String returns the string at the start of b (quotes included) and
// what follows it. The closing quote is found with bytes.IndexByte, so a
// long string costs a memory scan, not a decode.
func String(b []byte) (str, rest []byte, ok bool) {
	i := 1
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return nil, nil, false
		}
		i += j
		k := i - 1
		for b[k] == '\\' {
			k--
		}
		i++
		if (i-2-k)%2 == 0 { // an even run of backslashes: the quote ends the string
			return b[:i], b[i:], true
		}
	}
}

// Value returns the JSON value at the start of b and what follows it.
func Value(b []byte) (val, rest []byte, ok bool) {
	if len(b) == 0 {
		return nil, nil, false
	}
	switch b[0] {
	case '"':
		return String(b)
	case '{', '[':
		depth := 0
		for i := 0; i < len(b); {
			switch b[i] {
			case '"':
				s, _, ok := String(b[i:])
				if !ok {
					return nil, nil, false
				}
				i += len(s)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return b[:i+1], b[i+1:], true
				}
			}
			i++
		}
		return nil, nil, false
	default: // a number, true, false or null
		i := 0
	scan:
		for ; i < len(b); i++ {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				break scan
			}
		}
		if i == 0 {
			return nil, nil, false
		}
		return b[:i], b[i:], true
	}
}

// Keys calls f with each key of the JSON object at the start of obj (its
// text as encoding/json decodes it) and the key's value, in order, until f
// returns false; ok is false where obj is an object cut short or not an
// object's syntax. A value that is not an object has no keys. It is the
// one walk of an object's keys for the readers that must see them as
// written, where encoding/json folds case and keeps the last of two: the
// MCP fast paths, /execute, the token file.
func Keys(obj []byte, f func(key string, val []byte) bool) (ok bool) {
	obj = skipSpace(obj)
	if len(obj) == 0 || obj[0] != '{' {
		return true
	}
	b := skipSpace(obj[1:])
	for len(b) > 0 && b[0] == '"' {
		key, r, ok := String(b)
		if !ok {
			return false
		}
		r = skipSpace(r)
		if len(r) == 0 || r[0] != ':' {
			return false
		}
		val, after, ok := Value(skipSpace(r[1:]))
		if !ok {
			return false
		}
		if !f(Text(key), val) {
			return true
		}
		if b = skipSpace(after); len(b) > 0 && b[0] == ',' {
			b = skipSpace(b[1:])
		}
	}
	return true
}

// Text is the text of the JSON string s (quotes included) as
// json.Unmarshal decodes it (escapes decoded, invalid UTF-8 replaced).
func Text(s []byte) string {
	if bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		return string(s[1 : len(s)-1])
	}
	var v string
	json.Unmarshal(s, &v)
	return v
}

func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	return b
}

// Package jsonscan finds the end of a JSON value in bytes without decoding
// it: the one place the hand-written readers of JSON (the stdio face's
// reply drain, the browser's accessibility-tree scanner) skip what they do
// not read. It checks no syntax beyond what finding the end needs; a
// reader that must reject bad JSON checks it elsewhere.
package jsonscan

import "bytes"

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

package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// shown is s as it may be written to a terminal: each control character
// (an escape, a carriage return, a C1 control) and each byte that is not
// UTF-8 written as a Go escape (\x1b, \r, \u009b, \xff), the rest as is;
// a newline and a tab too unless keepLines. Errors name files whose names
// another user may choose (a name of theirs in a sticky --extensions
// directory, a link's target): written raw, such a name could move the
// cursor, clear what came before, or (its newline) write a line of its
// own.
func shown(s string, keepLines bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case unicode.IsControl(r):
			q := fmt.Sprintf("%+q", r) // '\x1b', '\n', '\u009b'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

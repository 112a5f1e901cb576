// Package jsonstr writes a Go string as a JSON string, byte for byte as
// encoding/json does, without a reflection pass or an allocation of its
// own: the one JSON string writer of the hand-written encoders (the MCP
// fast paths, directory_tree's JSON, the checkpoint manifest). Standard
// library only, so the file door and the portable client may use it.
package jsonstr

import "unicode/utf8"

const hex = "0123456789abcdef"

// Append appends s as encoding/json.Marshal writes a string:
// quotes, backslash escapes for " \ \b \f \n \r \t, \u00XX for other control
// characters, HTML-safe \u003c \u003e \u0026, \u2028 and \u2029, and
// \ufffd for each byte of invalid UTF-8. TestAppend holds it to
// encoding/json on random input.
func Append(buf []byte, s string) []byte { return appendString(buf, s, true) }

// AppendNoHTML is Append without the HTML-safe escapes: '<',
// '>' and '&' as they are, as a json.Encoder with SetEscapeHTML(false)
// writes them (the reference's JSON.stringify does the same).
func AppendNoHTML(buf []byte, s string) []byte { return appendString(buf, s, false) }

// appendString writes s as a JSON string, with the HTML-safe escapes when
// html is set.
func appendString(buf []byte, s string, html bool) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && (!html || b != '<' && b != '>' && b != '&') {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch b {
			case '"', '\\':
				buf = append(buf, '\\', b)
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

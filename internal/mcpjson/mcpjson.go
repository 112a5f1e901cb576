// Package mcpjson writes the JSON of an MCP CallToolResult byte for byte as
// the go-sdk (and encoding/json) do, without their copies: the MCP face's
// fast path and the /gateway face answer with it, so a client reads the
// same bytes on both.
package mcpjson

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// AppendResult appends res as the SDK marshals it. A result of plain text
// blocks — every file tool — is written straight into buf: encoding/json
// would build each nested Marshaler's output and copy it again per level,
// several copies of a file's text per call. Anything else is marshalled the
// ordinary way.
func AppendResult(buf []byte, res *mcp.CallToolResult) ([]byte, error) {
	if !PlainText(res) {
		b, err := json.Marshal(res)
		if err != nil {
			return nil, err
		}
		return append(buf, b...), nil
	}
	buf = append(buf, `{"content":[`...)
	for i, c := range res.Content {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"type":"text","text":`...)
		buf = AppendString(buf, c.(*mcp.TextContent).Text)
		buf = append(buf, '}')
	}
	buf = append(buf, ']')
	if res.IsError {
		buf = append(buf, `,"isError":true`...)
	}
	return append(buf, '}'), nil
}

// PlainText reports whether res is text blocks only, with nothing else set.
func PlainText(res *mcp.CallToolResult) bool {
	if res.Meta != nil || res.StructuredContent != nil || res.InputRequests != nil || res.Content == nil {
		return false
	}
	for _, c := range res.Content {
		t, ok := c.(*mcp.TextContent)
		if !ok || t.Meta != nil || t.Annotations != nil {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as encoding/json.Marshal writes a string:
// quotes, backslash escapes for " \ \b \f \n \r \t, \u00XX for other control
// characters, HTML-safe \u003c \u003e \u0026, \u2028 and \u2029, and
// \ufffd for each byte of invalid UTF-8. TestAppendString holds it to
// encoding/json on random input.
func AppendString(buf []byte, s string) []byte { return appendString(buf, s, true) }

// AppendStringNoHTML is AppendString without the HTML-safe escapes: '<',
// '>' and '&' as they are, as a json.Encoder with SetEscapeHTML(false)
// writes them (the reference's JSON.stringify does the same).
func AppendStringNoHTML(buf []byte, s string) []byte { return appendString(buf, s, false) }

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
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
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
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

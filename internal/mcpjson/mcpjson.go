// Package mcpjson writes the JSON of an MCP CallToolResult byte for byte as
// the go-sdk (and encoding/json) do, without their copies: the MCP face's
// fast path and the /gateway face answer with it, so a client reads the
// same bytes on both.
package mcpjson

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/internal/jsonstr"
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

// AppendString appends s as encoding/json.Marshal writes a string
// (internal/jsonstr, the one JSON string writer).
func AppendString(buf []byte, s string) []byte { return jsonstr.Append(buf, s) }

// Package toolkit holds what the registry's tool providers write the same
// way: strict argument decoding, JSON results, error results carrying their
// code, and object schemas.
package toolkit

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// Decode reads a call's arguments strictly into v (unknown fields are an
// INVALID_ARGUMENT error; no arguments are {}).
func Decode(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "arguments", Msg: err.Error()}
	}
	return nil
}

// OK is a result carrying v as JSON text and structured content.
func OK(v any) *mcp.CallToolResult {
	b, err := json.Marshal(v)
	if err != nil {
		return Fail(err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}
}

// Fail is an error result with the error's code (EXEC_ERROR when it has
// none).
func Fail(err error) *mcp.CallToolResult {
	code := errcode.Of(err)
	if code == "" {
		code = errcode.ExecError
	}
	return registry.WithCode(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: errcode.Sentence(err)}}}, code)
}

// Failf is Fail of a new error.
func Failf(code errcode.Code, op, format string, args ...any) *mcp.CallToolResult {
	return Fail(&errcode.Error{Code: code, Op: op, Msg: fmt.Sprintf(format, args...)})
}

// Schema is an object schema with these properties, no others.
func Schema(props map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

package gatewayface

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// Result formats of tools.invoke: the MCP CallToolResult (the default,
// what /mcp sends), or the gateway tools plan's ToolResult envelope
// (docs/gateway-tools.md, "Result formats"). A connection picks its default
// with ?resultFormat= on the upgrade; a call overrides it with
// params.resultFormat.
const (
	FormatMCP        = "mcp"
	FormatToolResult = "toolResult"
)

// MaxSessionID bounds the sessionId a client names (it keys per-session
// state and is written to the audit log).
const MaxSessionID = 128

// parseFormat reads a resultFormat value ("" is def).
func parseFormat(v, def string) (string, error) {
	switch {
	case v == "":
		return def, nil
	case strings.EqualFold(v, FormatMCP):
		return FormatMCP, nil
	case strings.EqualFold(v, FormatToolResult):
		return FormatToolResult, nil
	}
	return "", fmt.Errorf("resultFormat %q: use %q (the MCP CallToolResult, the default) or %q (the {ok, data, error, meta} envelope)", clip.String(v, 40), FormatMCP, FormatToolResult)
}

// ToolResult is the gateway tools plan's result envelope.
type ToolResult struct {
	OK    bool           `json:"ok"`
	Data  any            `json:"data,omitempty"`
	Error *ToolError     `json:"error,omitempty"`
	Meta  ToolResultMeta `json:"meta"`
}

// ToolError is a failed ToolResult's error: Code is the errcode the tool
// named (INVALID_ARGUMENT, PATH_ESCAPE_ATTEMPT, …; TOOL_ERROR when it named
// none, as an upstream server's tools do), Message its text, Details its
// structured content when it had some.
type ToolError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details any    `json:"details,omitempty"`
}

// ToolResultMeta is a ToolResult's meta: the call's duration as the
// daemon measured it, and whether the tool said it cut its output.
type ToolResultMeta struct {
	DurationMs float64 `json:"durationMs"`
	Truncated  bool    `json:"truncated,omitempty"`
}

// CodeToolError is ToolError.Code of a failure that names no errcode.
const CodeToolError = "TOOL_ERROR"

// envelope turns a tool's result into a ToolResult. data is the result's
// structured content when it has some (the gateway tools' objects), else
// its text (the text blocks joined by newlines), else its content blocks
// as MCP has them (images, resources).
func envelope(res *mcp.CallToolResult, ms float64) ToolResult {
	var structured json.RawMessage
	if res.StructuredContent != nil {
		if raw, ok := res.StructuredContent.(json.RawMessage); ok {
			structured = raw
		} else if b, err := json.Marshal(res.StructuredContent); err == nil {
			structured = b
		}
	}
	out := ToolResult{OK: !res.IsError, Meta: ToolResultMeta{DurationMs: ms, Truncated: truncated(structured)}}
	var data any
	switch text, allText := joinText(res); {
	case structured != nil:
		data = structured
	case allText && len(res.Content) > 0:
		data = text
	case len(res.Content) > 0:
		data = res.Content
	}
	if !res.IsError {
		out.Data = data
		return out
	}
	code := string(registry.Code(res))
	if code == "" {
		code = CodeToolError
	}
	text, _ := joinText(res)
	out.Error = &ToolError{Code: code, Message: text}
	if structured != nil {
		out.Error.Details = structured
	}
	return out
}

// joinText joins the text blocks of res, and says whether every block is
// text.
func joinText(res *mcp.CallToolResult) (string, bool) {
	var parts []string
	all := true
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		} else {
			all = false
		}
	}
	return strings.Join(parts, "\n"), all
}

// truncated reports whether structured content is an object whose
// "truncated" is true (fs.list, fs.glob, http.request, browser snapshots).
func truncated(structured json.RawMessage) bool {
	if len(structured) == 0 || structured[0] != '{' {
		return false
	}
	var v struct {
		Truncated bool `json:"truncated"`
	}
	return json.Unmarshal(structured, &v) == nil && v.Truncated
}

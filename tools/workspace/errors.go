package workspace

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/internal/tooltext"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// This file maps workspace errors to the texts of isError tool results, once
// for all tools. The reference's texts are kept as prefixes, because prompts
// and client code match on them ("Failed to read file: <path>", "Path escapes
// scope boundary: <path>", "Dangerous operation blocked: <command>"), and the
// reason is appended after " - " so an agent knows what to do next. Host
// paths never appear: the reference leaks them ("scandir '/srv/ws/x'"), we
// only name the path the caller gave.

// failure prefixes, as the reference words them per operation.
const (
	failRead    = "Failed to read file"
	failWrite   = "Failed to write file"
	failReadDir = "Failed to read directory"
	failMkdir   = "Failed to create directory"
	failStat    = "Failed to stat path"
	failMove    = "Failed to move file"
	failSearch  = "Failed to search files"
	failGrep    = "Failed to grep"
	failCwd     = "Invalid cwd"
)

// errorText renders err from an operation on p as the reference words it
// (internal/tooltext).
func errorText(prefix, p string, err error) string { return tooltext.ErrorText(prefix, p, err) }

// toolError is an isError result with one text block.
func toolError(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// failure is the error result of an operation on p that failed with err,
// worded by errorText and marked with err's code (registry.WithCode), so a
// face that answers with a status (REST: 400 for an escape) need not parse
// the text. The MCP face removes the mark: MCP clients get the reference's
// result, byte for byte.
func failure(prefix, p string, err error) *mcp.CallToolResult {
	res := toolError(errorText(prefix, p, err))
	if code := errcode.Of(err); code != "" {
		registry.WithCode(res, code)
	}
	return res
}

// textResult is a successful result with one text block.
func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

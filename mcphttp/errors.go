package mcphttp

import (
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
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
)

// errorText renders err from an operation on p (the argument as the caller
// gave it) as the reference would, with the reason appended.
func errorText(prefix, p string, err error) string {
	var e *errcode.Error
	if !errors.As(err, &e) {
		return prefix + ": " + p + " - " + err.Error()
	}
	switch e.Code {
	case errcode.PathEscapeAttempt:
		return "Path escapes scope boundary: " + p
	case errcode.EditFailed:
		// "edit N: ..." already says which edit and what to do.
		return e.Msg
	}
	return prefix + ": " + p + " - " + reason(e)
}

// reason is the human part of e without a trailing repetition of its path
// (fsops messages end in ": <path>", which our prefix already names).
func reason(e *errcode.Error) string {
	msg := e.Msg
	if msg == "" {
		if e.Err != nil {
			msg = e.Err.Error()
		} else {
			msg = strings.ToLower(strings.ReplaceAll(string(e.Code), "_", " "))
		}
	}
	if e.Path != "" {
		msg = strings.TrimSuffix(msg, ": "+e.Path)
	}
	switch e.Code {
	case errcode.IsADirectory:
		if msg == "is a directory" {
			msg += " (use list_directory or directory_tree to see what is in it)"
		}
	}
	return msg
}

// toolError is an isError result with one text block.
func toolError(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// textResult is a successful result with one text block.
func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

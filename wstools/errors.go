package wstools

import (
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/registry"
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

// reason is the human part of e, worded as the reference words it. e.Msg
// is the fact without the path (which our prefix names); where the
// reference names the path inside its reason, it is put back there: before
// a hint ("is a directory: a.txt (use ...)"), and in the sentences of
// fsops's ENOTDIR, ENOSPC and EINVAL texts.
func reason(e *errcode.Error) string {
	msg := e.Msg
	if msg == "" {
		if e.Err != nil {
			msg = e.Err.Error()
		} else {
			msg = strings.ToLower(strings.ReplaceAll(string(e.Code), "_", " "))
		}
	}
	switch {
	case e.Path == "":
		if e.Hint != "" {
			msg += " (" + e.Hint + ")"
		}
	case e.Hint == fsops.HintComponentIsFile:
		msg += ": a component of " + e.Path + " is a file"
	case e.Hint == fsops.HintPathIsFile:
		msg += ": " + e.Path + " is a file"
	case e.Msg == fsops.MsgInvalidArgument && e.Code == errcode.InvalidArgument:
		msg += ": " + e.Path + ": " + e.Hint
	case e.Msg == fsops.MsgNoSpace && e.Code == errcode.WriteFailed:
		msg += " writing " + e.Path
	case e.Hint != "":
		msg = e.Sentence()
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

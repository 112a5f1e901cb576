// Package tooltext words workspace errors as the text of a tool's error
// result, as the reference daemon (agent-backend 0.13.2) words them: its
// texts are kept as prefixes, because prompts and client code match on them
// ("Failed to read file: <path>", "Path escapes scope boundary: <path>"),
// and the reason follows " - " so an agent knows what to do next. Host paths
// never appear: only the path the caller gave is named. The workspace tools
// (tools/workspace) word their failures with it, and the MCP face its
// scope errors.
package tooltext

import (
	"errors"
	"strings"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// ErrorText renders err from an operation on p (the argument as the caller
// gave it) as the reference would, with the reason appended.
func ErrorText(prefix, p string, err error) string {
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
	return prefix + ": " + p + " - " + Reason(e)
}

// Reason is the human part of e, worded as the reference words it. e.Msg
// is the fact without the path (which our prefix names); where the
// reference names the path inside its reason, it is put back there: before
// a hint ("is a directory: a.txt (use ...)"), and in the sentences of
// fsops's ENOTDIR, ENOSPC and EINVAL texts.
func Reason(e *errcode.Error) string {
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

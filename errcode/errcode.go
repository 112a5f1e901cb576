// Package errcode defines the typed error every workspace operation returns.
//
// The codes are the ones of the Agent Backend specification (PATH_ESCAPE_ATTEMPT,
// DANGEROUS_OPERATION, EXEC_FAILED, ...). fsops and sandbox return *Error; each
// protocol package (mcphttp, sshws) maps a Code once to its own status: an MCP
// isError text, an SFTP status, an HTTP code. Callers test with errors.As, or with
// Of for just the code; wrapped OS errors stay reachable through Unwrap, so
// errors.Is(err, fs.ErrNotExist) keeps working.
package errcode

import (
	"errors"
	"fmt"
	"strings"
)

// Code identifies a failure mode. The string values are wire-visible: clients
// match on them, so they never change.
type Code string

// Codes of the specification ("Error Codes" table) plus the file-level ones the
// tools and SFTP need to tell apart.
const (
	EmptyCommand         Code = "EMPTY_COMMAND"
	UnsafeCommand        Code = "UNSAFE_COMMAND"
	ExecFailed           Code = "EXEC_FAILED"
	ExecError            Code = "EXEC_ERROR"
	ReadFailed           Code = "READ_FAILED"
	WriteFailed          Code = "WRITE_FAILED"
	LsFailed             Code = "LS_FAILED"
	PathEscapeAttempt    Code = "PATH_ESCAPE_ATTEMPT"
	MissingUtilities     Code = "MISSING_UTILITIES"
	InvalidConfiguration Code = "INVALID_CONFIGURATION"
	DangerousOperation   Code = "DANGEROUS_OPERATION"
	ConnectionClosed     Code = "CONNECTION_CLOSED"
	KeyNotFound          Code = "KEY_NOT_FOUND"
	NotImplemented       Code = "NOT_IMPLEMENTED"
	AuthFailed           Code = "AUTH_FAILED" // the daemon refused the credentials (a remote backend never retries it)

	NotFound         Code = "NOT_FOUND"
	AlreadyExists    Code = "ALREADY_EXISTS"
	NotADirectory    Code = "NOT_A_DIRECTORY"
	IsADirectory     Code = "IS_A_DIRECTORY"
	PermissionDenied Code = "PERMISSION_DENIED"
	TooLarge         Code = "TOO_LARGE"
	InvalidArgument  Code = "INVALID_ARGUMENT"
	EditFailed       Code = "EDIT_FAILED"
	Timeout          Code = "TIMEOUT"
)

// Error is a failure with a code, the operation that failed and the subject it
// failed on (a path as the caller gave it, or a command). Like os.PathError,
// the fields hold facts and Error() puts them together: Msg and Hint never
// repeat Path or Command, which Error() names once.
//
// An *Error is not changed after it is returned: code that adds to one (a
// different Op for an operation built on another, see WithOp) builds a new
// one that wraps it.
type Error struct {
	Code    Code
	Op      string // "read", "write", "exec", ...
	Path    string // the path as the caller gave it, when there is one
	Command string // the command, for exec failures and blocked commands
	Msg     string // what went wrong ("no such file or directory"), without the path
	Hint    string // what to do about it, or what else is known, when there is something
	Err     error  // underlying cause, if any
}

// Error renders `op "path": msg (hint)`.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(" ")
	}
	switch {
	case e.Path != "":
		fmt.Fprintf(&b, "%q: ", e.Path)
	case e.Command != "":
		fmt.Fprintf(&b, "%q: ", e.Command)
	}
	if e.Msg != "" {
		b.WriteString(e.Msg)
	} else if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString(string(e.Code))
	}
	if e.Hint != "" {
		b.WriteString(" (")
		b.WriteString(e.Hint)
		b.WriteString(")")
	}
	return strings.TrimSpace(b.String())
}

// Sentence is Msg with the subject (Path, or else Command) after it and the
// Hint in parentheses: "not a regular file or directory: /fifo (FIFOs,
// sockets and devices cannot be opened)". It is for a wire text whose
// request already names the operation, such as an SFTP status message.
func (e *Error) Sentence() string {
	msg := e.Msg
	if msg == "" {
		if e.Err != nil {
			msg = e.Err.Error()
		} else {
			msg = string(e.Code)
		}
	}
	switch {
	case e.Path != "":
		msg += ": " + e.Path
	case e.Command != "":
		msg += ": " + e.Command
	}
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// Sentence is err's Sentence when err is an *Error, and err.Error() for any
// other error.
func Sentence(err error) string {
	if e, ok := err.(*Error); ok {
		return e.Sentence()
	}
	return err.Error()
}

// WithOp returns a new *Error that reports the failure of e as one of op (an
// operation built on the one that failed: "edit" on a read, "move" on a
// stat). It has e's code, subject and texts and wraps e, which is unchanged.
func (e *Error) WithOp(op string) *Error {
	msg := e.Msg
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	return &Error{Code: e.Code, Op: op, Path: e.Path, Command: e.Command, Msg: msg, Hint: e.Hint, Err: e}
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an *Error with a formatted message.
func New(code Code, op, path, format string, args ...any) *Error {
	return &Error{Code: code, Op: op, Path: path, Msg: fmt.Sprintf(format, args...)}
}

// Of returns the code of the first *Error in err's chain, or "" if there is none.
func Of(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Is reports whether err carries code.
func Is(err error, code Code) bool { return err != nil && Of(err) == code }

package client

import (
	"errors"
	"fmt"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// Error is the typed error of every operation: a code of the specification
// ("Error Codes"), the operation, and the path or command it failed on.
type Error = errcode.Error

// ErrDestroyed is wrapped by the error of any operation on a destroyed backend
// (code CONNECTION_CLOSED).
var ErrDestroyed = errors.New("backend destroyed")

// ErrConnectionClosed is wrapped by the error of an operation that was pending
// on, or started during, a lost connection (code CONNECTION_CLOSED).
var ErrConnectionClosed = errors.New("connection closed")

// ExitError is the cause of an EXEC_FAILED error: the command ran and exited
// non-zero (or was killed by a signal, ExitCode -1).
type ExitError struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("exit status %d", e.ExitCode)
}

// destroyedError is the error of op on a destroyed backend.
func destroyedError(op, path string) error {
	return &errcode.Error{Code: errcode.ConnectionClosed, Op: op, Path: path, Msg: "backend destroyed", Err: ErrDestroyed}
}

// notImplemented is the error of an operation a kind does not support.
func notImplemented(op, kind string) error {
	return &errcode.Error{Code: errcode.NotImplemented, Op: op, Msg: "not supported by the " + kind + " backend"}
}

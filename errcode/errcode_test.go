package errcode

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestErrorText(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Code: PathEscapeAttempt, Op: "read", Path: "../etc/passwd", Msg: "path escapes the workspace"}, `read "../etc/passwd": path escapes the workspace`},
		{&Error{Code: DangerousOperation, Op: "exec", Command: "sudo ls", Msg: "privilege escalation (sudo)"}, `exec "sudo ls": privilege escalation (sudo)`},
		{&Error{Code: NotFound, Op: "stat", Path: "x", Err: fs.ErrNotExist}, `stat "x": file does not exist`},
		{&Error{Code: ExecFailed}, "EXEC_FAILED"},
		{New(TooLarge, "read", "big.bin", "%d bytes is over the %d-byte limit", 20, 10), `read "big.bin": 20 bytes is over the 10-byte limit`},
		{&Error{Code: IsADirectory, Op: "read", Path: "d", Msg: "is a directory", Hint: "use a directory listing instead"}, `read "d": is a directory (use a directory listing instead)`},
		{(&Error{Code: NotFound, Op: "read", Path: "a", Msg: "no such file or directory"}).WithOp("edit"), `edit "a": no such file or directory`},
		{(&Error{Code: NotFound, Op: "stat", Path: "x", Err: fs.ErrNotExist}).WithOp("move"), `move "x": file does not exist`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q; want %q", got, tt.want)
		}
	}
}

func TestOfIsAndUnwrap(t *testing.T) {
	base := &Error{Code: NotFound, Op: "read", Path: "a", Err: fs.ErrNotExist}
	wrapped := fmt.Errorf("tool read_text_file: %w", base)
	if Of(wrapped) != NotFound || !Is(wrapped, NotFound) || Is(wrapped, PathEscapeAttempt) {
		t.Errorf("Of(wrapped) = %q", Of(wrapped))
	}
	if !errors.Is(wrapped, fs.ErrNotExist) {
		t.Error("the OS cause is not reachable through Unwrap")
	}
	if Of(errors.New("plain")) != "" || Is(nil, NotFound) {
		t.Error("a plain or nil error has a code")
	}
}

// Sentence names the subject after the fact, for wire texts whose request
// already names the operation (SFTP status messages).
func TestSentence(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&Error{Code: InvalidArgument, Op: "open", Path: "/fifo", Msg: "not a regular file or directory", Hint: "FIFOs, sockets and devices cannot be opened"},
			"not a regular file or directory: /fifo (FIFOs, sockets and devices cannot be opened)"},
		{&Error{Code: NotFound, Op: "stat", Path: "/x", Msg: "no such file or directory"}, "no such file or directory: /x"},
		{&Error{Code: DangerousOperation, Op: "exec", Command: "sudo ls", Msg: "privilege escalation"}, "privilege escalation: sudo ls"},
		{&Error{Code: ExecFailed}, "EXEC_FAILED"},
		{errors.New("plain"), "plain"},
	}
	for _, tt := range tests {
		if got := Sentence(tt.err); got != tt.want {
			t.Errorf("Sentence(%v) = %q; want %q", tt.err, got, tt.want)
		}
	}
}

// WithOp wraps: the original keeps its Op and stays reachable.
func TestWithOpWraps(t *testing.T) {
	base := &Error{Code: NotFound, Op: "read", Path: "a", Msg: "no such file or directory", Err: fs.ErrNotExist}
	got := base.WithOp("edit")
	if base.Op != "read" || got == base || got.Op != "edit" || got.Code != NotFound || !errors.Is(got, base) || !errors.Is(got, fs.ErrNotExist) {
		t.Errorf("WithOp: base %#v, got %#v", base, got)
	}
}

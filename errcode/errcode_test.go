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

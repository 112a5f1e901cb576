package tooltext

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// The tool texts name the caller's path where the reference's do, although
// fsops's messages state the fact only: before a hint, and inside the
// sentences of the ENOTDIR, ENOSPC and EINVAL texts.
func TestErrorTextWordsThePathAsTheReference(t *testing.T) {
	tests := []struct {
		prefix, p string
		err       *errcode.Error
		want      string
	}{
		{"Failed to read file", "a.txt", &errcode.Error{Code: errcode.NotFound, Op: "read", Path: "a.txt", Msg: "no such file or directory"},
			"Failed to read file: a.txt - no such file or directory"},
		{"Failed to read directory", "a.txt", &errcode.Error{Code: errcode.NotADirectory, Op: "readdir", Path: "a.txt", Msg: "not a directory", Hint: fsops.HintComponentIsFile},
			"Failed to read directory: a.txt - not a directory: a component of a.txt is a file"},
		{"Failed to move file", "dst", &errcode.Error{Code: errcode.NotADirectory, Op: "move", Path: "dst", Msg: "not a directory", Hint: fsops.HintPathIsFile},
			"Failed to move file: dst - not a directory: dst is a file"},
		{"Failed to read file", "l", &errcode.Error{Code: errcode.InvalidArgument, Op: "read", Path: "l", Msg: fsops.MsgInvalidArgument, Hint: "readlink l: invalid argument"},
			"Failed to read file: l - invalid argument: l: readlink l: invalid argument"},
		{"Failed to write file", "f", &errcode.Error{Code: errcode.WriteFailed, Op: "write", Path: "f", Msg: fsops.MsgNoSpace},
			"Failed to write file: f - no space left on device writing f"},
		{"Failed to read file", "d", &errcode.Error{Code: errcode.IsADirectory, Op: "read", Path: "d", Msg: "is a directory"},
			"Failed to read file: d - is a directory (use list_directory or directory_tree to see what is in it)"},
		{"Failed to write file", "d", &errcode.Error{Code: errcode.AlreadyExists, Op: "rm", Path: "d", Msg: "directory not empty", Hint: "remove it recursively, or pick another name"},
			"Failed to write file: d - directory not empty: d (remove it recursively, or pick another name)"},
		{"Failed to read file", "x", (&errcode.Error{Code: errcode.NotFound, Op: "read", Path: "x", Msg: "no such file or directory"}).WithOp("edit"),
			"Failed to read file: x - no such file or directory"},
	}
	for _, tt := range tests {
		if got := ErrorText(tt.prefix, tt.p, tt.err); got != tt.want {
			t.Errorf("ErrorText(%#v) =\n  %q\nwant\n  %q", tt.err, got, tt.want)
		}
	}

	// The same through a real workspace.
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	_, err = ws.ReadFile("d")
	if got, want := ErrorText("Failed to read file", "d", err), "Failed to read file: d - is a directory: d (use a directory listing instead)"; got != want {
		t.Errorf("read of a directory: %q, want %q", got, want)
	}
	_, err = ws.ReadFile("missing")
	if got, want := ErrorText("Failed to read file", "missing", err), "Failed to read file: missing - no such file or directory"; got != want {
		t.Errorf("read of a missing file: %q, want %q", got, want)
	}
}

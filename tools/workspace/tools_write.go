package workspace

import (
	"context"
	"errors"
	"path"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// The write tools: write_file, edit_file and move_file.

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

var writeFileTool = tool[writeArgs]{
	Name:        "write_file",
	Title:       "Write file",
	Description: "Create new file or completely overwrite existing file with new content. Parent directories are created automatically if they don't exist. " + workspacePaths,
	Annotations: writes(destructive, idempotent),
	Schema: obj(schema{
		"path":    str("Path to the file"),
		"content": str("Content to write"),
	}, required("path", "content")),
	Handler: writeFile,
}

// workspacePaths tells the agent where an absolute path lands. The answer
// repeats the path as given ("Successfully wrote to /etc/passwd"), the
// reference's text that clients compare exactly (docs/tools.md), so the
// description is where an agent used to other servers learns that nothing
// outside the workspace was written.
const workspacePaths = "Every path is inside the workspace: an absolute path outside it is taken from the workspace root " +
	"(/etc/passwd writes etc/passwd in the workspace), and the answer repeats the path as given."

func writeFile(_ context.Context, ws fsops.Workspace, a writeArgs) *mcp.CallToolResult {
	if err := ws.WriteFile(a.Path, []byte(a.Content)); err != nil {
		return failure(failWrite, a.Path, err)
	}
	return textResult("Successfully wrote to " + a.Path)
}

type editArgs struct {
	Path  string `json:"path"`
	Edits []struct {
		OldText    string `json:"oldText"`
		NewText    string `json:"newText"`
		ReplaceAll bool   `json:"replaceAll"`
	} `json:"edits"`
	DryRun bool `json:"dryRun"`
}

var editFileTool = tool[editArgs]{
	Name:        "edit_file",
	Title:       "Edit file",
	Description: "Make selective edits using exact text matching. Each edit's oldText must be unique in the current file state, unless replaceAll is set for that edit. Edits apply sequentially — later edits see the result of earlier ones. Returns a unified diff of the changes.",
	Annotations: writes(destructive),
	Schema: obj(schema{
		"path": str("Path to the file"),
		"edits": arrayOf("Array of edits to apply sequentially", obj(schema{
			"oldText":    str("Text to search for — must match exactly and (unless replaceAll is true) must be unique in the current file state. Add surrounding context to disambiguate if needed."),
			"newText":    str("Text to replace with"),
			"replaceAll": boolean("Replace every occurrence of oldText. Use for renames or other bulk replacements; defaults to false."),
		}, required("oldText", "newText"))),
		"dryRun": boolean("Preview changes using git-style diff format (defaults to false)"),
	}, required("path", "edits")),
	Handler: editFile,
}

func editFile(_ context.Context, ws fsops.Workspace, a editArgs) *mcp.CallToolResult {
	edits := make([]fsops.Edit, len(a.Edits))
	for i, e := range a.Edits {
		edits[i] = fsops.Edit{OldText: e.OldText, NewText: e.NewText, ReplaceAll: e.ReplaceAll}
	}
	res, err := ws.Edit(a.Path, edits, a.DryRun)
	if err != nil {
		prefix := failWrite
		if errcode.Is(err, errcode.NotFound) || errcode.Is(err, errcode.IsADirectory) || errcode.Is(err, errcode.ReadFailed) || readTooLarge(err) {
			prefix = failRead
		}
		return failure(prefix, a.Path, err)
	}
	if a.DryRun {
		return textResult("[DRY RUN]\n" + res.Diff)
	}
	return textResult(res.Diff)
}

// readTooLarge reports whether err is the file being too large to read
// (the read's error, wrapped for the edit), not the edit's result being too
// large to write (fsops' applyEdits, op "edit" with nothing wrapped).
func readTooLarge(err error) bool {
	var e *errcode.Error
	return errors.As(err, &e) && e.Code == errcode.TooLarge && e.Unwrap() != nil
}

type moveArgs struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

var moveFileTool = tool[moveArgs]{
	Name:        "move_file",
	Title:       "Move file",
	Description: "Move or rename files and directories. Fails if destination exists. Both source and destination must be within the workspace.",
	Annotations: writes(),
	Schema: obj(schema{
		"source":      str("Source path"),
		"destination": str("Destination path"),
	}, required("source", "destination")),
	Handler: moveFile,
}

func moveFile(_ context.Context, ws fsops.Workspace, a moveArgs) *mcp.CallToolResult {
	// The reference checks in this order and words each failure itself;
	// the checks also keep a failed move from creating the parent below.
	ok, err := ws.Exists(a.Source)
	if err != nil {
		return failure(failMove, a.Source, err)
	}
	if !ok {
		return toolError("Source does not exist: " + a.Source)
	}
	ok, err = ws.Exists(a.Destination)
	if err != nil {
		return failure(failMove, a.Destination, err)
	}
	if ok {
		return toolError("Destination already exists: " + a.Destination)
	}
	if dir := path.Dir(a.Destination); dir != "." && dir != "/" {
		if err := ws.Mkdir(dir, true); err != nil {
			return failure(failMkdir, dir, err)
		}
	}
	if err := ws.Move(a.Source, a.Destination); err != nil {
		switch errcode.Of(err) {
		case errcode.AlreadyExists:
			return toolError("Destination already exists: " + a.Destination)
		case errcode.NotFound:
			return toolError("Source does not exist: " + a.Source)
		}
		return failure(failMove, a.Source+" to "+a.Destination, err)
	}
	return textResult("Moved " + a.Source + " to " + a.Destination)
}

package fsops

import (
	"io/fs"
	"os"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// ReadOnly returns ws as a workspace that refuses every change with
// errcode.PermissionDenied: what a read-only token (--tokens) gets over
// SSH, where SFTP and SCP reach the workspace directly. Reads are ws's.
// Scopes of it are read-only too; closing it closes ws.
func ReadOnly(ws Workspace) Workspace { return readOnlyWS{ws} }

type readOnlyWS struct{ Workspace }

func refuseWrite(op, p string) error {
	return &errcode.Error{Code: errcode.PermissionDenied, Op: op, Path: p,
		Msg: "this token is read-only", Hint: "use a token with write access"}
}

func (r readOnlyWS) Scope(p string) (Workspace, error) {
	s, err := r.Workspace.Scope(p)
	if err != nil {
		return nil, err
	}
	return readOnlyWS{s}, nil
}

func (readOnlyWS) WriteFile(p string, _ []byte) error { return refuseWrite("write", p) }

func (r readOnlyWS) Edit(p string, edits []Edit, dryRun bool) (EditResult, error) {
	if !dryRun {
		return EditResult{}, refuseWrite("edit", p)
	}
	return r.Workspace.Edit(p, edits, true)
}

func (readOnlyWS) Mkdir(p string, _ bool) error           { return refuseWrite("mkdir", p) }
func (readOnlyWS) Move(src, _ string) error               { return refuseWrite("move", src) }
func (readOnlyWS) Rename(src, _ string) error             { return refuseWrite("rename", src) }
func (readOnlyWS) Remove(p string, _ RemoveOptions) error { return refuseWrite("rm", p) }
func (readOnlyWS) Touch(p string) error                   { return refuseWrite("touch", p) }
func (readOnlyWS) Chmod(p string, _ fs.FileMode) error    { return refuseWrite("chmod", p) }
func (readOnlyWS) Chtimes(p string, _, _ time.Time) error { return refuseWrite("chtimes", p) }
func (readOnlyWS) Truncate(p string, _ int64) error       { return refuseWrite("truncate", p) }
func (readOnlyWS) Symlink(_, link string) error           { return refuseWrite("symlink", link) }

// OpenFile opens for reading only: any flag that writes, creates or
// truncates is refused before anything is opened.
func (r readOnlyWS) OpenFile(p string, flag int, perm fs.FileMode) (File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		return nil, refuseWrite("open", p)
	}
	return r.Workspace.OpenFile(p, flag, perm)
}

// OpenDir is refused: its descriptor is what commands run in, and a
// read-only workspace runs none.
func (readOnlyWS) OpenDir() (*os.File, error) { return nil, refuseWrite("opendir", ".") }

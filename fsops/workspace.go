// Package fsops is the one door to files. Every file operation a protocol
// offers (MCP tools, SFTP) is a method of Workspace; no protocol package
// opens, stats or lists a workspace path itself. Outside fsops, only the
// startup (config checks and creates the root) and the sandbox (which opens
// a command's working directory once, beneath a confined handle, and then
// uses the descriptor) touch the workspace by name.
//
// A Workspace is rooted at one absolute directory. Client paths are resolved by
// ResolvePath (the rules of docs/protocol.md: relative, absolute-inside-root,
// other-absolute-made-relative, ".." while inside) and then confined: the
// directory implementation opens everything through one os.Root per workspace,
// so the kernel walks each path component relative to an open directory and a
// symlink is followed only while its target stays inside. There is no
// "check the path, then open it" window for a swapped link to slip through.
// A path that would leave fails with errcode.PathEscapeAttempt naming the path
// the caller gave. os.Root refuses every absolute symlink, even one pointing
// inside; for those (and only after os.Root has refused) the link chain is
// rewritten by hand into the equivalent relative path, which is then opened
// through os.Root again, so confinement never rests on the rewrite; that
// retry is written once, as inRoot (dir_links.go), and every operation of
// the directory workspace goes through it. On Linux
// the hot paths (whole-file reads, Stat, Resolve) first try one openat2 call with
// RESOLVE_BENEATH, the same confinement done by the kernel in one step, and
// take the os.Root path for anything it refuses or cannot do.
//
// Two implementations: NewDir (a real directory) and NewMemory (an in-memory
// tree for `--backend memory`: keys are paths, directories are implicit, mkdir
// is a no-op, no exec, no symlinks). Scope returns a Workspace confined to a
// subdirectory, with its own os.Root, so a link inside a scope cannot reach the
// rest of the parent either; its directory is created by the first write, once
// even under concurrent writers. Scopes nest. Close a workspace (and each
// scope) when done with it.
//
// Where the published clients see the output, it is the reference daemon's
// (agent-backend 0.13.2), byte for byte: Edit's unified diff reproduces the
// reference's diff library, TreeJSON its JSON.stringify, Search its minimatch
// globs and localeCompare order, Grep ripgrep's output for the reference's
// rg command line (implemented in Go; no process is run). The tests check
// each against the real thing when it is installed (node, rg).
//
// Every error is an *errcode.Error; NotFound wraps fs.ErrNotExist. Its Msg
// states the fact and Hint what to do, without the path, which Error()
// names once. Each operation is an op value (errors.go) that says which
// code an unexpected errno gets (READ_FAILED or WRITE_FAILED). An error is
// never changed once returned: an operation built on another wraps it
// (withOp).
//
// The directory workspace is split by concern: dir.go (lifecycle, scopes),
// dir_links.go (the absolute-link fallback, inRoot, do and run), dir_read.go
// (reads, listings, the walker of tree/search/grep), dir_write.go (writes,
// edits, moves, removal), dir_posix.go (the primitives of the SFTP server:
// open files, attributes, links, statfs). A new operation is a method in the
// file of its concern built on do or run with an op from errors.go.
package fsops

import (
	"context"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// CanExec reports whether commands can run in ws: whether it has a
// directory to hand to a command (OpenDir), which a memory workspace has not
// (errcode.NotImplemented). A scope whose directory is not created yet can
// run commands. It opens and closes that directory once: ask it when wiring
// a server, not per request.
func CanExec(ws Workspace) bool {
	f, err := ws.OpenDir()
	if err != nil {
		return !errcode.Is(err, errcode.NotImplemented)
	}
	f.Close()
	return true
}

// Workspace is a confined file tree. All path arguments are client paths, as
// they arrive on the wire; all errors are *errcode.Error.
type Workspace interface {
	// Root is the absolute path this workspace is rooted at: the daemon's root,
	// or root/scope for a scoped workspace. For a memory workspace it is the
	// virtual root. exec uses it as the working directory.
	Root() string

	// Resolve maps a client path to the absolute path it names inside Root,
	// without touching the file system beyond checking that no existing symlink
	// on the way leads out. It is the single source of truth for path rules.
	Resolve(p string) (string, error)

	// Rel is Resolve expressed relative to Root ("." for the root itself).
	Rel(p string) (string, error)

	// Scope returns a Workspace confined to the subdirectory p of this one.
	// The directory is not created until the first write through the scope.
	Scope(p string) (Workspace, error)

	// OpenDir returns a new descriptor of the workspace's own directory, the
	// very one its confined handle holds, for handing to another program
	// (bwrap binds it, a command starts in it). The name Root() may since
	// have been swapped for a symlink; the descriptor cannot be. The caller
	// closes it. A scope whose directory does not exist yet is
	// errcode.NotFound; a memory workspace has no directory
	// (errcode.NotImplemented).
	OpenDir() (*os.File, error)

	Stat(p string) (Info, error)  // follows a final symlink (if it stays inside)
	Lstat(p string) (Info, error) // does not follow a final symlink
	Exists(p string) (bool, error)

	// ReadFile returns the whole file, refusing files over the configured
	// maximum read size with errcode.TooLarge (the message says how to page).
	ReadFile(p string) ([]byte, error)
	// ReadLines pages a text file by lines (see LineRange and Lines). It is
	// not subject to the maximum read size: large files are streamed, up to
	// MaxScanSize bytes (a larger file is errcode.TooLarge), holding only the
	// wanted lines; it stops with ctx's error when ctx is done.
	ReadLines(ctx context.Context, p string, r LineRange) (Lines, error)
	// WriteFile replaces the file atomically (temp file + rename in the same
	// directory), creating parent directories. A failed write leaves the old
	// content and no temp file.
	WriteFile(p string, data []byte) error
	// Edit applies exact-match edits in order and returns the unified diff;
	// with dryRun nothing is written. The file's CRLF line ends become LF (as
	// in the reference); an unchanged file is not rewritten. A missing or
	// ambiguous oldText fails with errcode.EditFailed, "edit N: ..." (1-based).
	Edit(p string, edits []Edit, dryRun bool) (EditResult, error)

	// Mkdir creates a directory; with parents it is `mkdir -p`. (Memory: a
	// no-op, directories being implicit.)
	Mkdir(p string, parents bool) error
	// ReadDir lists the immediate children, sorted bytewise by name, with
	// lstat information: a symlink is reported as a link (Stat it to see its
	// target's type, as list_directory does).
	ReadDir(p string) ([]Info, error)
	// ReadDirTypes is ReadDir without a stat per entry: only Name, Path and
	// the type bits of Mode are set, taken from the directory listing itself
	// (an entry whose type the file system does not report is stat-ed). For
	// listings that print types only, such as list_directory; on 100 entries
	// it is about a third of ReadDir's cost.
	ReadDirTypes(p string) ([]Info, error)
	// Tree returns the recursive structure below p (directory_tree; render it
	// with TreeJSON). Symlinks are followed while they stay inside (a link
	// back to an ancestor is listed, not descended); entries that cannot be
	// stat-ed are left out, as the reference does.
	Tree(ctx context.Context, p string, opts TreeOptions) ([]TreeNode, error)

	// Move renames src to dst (move_file): errcode.NotFound ("source does not
	// exist") if src is missing, errcode.AlreadyExists if dst exists, and the
	// destination's parent is created. Both ends are confined; a final
	// symlink is moved itself, not followed.
	Move(src, dst string) error
	// Rename renames src to dst, replacing dst if it is a file (posix-rename).
	// The destination's parent is created.
	Rename(src, dst string) error
	// Remove deletes a file, a symlink (not its target) or an empty
	// directory; Recursive removes a directory with its contents; Force
	// ignores a missing p. The workspace root itself is refused.
	Remove(p string, opts RemoveOptions) error
	// Touch creates an empty file (and its parents) if p does not exist; it
	// never truncates and never changes an existing file.
	Touch(p string) error

	// Search finds entries under p whose path relative to p matches the glob
	// (minimatch with dot files; no basename matching, so "*.go" is top-level
	// only). Each result is path.Join(p, relative path), p as the caller gave
	// it, which is what search_files prints.
	Search(ctx context.Context, p, pattern string, opts SearchOptions) ([]string, error)
	// Grep searches file contents with ripgrep's defaults, in Go (see
	// GrepResult for the output).
	Grep(ctx context.Context, opts GrepOptions) (GrepResult, error)

	// OpenFile opens a file for streaming (SFTP): flag is os.O_* bits. With
	// os.O_CREATE the parent directory is created.
	OpenFile(p string, flag int, perm fs.FileMode) (File, error)
	Chmod(p string, mode fs.FileMode) error
	Chtimes(p string, atime, mtime time.Time) error
	Truncate(p string, size int64) error
	// Symlink creates link pointing at target; a target that resolves outside
	// the workspace is refused.
	Symlink(target, link string) error
	// Readlink returns a link's target as stored (relative, or absolute
	// inside the root); a link that leads out is errcode.PathEscapeAttempt.
	Readlink(p string) (string, error)
	// StatFS reports the space of the file system holding the workspace.
	StatFS() (FSStats, error)

	// Close releases the workspace's directory handle (and those of the
	// scopes made from it). Idempotent; later calls fail. Close a scope when
	// done with it (e.g. at the end of a request): each holds an open handle.
	Close() error
}

// File is an open file, confined like every other access.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Reader
	io.Writer
	io.Closer
	Stat() (Info, error)
	Truncate(size int64) error
	Sync() error
}

// Info describes one file. Name is the base name ("." for the root); Path is
// the path relative to the workspace root (slash-separated, "." for the root),
// as requested (not where symlinks led).
type Info struct {
	Name       string
	Path       string
	Size       int64
	Mode       fs.FileMode // includes the type bits (fs.ModeDir, fs.ModeSymlink)
	ModTime    time.Time
	AccessTime time.Time
	ChangeTime time.Time // inode change; used as "created" where birth time is unknown
	BirthTime  time.Time // from statx on Linux (Stat, Lstat); zero when not reported
	UID, GID   uint32
	Nlink      uint64

	dev, ino uint64 // identity, for loop detection while walking
}

// FileID is a file's identity: its device and inode.
type FileID struct{ Dev, Ino uint64 }

// ID is the identity of the file i describes (zero for the memory
// workspace, which has none).
func (i Info) ID() FileID { return FileID{i.dev, i.ino} }

// IsDir reports whether the entry is a directory.
func (i Info) IsDir() bool { return i.Mode.IsDir() }

// LineRange selects lines of a text file. Offset is 1-based (0 means 1); Limit
// 0 means the default (1000), capped at 5000. Head/Tail (0.9 clients) take the
// first or last N lines and override Offset/Limit.
type LineRange struct {
	Offset int
	Limit  int
	Head   int
	Tail   int
}

// Lines is a page of a text file. Lines are counted as the reference counts
// them, by splitting the text on "\n": "a\nb\n" has 3 lines (the last empty)
// and an empty file has 1. A line longer than MaxLineLength characters keeps
// its first MaxLineLength followed by the reference's inline marker
// "… [line truncated, original N chars]", and is counted in CutLines. An
// offset past the end gives no lines, First = offset and Last = First-1.
type Lines struct {
	Lines     []string
	First     int  // 1-based number of Lines[0]
	Last      int  // 1-based number of the last returned line
	Total     int  // lines in the file
	CutLines  int  // how many lines were cut at MaxLineLength
	WholeFile bool // the page is the whole file (First 1, every line)

	// text is Lines joined with "\n" when the page was cut out of a text
	// held in memory with no line shortened: then it is a substring of that
	// text, and Text need not copy. Empty otherwise (see joined).
	text   string
	joined bool
}

// Text is the page's lines joined with "\n", the body read_text_file
// returns. A page of a file read whole is a substring of it (no copy).
func (l Lines) Text() string {
	if l.joined {
		return l.text
	}
	return strings.Join(l.Lines, "\n")
}

// MaxLineLength is where ReadLines cuts a long line.
const MaxLineLength = 2000

// MaxScanSize bounds the bytes ReadLines reads to page one file: counting the
// lines of a larger one (a sparse file can claim terabytes) would hold a
// request, and the disk, for minutes.
const MaxScanSize = 1 << 30

// Edit is one exact-match replacement.
type Edit struct {
	OldText    string
	NewText    string
	ReplaceAll bool
}

// EditResult is the unified diff of an edit and the number of replacements
// made. Diff is exactly the reference's edit_file text: "--- path\n+++ path\n"
// (path as the caller gave it, C-quoted if unusual) and hunks with 3 lines of
// context, ending in "\n". A diff over the reference's budget (20,000 line
// edits) is its "[diff omitted: ...]" note, preceded by "Applied N edit(s) to
// path" when the file was written. The tool layer adds "[DRY RUN]\n" itself.
type EditResult struct {
	Diff         string
	Replacements int
}

// TreeOptions configures Tree. Exclude are globs matched against names and
// relative paths; DefaultExcludes adds DefaultTreeExcludes.
type TreeOptions struct {
	Exclude         []string
	DefaultExcludes bool
}

// TreeNode is one entry of a tree; Children is set (possibly empty) only for
// directories, Size only for files.
type TreeNode struct {
	Name     string     `json:"name"`
	Type     string     `json:"type"` // "file" or "directory"
	Size     *int64     `json:"size,omitempty"`
	Children []TreeNode `json:"children,omitempty"`
}

// RemoveOptions are rm's -r and -f.
type RemoveOptions struct {
	Recursive bool
	Force     bool
}

// SearchOptions configures Search. SortBy is "path" (default) or "mtime".
type SearchOptions struct {
	Exclude []string
	SortBy  string
}

// GrepOptions are the arguments of the grep tool (docs/mcp.md).
type GrepOptions struct {
	Pattern         string
	Path            string // client path; "" = workspace root
	Glob            string
	Type            string // ripgrep file type name, e.g. "go", "py"
	OutputMode      string // "content", "files_with_matches" (default), "count"
	CaseInsensitive bool
	Multiline       bool
	Before, After   int  // context lines (content mode only; resolve contextAround in the tool)
	LineNumbers     bool // content mode only
	HeadLimit       int  // 0 = no limit
}

// GrepResult is ripgrep's output for the reference's rg command line
// (paths as rg prints them from the workspace root), trimmed like the
// reference's exec output, cut to HeadLimit lines with the reference's
// "[output truncated to first N lines; M more hidden]" note. Output is empty
// when nothing matched (the tool prints "No matches found"). Matches counts
// files (files_with_matches), matches (count) or matching groups (content).
type GrepResult struct {
	Output  string
	Matches int
}

// FSStats is statvfs for SFTP.
type FSStats struct {
	BlockSize, FragmentSize               uint64
	Blocks, BlocksFree, BlocksAvail       uint64
	Files, FilesFree, FilesAvail, NameMax uint64
}

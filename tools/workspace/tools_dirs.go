package workspace

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// The directory tools: create_directory, list_directory,
// list_directory_with_sizes, directory_tree, search_files and
// list_allowed_directories.

var createDirectoryTool = tool[pathArgs]{
	Name:        "create_directory",
	Title:       "Create directory",
	Description: "Create new directory or ensure it exists. Creates parent directories automatically.",
	Annotations: writes(idempotent),
	Schema:      obj(schema{"path": str("Path to the directory")}, required("path")),
	Handler:     createDirectory,
}

func createDirectory(_ context.Context, ws fsops.Workspace, a pathArgs) *mcp.CallToolResult {
	if err := ws.Mkdir(a.Path, true); err != nil {
		return failure(failMkdir, a.Path, err)
	}
	return textResult("Created directory: " + a.Path)
}

// entry is a directory entry with symlinks resolved as the reference's
// stat() resolves them; ok is false when that fails (a dangling link, or one
// leading out of the workspace).
type entry struct {
	name  string
	isDir bool
	size  int64
	ok    bool
}

func listEntries(ws fsops.Workspace, dir string, withSizes bool) ([]entry, error) {
	read := ws.ReadDirTypes // list_directory prints types only: no stat per entry
	if withSizes {
		read = ws.ReadDir
	}
	infos, err := read(dir)
	if err != nil {
		return nil, err
	}
	out := make([]entry, len(infos))
	for i, in := range infos {
		e := entry{name: in.Name, isDir: in.IsDir(), size: in.Size, ok: true}
		if in.Mode&fs.ModeSymlink != 0 {
			// Symlinks are followed, like Node's stat, while they stay inside.
			st, err := ws.Stat(path.Join(dir, in.Name))
			if err != nil {
				e = entry{name: in.Name}
			} else {
				e.isDir, e.size = st.IsDir(), st.Size
			}
		}
		out[i] = e
	}
	return out, nil
}

var listDirectoryTool = tool[pathArgs]{
	Name:        "list_directory",
	Title:       "List directory",
	Description: `List directory contents with [FILE] or [DIR] prefixes. Use "." for the root/current directory.`,
	Annotations: readOnly,
	Schema:      obj(schema{"path": str(`Path to the directory (use "." for root)`)}, required("path")),
	Handler:     listDirectory,
}

func listDirectory(_ context.Context, ws fsops.Workspace, a pathArgs) *mcp.CallToolResult {
	entries, err := listEntries(ws, a.Path, false)
	if err != nil {
		return failure(failReadDir, a.Path, err)
	}
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch {
		case !e.ok:
			b.WriteString("[?] ")
		case e.isDir:
			b.WriteString("[DIR] ")
		default:
			b.WriteString("[FILE] ")
		}
		b.WriteString(fsops.ShownName(e.name))
	}
	return textResult(b.String())
}

type sizesArgs struct {
	Path   string `json:"path"`
	SortBy string `json:"sortBy"`
}

var listDirectoryWithSizesTool = tool[sizesArgs]{
	Name:        "list_directory_with_sizes",
	Title:       "List directory with sizes",
	Description: `List directory contents with prefixes, file sizes, and summary statistics. Use "." for the root/current directory.`,
	Annotations: readOnly,
	Schema: obj(schema{
		"path":   str(`Path to the directory (use "." for root)`),
		"sortBy": enum("Sort entries by name or size (descending), defaults to name", "name", "size"),
	}, required("path")),
	Handler: listDirectoryWithSizes,
}

func listDirectoryWithSizes(_ context.Context, ws fsops.Workspace, a sizesArgs) *mcp.CallToolResult {
	entries, err := listEntries(ws, a.Path, true)
	if err != nil {
		return failure(failReadDir, a.Path, err)
	}
	// The reference counts an entry it cannot stat as a file of size 0.
	for i := range entries {
		if !entries[i].ok {
			entries[i].isDir, entries[i].size = false, 0
		}
	}
	if a.SortBy == "size" {
		// Descending, stable: equal sizes keep directory order, as V8's
		// stable sort does. Directories sort by their own size (4096...).
		sort.SliceStable(entries, func(i, j int) bool { return entries[i].size > entries[j].size })
	} else {
		sort.SliceStable(entries, func(i, j int) bool { return localeLess(entries[i].name, entries[j].name) })
	}
	var b strings.Builder
	var files, dirs int
	var total int64
	for _, e := range entries {
		if e.isDir {
			dirs++
			b.WriteString("[DIR] " + padEnd(fsops.ShownName(e.name), 30) + "\n")
		} else {
			files++
			total += e.size
			b.WriteString("[FILE] " + padEnd(fsops.ShownName(e.name), 30) + " " + formatSize(e.size) + "\n")
		}
	}
	fmt.Fprintf(&b, "\nTotal: %d files, %d directories\nCombined size: %s", files, dirs, formatSize(total))
	return textResult(b.String())
}

type treeArgs struct {
	Path                   string   `json:"path"`
	ExcludePatterns        []string `json:"excludePatterns"`
	IncludeDefaultExcludes *bool    `json:"includeDefaultExcludes"`
}

var directoryTreeTool = tool[treeArgs]{
	Name:        "directory_tree",
	Title:       "Directory tree",
	Description: "Get recursive JSON tree structure of directory contents. Each entry includes name, type (file/directory), and children for directories. By default excludes common non-essential directories (node_modules, .venv, .git, etc.).",
	Annotations: readOnly,
	Schema: obj(schema{
		"path":                   str("Path to the directory"),
		"excludePatterns":        strArray(`Additional glob patterns to exclude (e.g., "*.log", "temp")`),
		"includeDefaultExcludes": boolean("Include default exclusions (node_modules, .venv, .git, etc.). Set to false to disable.", defaultValue(true)),
	}, required("path")),
	Handler: directoryTree,
}

func directoryTree(ctx context.Context, ws fsops.Workspace, a treeArgs) *mcp.CallToolResult {
	opts := fsops.TreeOptions{Exclude: a.ExcludePatterns, DefaultExcludes: a.IncludeDefaultExcludes == nil || *a.IncludeDefaultExcludes}
	nodes, err := ws.Tree(ctx, a.Path, opts)
	if err != nil {
		return failure(failReadDir, a.Path, err)
	}
	return textResult(fsops.TreeJSON(nodes))
}

type searchArgs struct {
	Path            string   `json:"path"`
	Pattern         string   `json:"pattern"`
	ExcludePatterns []string `json:"excludePatterns"`
	SortBy          string   `json:"sortBy"`
}

var searchFilesTool = tool[searchArgs]{
	Name:        "search_files",
	Title:       "Search files",
	Description: `Recursively search for files and directories matching a glob pattern. Patterns match against paths relative to the search directory. Pass sortBy: "mtime" to sort results by modification time (newest first) — useful for surfacing recently-edited files.`,
	Annotations: readOnly,
	Schema: obj(schema{
		"path":            str("Starting directory path"),
		"pattern":         str(`Glob pattern to match (e.g., "*.ts", "**/*.js", "src/**/*.tsx")`),
		"excludePatterns": strArray("Patterns to exclude from results"),
		"sortBy":          enum(`Sort order for results. "path" (default) sorts alphabetically by path. "mtime" sorts by modification time, newest first.`, "path", "mtime"),
	}, required("path", "pattern")),
	Handler: searchFiles,
}

func searchFiles(ctx context.Context, ws fsops.Workspace, a searchArgs) *mcp.CallToolResult {
	hits, err := ws.Search(ctx, a.Path, a.Pattern, fsops.SearchOptions{Exclude: a.ExcludePatterns, SortBy: a.SortBy})
	if err != nil {
		prefix := failReadDir
		if errcode.Is(err, errcode.InvalidArgument) {
			prefix = failSearch
		}
		return failure(prefix, a.Path, err)
	}
	if len(hits) == 0 {
		return textResult("No matches found")
	}
	for i, h := range hits {
		hits[i] = fsops.ShownName(h)
	}
	return textResult(strings.Join(hits, "\n"))
}

var listAllowedDirectoriesTool = tool[noArgs]{
	Name:        "list_allowed_directories",
	Title:       "List allowed directories",
	Description: "List all directories the server is allowed to access",
	Annotations: readOnly,
	Schema:      obj(schema{}),
	Handler:     listAllowedDirectories,
}

func listAllowedDirectories(_ context.Context, ws fsops.Workspace, _ noArgs) *mcp.CallToolResult {
	return textResult("Allowed directories:\n- " + ws.Root())
}

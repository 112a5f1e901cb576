package mcphttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// The tools. Names, argument names, descriptions and result texts are those
// of agent-backend 0.13.2 (src/server/tools.ts), because clients and prompts
// depend on them; where we add something (titles, annotations, head/tail for
// 0.9 clients, exec timeouts, grep without ripgrep) the description says so.

// Schema helpers. Schemas are plain maps (JSON Schema 2020-12 as the SDK
// validates it); the SDK compiles each once, at registration.
type schema = map[string]any

func obj(required []string, props schema) schema {
	s := schema{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}
func str(desc string) schema     { return schema{"type": "string", "description": desc} }
func boolean(desc string) schema { return schema{"type": "boolean", "description": desc} }
func posInt(desc string) schema {
	return schema{"type": "integer", "exclusiveMinimum": 0, "description": desc}
}
func nonNegInt(desc string) schema {
	return schema{"type": "integer", "minimum": 0, "description": desc}
}
func strArray(desc string) schema {
	return schema{"type": "array", "items": schema{"type": "string"}, "description": desc}
}
func enum(desc string, values ...string) schema {
	return schema{"type": "string", "enum": values, "description": desc}
}

func ptr[T any](v T) *T { return &v }

// annotations: every file tool is closed-world (only the workspace).
func readOnly(title string) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}
}
func writes(title string, destructive, idempotent bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, DestructiveHint: ptr(destructive), IdempotentHint: idempotent, OpenWorldHint: ptr(false)}
}

// toolDef is one registered tool: its advertised definition and the call
// that validates raw arguments, decodes them and runs the handler. Both the
// SDK (through mcp.Server.AddTool) and the HTTP fast path (fastpath.go) call
// tools through it, so they answer byte for byte the same.
type toolDef struct {
	tool *mcp.Tool
	call func(ctx context.Context, ws fsops.Workspace, raw json.RawMessage) *mcp.CallToolResult
}

// addTool registers a typed tool whose handler returns the result itself
// (never a Go error: failures are isError results).
func addTool[In any](s *Server, name, title, desc string, ann *mcp.ToolAnnotations, in schema,
	h func(ctx context.Context, ws fsops.Workspace, args In) *mcp.CallToolResult) {
	def := &toolDef{
		tool: &mcp.Tool{Name: name, Title: title, Description: desc, Annotations: ann, InputSchema: in},
		call: func(ctx context.Context, ws fsops.Workspace, raw json.RawMessage) *mcp.CallToolResult {
			if msg := validateArgs(raw, in); msg != "" {
				return toolError("Input validation error: Invalid arguments for tool " + name + ": " + msg)
			}
			var args In
			if len(raw) > 0 && string(raw) != "null" {
				if err := json.Unmarshal(raw, &args); err != nil {
					return toolError("Input validation error: Invalid arguments for tool " + name + ": " + err.Error())
				}
			}
			return h(ctx, ws, args)
		},
	}
	s.tools[name] = def
	s.mcp.AddTool(def.tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var hdr http.Header
		if req.Extra != nil {
			hdr = req.Extra.Header
		}
		return s.callTool(ctx, def, req.Params.Arguments, hdr), nil
	})
}

// callTool runs def in the workspace the request is scoped to.
func (s *Server) callTool(ctx context.Context, def *toolDef, raw json.RawMessage, hdr http.Header) *mcp.CallToolResult {
	ws, release, err := s.workspaceFor(hdr)
	if err != nil {
		return toolError(errorText("Invalid scope", hdr.Get(headerScopePath), err))
	}
	defer release()
	res := def.call(ctx, ws, raw)
	if res.IsError && s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("mcp tool failed", "tool", def.tool.Name, "error", res.Content[0].(*mcp.TextContent).Text)
	}
	return res
}

// workspaceFor returns the workspace a call works in: ours, or for an HTTP
// request with X-Scope-Path (already validated by serveHTTP) the scope below
// it, which is released after the call. Stdio calls have no header.
func (s *Server) workspaceFor(hdr http.Header) (fsops.Workspace, func(), error) {
	sp, ok := normalizeScope(hdr.Get(headerScopePath))
	if !ok {
		return nil, nil, errcode.New(errcode.PathEscapeAttempt, "scope", sp, "scope path must not contain ..")
	}
	if sp == "" {
		return s.opts.Workspace, func() {}, nil
	}
	ws, err := s.opts.Workspace.Scope(sp)
	if err != nil {
		return nil, nil, err
	}
	return ws, func() { _ = ws.Close() }, nil
}

// Argument types. Optional numbers are pointers: "absent" and 0 differ.
type (
	pathArgs struct {
		Path string `json:"path"`
	}
	readTextArgs struct {
		Path   string `json:"path"`
		Offset *int   `json:"offset"`
		Limit  *int   `json:"limit"`
		Head   *int   `json:"head"`
		Tail   *int   `json:"tail"`
	}
	readMediaArgs struct {
		Path  string `json:"path"`
		Force bool   `json:"force"`
	}
	readMultiArgs struct {
		Paths []string `json:"paths"`
	}
	writeArgs struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	editArgs struct {
		Path  string `json:"path"`
		Edits []struct {
			OldText    string `json:"oldText"`
			NewText    string `json:"newText"`
			ReplaceAll bool   `json:"replaceAll"`
		} `json:"edits"`
		DryRun bool `json:"dryRun"`
	}
	sizesArgs struct {
		Path   string `json:"path"`
		SortBy string `json:"sortBy"`
	}
	treeArgs struct {
		Path                   string   `json:"path"`
		ExcludePatterns        []string `json:"excludePatterns"`
		IncludeDefaultExcludes *bool    `json:"includeDefaultExcludes"`
	}
	moveArgs struct {
		Source      string `json:"source"`
		Destination string `json:"destination"`
	}
	searchArgs struct {
		Path            string   `json:"path"`
		Pattern         string   `json:"pattern"`
		ExcludePatterns []string `json:"excludePatterns"`
		SortBy          string   `json:"sortBy"`
	}
	execArgs struct {
		Command string            `json:"command"`
		Env     map[string]string `json:"env"`
	}
	grepArgs struct {
		Pattern         string `json:"pattern"`
		Path            string `json:"path"`
		Glob            string `json:"glob"`
		Type            string `json:"type"`
		OutputMode      string `json:"outputMode"`
		CaseInsensitive bool   `json:"caseInsensitive"`
		Multiline       bool   `json:"multiline"`
		ContextBefore   *int   `json:"contextBefore"`
		ContextAfter    *int   `json:"contextAfter"`
		ContextAround   *int   `json:"contextAround"`
		LineNumbers     bool   `json:"lineNumbers"`
		HeadLimit       int    `json:"headLimit"`
	}
	noArgs struct{}
)

func (s *Server) registerTools() {
	addTool(s, "read_text_file", "Read text file",
		"Read file contents as text. Paginates by default: with no paging parameters, returns the first 1000 lines and appends a footer indicating how much of the file was shown. Use offset and limit to read a later page of a large file. Lines longer than 2000 chars are truncated with an inline marker.",
		readOnly("Read text file"),
		obj([]string{"path"}, schema{
			"path":   str("Path to the file"),
			"offset": posInt("The 1-based line number to start reading from. Only provide if the file is too large to read at once."),
			"limit":  posInt("The number of lines to read (at most 5000). Only provide if the file is too large to read at once."),
			"head":   nonNegInt("Deprecated (agent-backend 0.9): return only the first N lines. Prefer offset/limit."),
			"tail":   nonNegInt("Deprecated (agent-backend 0.9): return only the last N lines."),
		}), readTextFile)

	addTool(s, "read_media_file", "Read media file",
		"Read an image or audio file, returns base64 data with MIME type",
		readOnly("Read media file"),
		obj([]string{"path"}, schema{
			"path":  str("Path to the media file"),
			"force": boolean("Bypass the image/audio MIME type check and return the file as a base64 blob regardless of type. Off by default."),
		}), readMediaFile)

	multi := obj([]string{"paths"}, schema{"paths": strArray("Array of file paths to read")})
	multi["properties"].(schema)["paths"].(schema)["minItems"] = 1
	addTool(s, "read_multiple_files", "Read multiple files",
		"Read several files simultaneously. Failed reads for individual files won't stop the entire operation.",
		readOnly("Read multiple files"), multi, readMultipleFiles)

	addTool(s, "write_file", "Write file",
		"Create new file or completely overwrite existing file with new content. Parent directories are created automatically if they don't exist.",
		writes("Write file", true, true),
		obj([]string{"path", "content"}, schema{
			"path":    str("Path to the file"),
			"content": str("Content to write"),
		}), writeFile)

	addTool(s, "edit_file", "Edit file",
		"Make selective edits using exact text matching. Each edit's oldText must be unique in the current file state, unless replaceAll is set for that edit. Edits apply sequentially — later edits see the result of earlier ones. Returns a unified diff of the changes.",
		writes("Edit file", true, false),
		obj([]string{"path", "edits"}, schema{
			"path": str("Path to the file"),
			"edits": schema{
				"type":        "array",
				"description": "Array of edits to apply sequentially",
				"items": obj([]string{"oldText", "newText"}, schema{
					"oldText":    str("Text to search for — must match exactly and (unless replaceAll is true) must be unique in the current file state. Add surrounding context to disambiguate if needed."),
					"newText":    str("Text to replace with"),
					"replaceAll": boolean("Replace every occurrence of oldText. Use for renames or other bulk replacements; defaults to false."),
				}),
			},
			"dryRun": boolean("Preview changes using git-style diff format (defaults to false)"),
		}), editFile)

	addTool(s, "create_directory", "Create directory",
		"Create new directory or ensure it exists. Creates parent directories automatically.",
		writes("Create directory", false, true),
		obj([]string{"path"}, schema{"path": str("Path to the directory")}), createDirectory)

	addTool(s, "list_directory", "List directory",
		`List directory contents with [FILE] or [DIR] prefixes. Use "." for the root/current directory.`,
		readOnly("List directory"),
		obj([]string{"path"}, schema{"path": str(`Path to the directory (use "." for root)`)}), listDirectory)

	addTool(s, "list_directory_with_sizes", "List directory with sizes",
		`List directory contents with prefixes, file sizes, and summary statistics. Use "." for the root/current directory.`,
		readOnly("List directory with sizes"),
		obj([]string{"path"}, schema{
			"path":   str(`Path to the directory (use "." for root)`),
			"sortBy": enum("Sort entries by name or size (descending), defaults to name", "name", "size"),
		}), listDirectoryWithSizes)

	tree := obj([]string{"path"}, schema{
		"path":                   str("Path to the directory"),
		"excludePatterns":        strArray(`Additional glob patterns to exclude (e.g., "*.log", "temp")`),
		"includeDefaultExcludes": boolean("Include default exclusions (node_modules, .venv, .git, etc.). Set to false to disable."),
	})
	tree["properties"].(schema)["includeDefaultExcludes"].(schema)["default"] = true
	addTool(s, "directory_tree", "Directory tree",
		"Get recursive JSON tree structure of directory contents. Each entry includes name, type (file/directory), and children for directories. By default excludes common non-essential directories (node_modules, .venv, .git, etc.).",
		readOnly("Directory tree"), tree, directoryTree)

	addTool(s, "move_file", "Move file",
		"Move or rename files and directories. Fails if destination exists. Both source and destination must be within the workspace.",
		writes("Move file", false, false),
		obj([]string{"source", "destination"}, schema{
			"source":      str("Source path"),
			"destination": str("Destination path"),
		}), moveFile)

	addTool(s, "search_files", "Search files",
		`Recursively search for files and directories matching a glob pattern. Patterns match against paths relative to the search directory. Pass sortBy: "mtime" to sort results by modification time (newest first) — useful for surfacing recently-edited files.`,
		readOnly("Search files"),
		obj([]string{"path", "pattern"}, schema{
			"path":            str("Starting directory path"),
			"pattern":         str(`Glob pattern to match (e.g., "*.ts", "**/*.js", "src/**/*.tsx")`),
			"excludePatterns": strArray("Patterns to exclude from results"),
			"sortBy":          enum(`Sort order for results. "path" (default) sorts alphabetically by path. "mtime" sorts by modification time, newest first.`, "path", "mtime"),
		}), searchFiles)

	addTool(s, "get_file_info", "Get file info",
		"Get detailed metadata: size, timestamps, type, permissions",
		readOnly("Get file info"),
		obj([]string{"path"}, schema{"path": str("Path to the file or directory")}), getFileInfo)

	addTool(s, "list_allowed_directories", "List allowed directories",
		"List all directories the server is allowed to access",
		readOnly("List allowed directories"),
		obj(nil, schema{}), func(_ context.Context, ws fsops.Workspace, _ noArgs) *mcp.CallToolResult {
			return textResult("Allowed directories:\n- " + ws.Root())
		})

	if !fsops.CanExec(s.opts.Workspace) {
		return // memory workspace: file tools only
	}
	if s.opts.Executor != nil {
		addTool(s, "exec", "Execute command",
			"Execute a shell command in the workspace directory. Not available for memory backends. On success returns stdout; on a non-zero exit, an error with the exit code and stderr (or stdout). Long output keeps its head and tail; a command that runs too long is killed and what it printed is returned.",
			&mcp.ToolAnnotations{Title: "Execute command", DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
			obj([]string{"command"}, schema{
				"command": str("Shell command to execute"),
				"env": schema{
					"type":                 "object",
					"description":          "Optional environment variables to set for this command",
					"additionalProperties": schema{"type": "string"},
				},
			}), s.exec)
	}
	addTool(s, "grep", "Search file contents",
		"Search file contents with a regular expression (ripgrep semantics and output; ripgrep need not be installed). Returns matching file paths, per-file match counts, or match content. Respects .gitignore by default. Parameter shape mirrors Claude Code's Grep tool.",
		readOnly("Search file contents"),
		obj([]string{"pattern"}, schema{
			"pattern":         str("Regex pattern to search for"),
			"path":            str("File or directory to search in. Defaults to the workspace root."),
			"glob":            str(`Glob to filter which files are searched (e.g. "*.ts", "src/**/*.py")`),
			"type":            str(`Ripgrep file-type name (e.g. "js", "py", "rust"). See ` + "`rg --type-list`."),
			"outputMode":      enum(`"files_with_matches" (default) returns matching paths; "count" returns per-file match counts; "content" returns matching lines.`, "content", "files_with_matches", "count"),
			"caseInsensitive": boolean("Case-insensitive matching (rg -i)."),
			"multiline":       boolean("Allow patterns to match across newlines (rg -U --multiline-dotall)."),
			"contextBefore":   nonNegInt("Lines of context before each match (rg -B). Use 0 for none. Ignored outside content mode."),
			"contextAfter":    nonNegInt("Lines of context after each match (rg -A). Use 0 for none. Ignored outside content mode."),
			"contextAround":   nonNegInt("Lines of context on both sides of each match (rg -C). Use 0 for none. Ignored outside content mode. An explicit contextBefore/contextAfter overrides this for that side, exactly as rg does."),
			"lineNumbers":     boolean("Prefix content-mode output with line numbers (rg -n). Ignored for other output modes."),
			"headLimit":       posInt("Cap result to the first N output lines (applied after search)."),
		}), grep)
}

// ── read ────────────────────────────────────────────────────────────────

func readTextFile(ctx context.Context, ws fsops.Workspace, a readTextArgs) *mcp.CallToolResult {
	// 0.9 clients page with head/tail; the result is the bare lines.
	if a.Head != nil || a.Tail != nil {
		if a.Head != nil && a.Tail != nil {
			return toolError("Cannot specify both head and tail parameters simultaneously")
		}
		lr := fsops.LineRange{}
		if a.Head != nil {
			if *a.Head == 0 {
				return textResult("")
			}
			lr.Head = *a.Head
		} else {
			if *a.Tail == 0 {
				return textResult("")
			}
			lr.Tail = *a.Tail
		}
		lines, err := ws.ReadLines(ctx, a.Path, lr)
		if err != nil {
			return toolError(errorText(failRead, a.Path, err))
		}
		return textResult(lines.Text())
	}

	lr := fsops.LineRange{}
	if a.Offset != nil {
		lr.Offset = *a.Offset
	}
	if a.Limit != nil {
		lr.Limit = *a.Limit
	}
	lines, err := ws.ReadLines(ctx, a.Path, lr)
	if err != nil {
		return toolError(errorText(failRead, a.Path, err))
	}
	body := lines.Text()

	// The reference's footer: whenever the page is not the whole file, and
	// for an implicit page also when a line was cut, so that even a
	// one-line minified file says how big it is and how to read on.
	implicit := a.Offset == nil && a.Limit == nil
	var footer string
	if !lines.WholeFile || (implicit && lines.CutLines > 0) {
		switch {
		case len(lines.Lines) == 0:
			footer = fmt.Sprintf("[offset %s is beyond end of file (%s lines).]", formatCount(lines.First), formatCount(lines.Total))
		case implicit:
			size := "?"
			if st, err := ws.Stat(a.Path); err == nil {
				size = formatTextFileSize(st.Size)
			}
			footer = fmt.Sprintf("[showing lines %s-%s of %s; file is ~%s. Call again with offset and limit to read more.]",
				formatCount(lines.First), formatCount(lines.Last), formatCount(lines.Total), size)
		default:
			footer = fmt.Sprintf("[showing lines %s-%s of %s.]", formatCount(lines.First), formatCount(lines.Last), formatCount(lines.Total))
		}
	}
	if footer != "" {
		if body != "" && !strings.HasSuffix(body, "\n") {
			body += "\n"
		}
		body += footer
	}
	return textResult(body)
}

func readMediaFile(_ context.Context, ws fsops.Workspace, a readMediaArgs) *mcp.CallToolResult {
	mt := mimeType(a.Path)
	isImage, isAudio := strings.HasPrefix(mt, "image/"), strings.HasPrefix(mt, "audio/")
	if !isImage && !isAudio && !a.Force {
		st, err := ws.Stat(a.Path)
		if err != nil {
			return toolError(errorText(failStat, a.Path, err))
		}
		ext := extname(a.Path)
		if ext == "" {
			ext = "(none)"
		}
		return toolError(fmt.Sprintf("Unrecognized file type %s for read_media_file (only image/* and audio/* are supported).\n\n"+
			"Path: %s\nExtension: %s\nDetected MIME type: %s\nSize: %d bytes\nModified: %s\n\n"+
			"Try read_text_file for text content or get_file_info for full metadata. If you really need raw bytes, call read_media_file again with force: true.",
			ext, a.Path, ext, mt, st.Size, isoTime(st.ModTime)))
	}
	data, err := ws.ReadFile(a.Path)
	if err != nil {
		return toolError(errorText(failRead, a.Path, err))
	}
	var c mcp.Content
	switch {
	case isImage:
		c = &mcp.ImageContent{Data: data, MIMEType: mt}
	case isAudio:
		c = &mcp.AudioContent{Data: data, MIMEType: mt}
	default:
		// The reference answers type "blob", which is no MCP content type:
		// the SDK clients reject the whole result. An embedded resource
		// carries the same bytes and MIME type validly.
		c = &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI: "file://" + resolvedOr(ws, a.Path), MIMEType: mt, Blob: data,
		}}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{c}}
}

func resolvedOr(ws fsops.Workspace, p string) string {
	if abs, err := ws.Resolve(p); err == nil {
		return abs
	}
	return p
}

func readMultipleFiles(_ context.Context, ws fsops.Workspace, a readMultiArgs) *mcp.CallToolResult {
	parts := make([]string, len(a.Paths))
	for i, p := range a.Paths {
		data, err := ws.ReadFile(p)
		if err != nil {
			parts[i] = p + ": Error - " + errorText(failRead, p, err)
			continue
		}
		parts[i] = p + ":\n" + string(data) + "\n"
	}
	return textResult(strings.Join(parts, "\n---\n"))
}

// ── write ───────────────────────────────────────────────────────────────

func writeFile(_ context.Context, ws fsops.Workspace, a writeArgs) *mcp.CallToolResult {
	if err := ws.WriteFile(a.Path, []byte(a.Content)); err != nil {
		return toolError(errorText(failWrite, a.Path, err))
	}
	return textResult("Successfully wrote to " + a.Path)
}

func editFile(_ context.Context, ws fsops.Workspace, a editArgs) *mcp.CallToolResult {
	edits := make([]fsops.Edit, len(a.Edits))
	for i, e := range a.Edits {
		edits[i] = fsops.Edit{OldText: e.OldText, NewText: e.NewText, ReplaceAll: e.ReplaceAll}
	}
	res, err := ws.Edit(a.Path, edits, a.DryRun)
	if err != nil {
		prefix := failWrite
		if errcode.Is(err, errcode.NotFound) || errcode.Is(err, errcode.IsADirectory) || errcode.Is(err, errcode.ReadFailed) || errcode.Is(err, errcode.TooLarge) {
			prefix = failRead
		}
		return toolError(errorText(prefix, a.Path, err))
	}
	if a.DryRun {
		return textResult("[DRY RUN]\n" + res.Diff)
	}
	return textResult(res.Diff)
}

// ── directories ─────────────────────────────────────────────────────────

func createDirectory(_ context.Context, ws fsops.Workspace, a pathArgs) *mcp.CallToolResult {
	if err := ws.Mkdir(a.Path, true); err != nil {
		return toolError(errorText(failMkdir, a.Path, err))
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

func listDirectory(_ context.Context, ws fsops.Workspace, a pathArgs) *mcp.CallToolResult {
	entries, err := listEntries(ws, a.Path, false)
	if err != nil {
		return toolError(errorText(failReadDir, a.Path, err))
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
		b.WriteString(e.name)
	}
	return textResult(b.String())
}

func listDirectoryWithSizes(_ context.Context, ws fsops.Workspace, a sizesArgs) *mcp.CallToolResult {
	entries, err := listEntries(ws, a.Path, true)
	if err != nil {
		return toolError(errorText(failReadDir, a.Path, err))
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
			b.WriteString("[DIR] " + padEnd(e.name, 30) + "\n")
		} else {
			files++
			total += e.size
			b.WriteString("[FILE] " + padEnd(e.name, 30) + " " + formatSize(e.size) + "\n")
		}
	}
	fmt.Fprintf(&b, "\nTotal: %d files, %d directories\nCombined size: %s", files, dirs, formatSize(total))
	return textResult(b.String())
}

func directoryTree(ctx context.Context, ws fsops.Workspace, a treeArgs) *mcp.CallToolResult {
	opts := fsops.TreeOptions{Exclude: a.ExcludePatterns, DefaultExcludes: a.IncludeDefaultExcludes == nil || *a.IncludeDefaultExcludes}
	nodes, err := ws.Tree(ctx, a.Path, opts)
	if err != nil {
		return toolError(errorText(failReadDir, a.Path, err))
	}
	return textResult(fsops.TreeJSON(nodes))
}

// ── files ───────────────────────────────────────────────────────────────

func moveFile(_ context.Context, ws fsops.Workspace, a moveArgs) *mcp.CallToolResult {
	// The reference checks in this order and words each failure itself;
	// the checks also keep a failed move from creating the parent below.
	ok, err := ws.Exists(a.Source)
	if err != nil {
		return toolError(errorText(failMove, a.Source, err))
	}
	if !ok {
		return toolError("Source does not exist: " + a.Source)
	}
	ok, err = ws.Exists(a.Destination)
	if err != nil {
		return toolError(errorText(failMove, a.Destination, err))
	}
	if ok {
		return toolError("Destination already exists: " + a.Destination)
	}
	if dir := path.Dir(a.Destination); dir != "." && dir != "/" {
		if err := ws.Mkdir(dir, true); err != nil {
			return toolError(errorText(failMkdir, dir, err))
		}
	}
	if err := ws.Move(a.Source, a.Destination); err != nil {
		switch errcode.Of(err) {
		case errcode.AlreadyExists:
			return toolError("Destination already exists: " + a.Destination)
		case errcode.NotFound:
			return toolError("Source does not exist: " + a.Source)
		}
		return toolError(errorText(failMove, a.Source+" to "+a.Destination, err))
	}
	return textResult("Moved " + a.Source + " to " + a.Destination)
}

func searchFiles(ctx context.Context, ws fsops.Workspace, a searchArgs) *mcp.CallToolResult {
	hits, err := ws.Search(ctx, a.Path, a.Pattern, fsops.SearchOptions{Exclude: a.ExcludePatterns, SortBy: a.SortBy})
	if err != nil {
		prefix := failReadDir
		if errcode.Is(err, errcode.InvalidArgument) {
			prefix = failSearch
		}
		return toolError(errorText(prefix, a.Path, err))
	}
	if len(hits) == 0 {
		return textResult("No matches found")
	}
	return textResult(strings.Join(hits, "\n"))
}

func getFileInfo(_ context.Context, ws fsops.Workspace, a pathArgs) *mcp.CallToolResult {
	st, err := ws.Stat(a.Path)
	if err != nil {
		return toolError(errorText(failStat, a.Path, err))
	}
	typ := "other"
	switch {
	case st.IsDir():
		typ = "directory"
	case st.Mode.IsRegular():
		typ = "file"
	}
	created := st.BirthTime
	if created.IsZero() {
		created = st.ChangeTime
	}
	// JSON.stringify(info, null, 2) with the reference's key order; the
	// values need no escaping beyond what quote() does.
	text := "{\n" +
		`  "path": ` + quote(a.Path) + ",\n" +
		`  "type": "` + typ + `",` + "\n" +
		`  "size": ` + strconv.FormatInt(st.Size, 10) + ",\n" +
		`  "created": "` + isoTime(created) + `",` + "\n" +
		`  "modified": "` + isoTime(st.ModTime) + `",` + "\n" +
		`  "accessed": "` + isoTime(st.AccessTime) + `",` + "\n" +
		`  "mode": "` + strconv.FormatUint(uint64(fsops.POSIXMode(st.Mode)), 8) + `"` + "\n}"
	return textResult(text)
}

// quote is JSON.stringify for a string: like Go's %q for JSON but without
// HTML escaping.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// ── exec and grep ───────────────────────────────────────────────────────

func (s *Server) exec(ctx context.Context, ws fsops.Workspace, a execArgs) *mcp.CallToolResult {
	if jsTrim(a.Command) == "" {
		return toolError("Command cannot be empty")
	}
	// A scope's directory is created on first use; exec may be the first.
	if ws != s.opts.Workspace {
		if err := ws.Mkdir(".", true); err != nil {
			return toolError(errorText(failMkdir, ".", err))
		}
	}
	res, err := s.opts.Executor.Run(ctx, sandbox.Request{
		Command:   a.Command,
		Workspace: ws,
		Env:       a.Env,
		Timeout:   s.opts.ExecTimeout,
	})
	if err != nil {
		return toolError(execErrorText(err))
	}
	stdout := jsTrim(string(sandbox.WithTruncationNotice(res.Stdout, res.StdoutSize)))
	stderr := jsTrim(string(sandbox.WithTruncationNotice(res.Stderr, res.StderrSize)))
	if res.TimedOut {
		// We do better than the reference (which waits forever): say that
		// it was killed, after how long, and give what it printed.
		var b strings.Builder
		fmt.Fprintf(&b, "Command timed out after %s and was killed.", roundDuration(s.opts.ExecTimeout, res.Duration))
		if stdout == "" && stderr == "" {
			b.WriteString(" It printed nothing before the timeout.")
		}
		if stdout != "" {
			b.WriteString("\n[stdout before the timeout]\n" + stdout)
		}
		if stderr != "" {
			b.WriteString("\n[stderr before the timeout]\n" + stderr)
		}
		return toolError(b.String())
	}
	if res.ExitCode != 0 {
		msg := stderr
		if msg == "" {
			msg = stdout
		}
		code := strconv.Itoa(res.ExitCode)
		if res.Signal != "" {
			code += " (killed by signal " + res.Signal + ")"
		}
		return toolError("Command execution failed with exit code " + code + ": " + msg)
	}
	return textResult(stdout)
}

func roundDuration(configured, took time.Duration) time.Duration {
	if configured > 0 {
		return configured
	}
	return took.Round(time.Second)
}

func execErrorText(err error) string {
	if text, ok := sandbox.RefusalText(err); ok {
		return text
	}
	var e *errcode.Error
	if !errors.As(err, &e) {
		return "Failed to execute command: " + err.Error()
	}
	switch e.Code {
	case errcode.EmptyCommand:
		return "Command cannot be empty"
	case errcode.PathEscapeAttempt:
		if e.Msg != "" {
			return e.Msg
		}
		return "Command failed safety check"
	case errcode.Timeout:
		return "Command timed out: " + reason(e)
	}
	return "Failed to execute command: " + reason(e)
}

func grep(ctx context.Context, ws fsops.Workspace, a grepArgs) *mcp.CallToolResult {
	mode := a.OutputMode
	if mode == "" {
		mode = "files_with_matches"
	}
	// Models fill optional fields with neutral values, so context is
	// resolved the way rg resolves -B/-A/-C (explicit side wins) and only
	// used in content mode.
	var before, after int
	if mode == "content" {
		if a.ContextAround != nil {
			before, after = *a.ContextAround, *a.ContextAround
		}
		if a.ContextBefore != nil {
			before = *a.ContextBefore
		}
		if a.ContextAfter != nil {
			after = *a.ContextAfter
		}
	}
	res, err := ws.Grep(ctx, fsops.GrepOptions{
		Pattern: a.Pattern, Path: a.Path, Glob: a.Glob, Type: a.Type, OutputMode: mode,
		CaseInsensitive: a.CaseInsensitive, Multiline: a.Multiline,
		Before: before, After: after,
		LineNumbers: a.LineNumbers && mode == "content",
		HeadLimit:   a.HeadLimit,
	})
	if err != nil {
		p := a.Path
		if p == "" {
			p = "."
		}
		return toolError(errorText(failGrep, p, err))
	}
	if res.Output == "" {
		return textResult("No matches found")
	}
	return textResult(res.Output)
}

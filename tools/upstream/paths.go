package upstream

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// PathChecker refuses a call whose path arguments would take an upstream
// outside the workspace, before the upstream sees the call. An upstream is a
// program of its own: it takes a path as the operating system would
// (relative to its working directory, absolute as is), so that is how a path
// is judged here, and then fsops.Workspace.Resolve checks the symlinks on
// the way, so a link inside the workspace that leads out is refused too.
//
// Which strings are paths: any string under a key named like a path (the
// execution service's list path, file, filepath, directory, dir, source,
// destination, target, filename; their plurals; and names ending in path,
// dir, directory or filename, in any case, with '_' or '-'), at any depth,
// in arrays too (paths: [...], edits: [{path}]); any string whose schema
// says it is a path (a format naming a path, file or directory); and any
// file: URI anywhere (any case, one slash or three). A NUL byte in a path
// is refused.
type PathChecker struct {
	dir    string // the upstream's working directory (absolute, clean)
	schema map[string]any
}

// NewPathChecker returns the checker for one tool: dir is the upstream's
// working directory (an absolute host path, where its relative paths
// start), and schema the tool's input schema as the upstream listed it.
func NewPathChecker(dir string, schema any) *PathChecker {
	m, _ := schema.(map[string]any)
	if m == nil {
		// A schema that is not a map (a typed struct from the SDK) is seen
		// through its JSON form.
		if b, err := json.Marshal(schema); err == nil {
			_ = json.Unmarshal(b, &m)
		}
	}
	return &PathChecker{dir: path.Clean(dir), schema: m}
}

// Check walks the call's arguments and returns the first refusal of a path
// outside ws (the workspace, or the caller's scope of it): an
// *errcode.Error with Code PathEscapeAttempt naming the path as given and,
// in Hint, the argument it was in. Arguments that are not a JSON object are
// left to the upstream (there is no path to find in them).
func (c *PathChecker) Check(ws fsops.Workspace, args json.RawMessage) error {
	if len(args) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "call", Msg: "arguments are not valid JSON: " + err.Error()}
	}
	return c.walk(ws, v, c.schema, "arguments", false)
}

// walk visits v; schema is v's schema node (nil when unknown) and isPath
// says whether a string here is a path (from its key or its schema).
func (c *PathChecker) walk(ws fsops.Workspace, v any, schema map[string]any, where string, isPath bool) error {
	isPath = isPath || schemaSaysPath(schema)
	switch x := v.(type) {
	case string:
		if isPath {
			return c.checkPath(ws, x, where)
		}
		if isFileURI(x) {
			return c.checkPath(ws, x, where)
		}
	case []any:
		items, _ := schema["items"].(map[string]any)
		for i, e := range x {
			if err := c.walk(ws, e, items, where+"["+strconv.Itoa(i)+"]", isPath); err != nil {
				return err
			}
		}
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		extra, _ := schema["additionalProperties"].(map[string]any)
		for k, e := range x {
			sub, _ := props[k].(map[string]any)
			if sub == nil {
				sub = extra
			}
			if err := c.walk(ws, e, sub, where+"."+k, pathName(k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// pathName reports whether an argument's name says it holds a path.
func pathName(k string) bool {
	n := strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(k))
	switch n {
	case "path", "paths", "file", "files", "filepath", "filepaths", "filename", "filenames",
		"directory", "directories", "dir", "dirs", "source", "sources", "destination", "destinations",
		"target", "targets", "src", "dst", "dest", "cwd", "workdir", "workingdirectory", "folder", "root":
		return true
	}
	for _, suffix := range []string{"path", "paths", "dir", "dirs", "directory", "filename", "filenames"} {
		if strings.HasSuffix(n, suffix) {
			return true
		}
	}
	return false
}

// schemaSaysPath reports whether a schema node declares a path.
func schemaSaysPath(schema map[string]any) bool {
	f, _ := schema["format"].(string)
	f = strings.ToLower(f)
	return strings.Contains(f, "path") || f == "file" || f == "directory" || f == "dir"
}

// checkPath judges one path as the upstream will take it.
func (c *PathChecker) checkPath(ws fsops.Workspace, p, where string) error {
	given := p
	refuse := func(msg string) error {
		return &errcode.Error{Code: errcode.PathEscapeAttempt, Op: "call", Path: given, Msg: msg, Hint: "in " + where}
	}
	if strings.IndexByte(p, 0) >= 0 {
		return refuse("path contains a NUL byte")
	}
	if isFileURI(p) {
		// Any spelling a URL parser takes as a file URI (file:/x,
		// file:///x, FILE://localhost/x, percent-encoded), judged by the
		// path it decodes to; a form with no absolute path is refused
		// rather than guessed at.
		u, err := url.Parse(p)
		if err != nil || (u.Host != "" && u.Host != "localhost") {
			return refuse("not a local file URI")
		}
		if u.Opaque != "" || !path.IsAbs(u.Path) {
			return refuse("not an absolute file URI")
		}
		p = u.Path
		if strings.IndexByte(p, 0) >= 0 {
			return refuse("path contains a NUL byte")
		}
	}
	if p == "" {
		return nil // no path: the upstream answers for itself
	}
	// "~" is the upstream's HOME, which the sandbox sets to its working
	// directory; "~user" is another user's home.
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = path.Join(c.dir, p[1:])
	} else if strings.HasPrefix(p, "~") {
		return refuse("another user's home directory is outside the workspace")
	}
	abs := path.Clean(p)
	if !path.IsAbs(p) {
		abs = path.Join(c.dir, p)
	}
	root := ws.Root()
	var rel string
	switch {
	case abs == root:
		rel = "."
	case strings.HasPrefix(abs, root+"/"):
		rel = abs[len(root)+1:]
	case path.IsAbs(p):
		return refuse(fmt.Sprintf("absolute path outside the workspace (%s)", root))
	default:
		return refuse("path escapes the workspace")
	}
	if _, err := ws.Resolve(rel); err != nil {
		if errcode.Is(err, errcode.PathEscapeAttempt) {
			return refuse("a symlink on the way leads outside the workspace")
		}
		return &errcode.Error{Code: errcode.Of(err), Op: "call", Path: given, Msg: errcode.Sentence(err), Hint: "in " + where, Err: err}
	}
	return nil
}

// isFileURI reports whether s starts with the file: scheme, in any case.
func isFileURI(s string) bool {
	return len(s) >= 5 && strings.EqualFold(s[:5], "file:")
}

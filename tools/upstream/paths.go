package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

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
//
// It reads the JSON as it lies rather than decoding it into generic maps:
// a string is decoded only when it is judged (a path, or what may be a
// file: URI), and an argument's name is put together only for a refusal,
// so a call with no path costs no allocation (docs/performance.md, "The
// routed upstream call"). Every member is judged, a repeated key's too,
// where a decoded map keeps only the last.
func (c *PathChecker) Check(ws fsops.Workspace, args json.RawMessage) error {
	if len(args) == 0 {
		return nil
	}
	if !json.Valid(args) {
		var v any
		err := json.Unmarshal(args, &v)
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "call", Msg: "arguments are not valid JSON: " + err.Error()}
	}
	_, err := c.walk(ws, args, 0, c.schema, nil, false)
	return err
}

// argLoc is where a value is in the arguments, as a chain to the top:
// rendered ("arguments.edits[0].path") only for a refusal.
type argLoc struct {
	up      *argLoc
	key     string // a member's name
	index   int    // an array element's index
	isIndex bool
}

func (l *argLoc) String() string {
	if l == nil {
		return "arguments"
	}
	if l.isIndex {
		return l.up.String() + "[" + strconv.Itoa(l.index) + "]"
	}
	return l.up.String() + "." + l.key
}

// walk visits the value that starts at data[i] (valid JSON, Check saw to
// it) and returns where it ends; schema is the value's schema node (nil
// when unknown) and isPath says whether a string here is a path (from its
// key or its schema).
func (c *PathChecker) walk(ws fsops.Workspace, data []byte, i int, schema map[string]any, at *argLoc, isPath bool) (int, error) {
	isPath = isPath || schemaSaysPath(schema)
	i = skipSpace(data, i)
	switch data[i] {
	case '"':
		end := stringEnd(data, i)
		raw := data[i+1 : end-1]
		if isPath || mayBeFileURI(raw) {
			s := jsonString(data[i:end])
			if isPath || isFileURI(s) {
				if err := c.checkPath(ws, s, at); err != nil {
					return end, err
				}
			}
		}
		return end, nil
	case '[':
		items, _ := schema["items"].(map[string]any)
		i = skipSpace(data, i+1)
		for n := 0; data[i] != ']'; n++ {
			here := argLoc{up: at, index: n, isIndex: true}
			next, err := c.walk(ws, data, i, items, &here, isPath)
			if err != nil {
				return next, err
			}
			if i = skipSpace(data, next); data[i] == ',' {
				i = skipSpace(data, i+1)
			}
		}
		return i + 1, nil
	case '{':
		props, _ := schema["properties"].(map[string]any)
		extra, _ := schema["additionalProperties"].(map[string]any)
		i = skipSpace(data, i+1)
		for data[i] != '}' {
			end := stringEnd(data, i)
			k := jsonString(data[i:end])
			i = skipSpace(data, end) + 1 // the ':'
			sub, _ := props[k].(map[string]any)
			if sub == nil {
				sub = extra
			}
			here := argLoc{up: at, key: k}
			next, err := c.walk(ws, data, i, sub, &here, pathName(k))
			if err != nil {
				return next, err
			}
			if i = skipSpace(data, next); data[i] == ',' {
				i = skipSpace(data, i+1)
			}
		}
		return i + 1, nil
	}
	// A number, true, false or null.
	for i < len(data) {
		switch data[i] {
		case ',', ']', '}', ' ', '\t', '\r', '\n':
			return i, nil
		}
		i++
	}
	return i, nil
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n') {
		i++
	}
	return i
}

// stringEnd returns the index just past the closing quote of the JSON
// string that opens at data[i].
func stringEnd(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(data)
}

// jsonString decodes a JSON string (quotes included): as it lies when it
// has no escape and is valid UTF-8, else as encoding/json decodes it (so
// invalid UTF-8 reads as U+FFFD, as the decoded map had it).
func jsonString(q []byte) string {
	raw := q[1 : len(q)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw)
	}
	var s string
	_ = json.Unmarshal(q, &s)
	return s
}

// mayBeFileURI reports whether a string, as it lies in the JSON, may
// decode to a file: URI: it starts so, or it has escapes or bytes beyond
// ASCII, which only decoding tells.
func mayBeFileURI(raw []byte) bool {
	if len(raw) >= 5 && isFileURI(string(raw[:5])) {
		return true
	}
	for _, b := range raw {
		if b == '\\' || b >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// pathName reports whether an argument's name says it holds a path.
func pathName(k string) bool {
	if len(k) > 64 {
		return pathNameSlow(k)
	}
	// The name in lower case without '_' and '-', on the stack.
	var b [64]byte
	n := 0
	for i := 0; i < len(k); i++ {
		ch := k[i]
		switch {
		case ch == '_' || ch == '-':
			continue
		case ch >= utf8.RuneSelf:
			return pathNameSlow(k) // Unicode case folding
		case 'A' <= ch && ch <= 'Z':
			ch += 'a' - 'A'
		}
		b[n] = ch
		n++
	}
	return pathNameLower(string(b[:n]))
}

func pathNameSlow(k string) bool {
	return pathNameLower(strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(k)))
}

func pathNameLower(n string) bool {
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
func (c *PathChecker) checkPath(ws fsops.Workspace, p string, at *argLoc) error {
	given := p
	refuse := func(msg string) error {
		return &errcode.Error{Code: errcode.PathEscapeAttempt, Op: "call", Path: given, Msg: msg, Hint: "in " + at.String()}
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
		return &errcode.Error{Code: errcode.Of(err), Op: "call", Path: given, Msg: errcode.Sentence(err), Hint: "in " + at.String(), Err: err}
	}
	return nil
}

// isFileURI reports whether s starts with the file: scheme, in any case.
func isFileURI(s string) bool {
	return len(s) >= 5 && strings.EqualFold(s[:5], "file:")
}

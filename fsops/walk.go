package fsops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/internal/jsonstr"
)

// walker is what Tree, Search and Grep need from an implementation, on paths
// relative to the workspace root. Errors are raw (mapped by the caller).
type walker interface {
	wRel(p string) (string, error)               // client path → relative path
	wList(rel string) ([]Info, error)            // entries (lstat), sorted by name
	wStat(rel string) (Info, error)              // follows a final link that stays inside
	wRead(rel string, max int64) ([]byte, error) // whole file up to max bytes
}

// DefaultTreeExcludes are the names directory_tree leaves out unless told not
// to (the reference's list): version control, dependencies, build output,
// caches, coverage and IDE folders. A pattern without "*" matches the name at
// any depth (and everything below it); one with "*" matches the relative path.
var DefaultTreeExcludes = []string{
	".git", ".svn", ".hg",
	"node_modules", ".venv", "venv", "__pycache__", ".tox", ".nox",
	"dist", "build", ".next", ".nuxt", ".output", "target",
	".cache", ".pytest_cache", ".mypy_cache", ".ruff_cache",
	"coverage", ".coverage", "htmlcov",
	".idea", ".vscode",
	".DS_Store", "*.egg-info", ".eggs",
}

// treeExcluded is the reference's directory_tree exclusion test: a pattern
// with "*" is matched against the relative path; one without matches it,
// or any path ending in it, or any path below it. It is the definition
// treeExcluder is held to (TestTreeExcluderMatchesReference).
func treeExcluded(rel string, patterns []string) bool {
	for _, p := range patterns {
		if strings.Contains(p, "*") {
			if globMatch(p, rel) {
				return true
			}
			continue
		}
		if globMatch(p, rel) || globMatch("**/"+p, rel) || globMatch("**/"+p+"/**", rel) {
			return true
		}
	}
	return false
}

// treeExcluder is treeExcluded with its patterns compiled once per tree
// instead of per entry: matched per pattern and entry, the 27 default
// excludes cost up to three brace expansions, splits and matches each, five
// times the walk itself (BenchmarkTree2000). A literal pattern (no glob
// syntax: every default but "*.egg-info") excludes exactly the paths in
// which its segments occur as a run, so one of one segment is a set lookup
// per segment of the path; the others are matched by the same globMatch
// steps, pre-expanded.
type treeExcluder struct {
	names map[string]bool // literal one-segment patterns
	runs  [][]string      // literal patterns of several segments
	globs []compiledGlob  // every other pattern, as treeExcluded matches it
}

// compiledGlob is globMatch(pattern, ·) with the pattern's negation, brace
// expansion and segments worked out once.
type compiledGlob struct {
	neg  bool
	alts [][]string
}

func compileGlob(pattern string) compiledGlob {
	var g compiledGlob
	for strings.HasPrefix(pattern, "!") {
		g.neg = !g.neg
		pattern = pattern[1:]
	}
	for _, p := range expandBraces(pattern) {
		g.alts = append(g.alts, splitSegs(p))
	}
	return g
}

func (g compiledGlob) match(segs []string) bool {
	m := false
	for _, alt := range g.alts {
		if matchSegments(alt, segs) {
			m = true
			break
		}
	}
	return m != g.neg
}

func newTreeExcluder(patterns []string) *treeExcluder {
	x := &treeExcluder{names: map[string]bool{}}
	for _, p := range patterns {
		if strings.Contains(p, "*") {
			x.globs = append(x.globs, compileGlob(p))
			continue
		}
		// Literal: no glob syntax, no negation, and no "./" (which
		// splitSegs drops from p but not from "**/"+p).
		if segs := splitSegs(p); len(segs) > 0 && !strings.ContainsAny(p, "?[\\{") &&
			!strings.HasPrefix(p, "!") && !strings.HasPrefix(p, "./") {
			if len(segs) == 1 {
				x.names[segs[0]] = true
			} else {
				x.runs = append(x.runs, segs)
			}
			continue
		}
		x.globs = append(x.globs, compileGlob(p), compileGlob("**/"+p), compileGlob("**/"+p+"/**"))
	}
	return x
}

// excluded is treeExcluded(rel, patterns) for the patterns x was built from.
func (x *treeExcluder) excluded(rel string) bool {
	segs := splitSegs(rel)
	for _, s := range segs {
		if x.names[s] {
			return true
		}
	}
	for _, run := range x.runs {
		for i := 0; i+len(run) <= len(segs); i++ {
			if slices.Equal(segs[i:i+len(run)], run) {
				return true
			}
		}
	}
	for _, g := range x.globs {
		if g.match(segs) {
			return true
		}
	}
	return false
}

type dirID struct{ dev, ino uint64 }

// MaxWalkOutput bounds the text directory_tree and search_files build:
// /mcp's default reply limit (--max-reply-bytes), past which the answer
// could not be sent anyway. Without it, what a walk holds grew with what it
// visits: symlinks that stay inside are followed, and only a link back to
// an ancestor is cut, so 20 directories that each hold two links to the
// next are a million paths; and a file's node in the tree's JSON is indented
// by its depth, so 100,000 files 1,000 directories down were a gigabyte of
// spaces.
const MaxWalkOutput = 32 << 20

// walkOutputBound is MaxWalkOutput; tests lower it.
var walkOutputBound int64 = MaxWalkOutput

var errWalkTooLarge = errors.New("walk output over MaxWalkOutput")

func buildTree(ctx context.Context, w walker, p string, opts TreeOptions) ([]TreeNode, error) {
	rel, err := w.wRel(p)
	if err != nil {
		return nil, withOp(err, opTree)
	}
	info, err := w.wStat(rel)
	if err != nil {
		return nil, mapErr(opTree, p, err)
	}
	if !info.IsDir() {
		return nil, errcode.New(errcode.NotADirectory, "tree", p, "not a directory")
	}
	for _, x := range opts.Exclude {
		if err := checkGlob("tree", p, "excludePatterns", x); err != nil {
			return nil, err
		}
	}
	var patterns []string
	if opts.DefaultExcludes {
		patterns = append(patterns, DefaultTreeExcludes...)
	}
	excl := newTreeExcluder(append(patterns, opts.Exclude...))
	seen := map[dirID]bool{}
	left := walkOutputBound // of TreeJSON's text, estimated from above
	var rec func(dirRel, prefix string, id dirID, level int) ([]TreeNode, error)
	rec = func(dirRel, prefix string, id dirID, level int) ([]TreeNode, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if id != (dirID{}) {
			seen[id] = true
			defer delete(seen, id)
		}
		entries, err := w.wList(dirRel)
		if err != nil {
			return nil, err
		}
		nodes := make([]TreeNode, 0, len(entries))
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			relP := joinRel(prefix, e.Name)
			if excl.excluded(relP) {
				continue
			}
			st := e
			if e.Mode&fs.ModeSymlink != 0 {
				if st, err = w.wStat(joinRel(dirRel, e.Name)); err != nil {
					continue // dangling, escaping or unreadable: left out, as the reference does
				}
			}
			// A node is at most 6 lines indented by 2(2 level+2) spaces,
			// its name escaped (6 bytes a byte at most) and 64 more.
			if left -= 6*(4*int64(level)+4) + 6*int64(len(e.Name)) + 64; left < 0 {
				return nil, errWalkTooLarge
			}
			if !st.IsDir() {
				size := st.Size
				nodes = append(nodes, TreeNode{Name: e.Name, Type: "file", Size: &size})
				continue
			}
			node := TreeNode{Name: e.Name, Type: "directory", Children: []TreeNode{}}
			cid := dirID{st.dev, st.ino}
			if cid == (dirID{}) || !seen[cid] { // a link back to an ancestor is not descended
				kids, err := rec(joinRel(dirRel, e.Name), relP, cid, level+1)
				if err != nil {
					if ctx.Err() != nil || err == errWalkTooLarge {
						return nil, err
					}
				} else {
					node.Children = kids
				}
			}
			nodes = append(nodes, node)
		}
		return nodes, nil
	}
	nodes, err := rec(rel, "", dirID{info.dev, info.ino}, 0)
	if err == errWalkTooLarge {
		return nil, errcode.New(errcode.TooLarge, "tree", p,
			"the tree's JSON would be more than %d bytes (MaxWalkOutput); give a directory further down, or excludePatterns, or list it level by level with list_directory", MaxWalkOutput)
	}
	if err != nil {
		return nil, mapErr(opTree, p, err)
	}
	return nodes, nil
}

// MarshalJSON renders a node with the reference's key order: name, type, then
// children for a directory (always present) or size for a file.
func (n TreeNode) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"name":`)
	writeJSONString(&b, n.Name)
	b.WriteString(`,"type":`)
	writeJSONString(&b, n.Type)
	if n.Type == "directory" {
		b.WriteString(`,"children":[`)
		for i, c := range n.Children {
			if i > 0 {
				b.WriteByte(',')
			}
			cb, err := c.MarshalJSON()
			if err != nil {
				return nil, err
			}
			b.Write(cb)
		}
		b.WriteByte(']')
	} else if n.Size != nil {
		b.WriteString(`,"size":`)
		b.WriteString(strconv.FormatInt(*n.Size, 10))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	b.Write(bytes.TrimSuffix(tmp.Bytes(), []byte("\n")))
}

// TreeJSON renders nodes exactly as the reference's directory_tree does
// (JSON.stringify(tree, null, 2)): two-space indent, no HTML escaping, "[]"
// for an empty tree. It writes the indented text directly: through
// encoding/json (each node's MarshalJSON, then the encoder's compaction and
// indentation, and an encoder per string) it was a third of a 2,000-file
// tree (BenchmarkTree2000). TestTreeJSONMatchesEncoder holds it to the
// encoder's output (treeJSONEncoder).
func TreeJSON(nodes []TreeNode) string {
	buf := appendTreeNodes(make([]byte, 0, 64+len(nodes)*96), nodes, 0)
	return unescapeLineSeps(string(buf))
}

func appendIndent(buf []byte, depth int) []byte {
	buf = append(buf, '\n')
	for range depth {
		buf = append(buf, "  "...)
	}
	return buf
}

func appendTreeNodes(buf []byte, nodes []TreeNode, depth int) []byte {
	if len(nodes) == 0 {
		return append(buf, "[]"...)
	}
	buf = append(buf, '[')
	for i, n := range nodes {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendIndent(buf, depth+1)
		buf = appendTreeNode(buf, n, depth+1)
	}
	buf = appendIndent(buf, depth)
	return append(buf, ']')
}

// appendTreeNode is MarshalJSON's object, indented at depth.
func appendTreeNode(buf []byte, n TreeNode, depth int) []byte {
	buf = append(buf, '{')
	buf = appendIndent(buf, depth+1)
	buf = append(buf, `"name": `...)
	buf = jsonstr.AppendNoHTML(buf, n.Name)
	buf = append(buf, ',')
	buf = appendIndent(buf, depth+1)
	buf = append(buf, `"type": `...)
	buf = jsonstr.AppendNoHTML(buf, n.Type)
	if n.Type == "directory" {
		buf = append(buf, ',')
		buf = appendIndent(buf, depth+1)
		buf = append(buf, `"children": `...)
		buf = appendTreeNodes(buf, n.Children, depth+1)
	} else if n.Size != nil {
		buf = append(buf, ',')
		buf = appendIndent(buf, depth+1)
		buf = append(buf, `"size": `...)
		buf = strconv.AppendInt(buf, *n.Size, 10)
	}
	buf = appendIndent(buf, depth)
	return append(buf, '}')
}

// unescapeLineSeps undoes encoding/json's escaping of U+2028 and U+2029,
// which JSON.stringify prints as they are. An escape counts only after an
// even number of backslashes ("\\u2028" is a backslash and text).
func unescapeLineSeps(s string) string {
	if !strings.Contains(s, `\u202`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			if strings.HasPrefix(s[i:], `\u2028`) || strings.HasPrefix(s[i:], `\u2029`) {
				if s[i+5] == '8' {
					b.WriteString("\u2028")
				} else {
					b.WriteString("\u2029")
				}
				i += 5
				continue
			}
			b.WriteByte(s[i])
			b.WriteByte(s[i+1])
			i++
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

type searchHit struct {
	path  string
	mtime int64
}

func search(ctx context.Context, w walker, p, pattern string, opts SearchOptions) ([]string, error) {
	if pattern == "" {
		return nil, errcode.New(errcode.InvalidArgument, "search", p, "empty pattern; give a glob such as \"**/*.go\"")
	}
	switch opts.SortBy {
	case "", "path", "mtime":
	default:
		return nil, errcode.New(errcode.InvalidArgument, "search", p, "sortBy must be \"path\" or \"mtime\", not %q", opts.SortBy)
	}
	if err := checkGlob("search", p, "pattern", pattern); err != nil {
		return nil, err
	}
	for _, x := range opts.Exclude {
		if err := checkGlob("search", p, "excludePatterns", x); err != nil {
			return nil, err
		}
	}
	rel, err := w.wRel(p)
	if err != nil {
		return nil, withOp(err, opSearch)
	}
	info, err := w.wStat(rel)
	if err != nil {
		return nil, mapErr(opSearch, p, err)
	}
	if !info.IsDir() {
		return nil, errcode.New(errcode.NotADirectory, "search", p, "not a directory")
	}
	// Compiled once (braces expanded, segments split): globMatch per entry
	// expanded them again for every path.
	glob := compileGlob(pattern)
	excl := make([]compiledGlob, len(opts.Exclude))
	for i, x := range opts.Exclude {
		excl[i] = compileGlob(x)
	}
	var hits []searchHit
	left := walkOutputBound // of the hits' text
	seen := map[dirID]bool{}
	var rec func(dirRel, prefix string, id dirID) error
	rec = func(dirRel, prefix string, id dirID) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if id != (dirID{}) {
			seen[id] = true
			defer delete(seen, id)
		}
		entries, err := w.wList(dirRel)
		if err != nil {
			return nil // unreadable directory: skipped
		}
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return err
			}
			relP := joinRel(prefix, e.Name)
			segs := splitSegs(relP)
			skip := false
			for _, x := range excl {
				if x.match(segs) {
					skip = true
					break
				}
			}
			if skip {
				continue
			}
			st := e
			if e.Mode&fs.ModeSymlink != 0 {
				if st, err = w.wStat(joinRel(dirRel, e.Name)); err != nil {
					continue
				}
			}
			if glob.match(segs) {
				hit := searchHit{path: path.Join(p, relP), mtime: st.ModTime.UnixMilli()}
				if left -= int64(len(hit.path)) + 1; left < 0 {
					return errWalkTooLarge
				}
				hits = append(hits, hit)
			}
			if st.IsDir() {
				cid := dirID{st.dev, st.ino}
				if cid == (dirID{}) || !seen[cid] {
					if err := rec(joinRel(dirRel, e.Name), relP, cid); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := rec(rel, "", dirID{info.dev, info.ino}); err == errWalkTooLarge {
		return nil, errcode.New(errcode.TooLarge, "search", p,
			"the matches are more than %d bytes of paths (MaxWalkOutput); narrow the pattern, search a directory further down, or add excludePatterns", MaxWalkOutput)
	} else if err != nil {
		return nil, mapErr(opSearch, p, err)
	}
	if opts.SortBy == "mtime" {
		sort.SliceStable(hits, func(i, j int) bool { return hits[i].mtime > hits[j].mtime })
	} else {
		sort.SliceStable(hits, func(i, j int) bool { return localeLess(hits[i].path, hits[j].path) })
	}
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.path
	}
	return out, nil
}

// localeLess approximates JavaScript's a.localeCompare(b) < 0 (ICU root
// collation), which the reference uses to sort search results. Strings are
// compared level by level over the whole string: first base characters
// (punctuation before digits before letters, letters without case or accent),
// then accents (unaccented first), then case (lower first), then bytes.
func localeLess(a, b string) bool {
	ka, kb := collKeys(a), collKeys(b)
	for level := 0; level < 3; level++ {
		if c := compareLevel(ka, kb, level); c != 0 {
			return c < 0
		}
	}
	return a < b
}

// ICU root order of ASCII punctuation and symbols (non-ignorable).
const punctOrder = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"

type collKey struct {
	class   int  // 0 punctuation, 1 digit, 2 letter, 3 other
	primary rune // base character, lower case
	accent  int  // number of combining marks
	upper   bool
}

func collKeys(s string) []collKey {
	keys := make([]collKey, 0, len(s))
	for _, r := range norm.NFD.String(s) {
		if unicode.Is(unicode.Mn, r) {
			if n := len(keys); n > 0 {
				keys[n-1].accent++
			}
			continue
		}
		k := collKey{class: 3, primary: r}
		switch {
		case r < utf8.RuneSelf && strings.ContainsRune(punctOrder, r):
			k.class, k.primary = 0, rune(strings.IndexRune(punctOrder, r))
		case unicode.IsDigit(r):
			k.class = 1
		case unicode.IsLetter(r):
			k.class, k.primary, k.upper = 2, unicode.ToLower(r), unicode.IsUpper(r)
		}
		keys = append(keys, k)
	}
	return keys
}

func compareLevel(a, b []collKey, level int) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		switch level {
		case 0:
			if x.class != y.class {
				return x.class - y.class
			}
			if x.primary != y.primary {
				if x.primary < y.primary {
					return -1
				}
				return 1
			}
		case 1:
			if x.accent != y.accent {
				return x.accent - y.accent
			}
		case 2:
			if x.upper != y.upper {
				if x.upper {
					return 1
				}
				return -1
			}
		}
	}
	return len(a) - len(b)
}

// sortLocale sorts names with localeLess.
func sortLocale(names []string) {
	sort.SliceStable(names, func(i, j int) bool { return localeLess(names[i], names[j]) })
}

package fsops

import (
	"bytes"
	"context"
	"io/fs"
	"path"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// Grep is ripgrep in Go, so the grep tool works where rg is not installed and
// never runs a process. It reproduces what the reference's command line
//
//	rg --color=never --no-heading --with-filename [-i] [-U --multiline-dotall]
//	   [-l|-c|-n] [-B n] [-A n] [--glob g] [--type t] -- PATTERN [PATH]
//
// prints when run from the workspace root, with ripgrep's defaults: hidden
// files and directories skipped, .gitignore (inside a git repository, nested
// ones included), .ignore and .rgignore respected, binary files (a NUL byte)
// skipped, symlinks not followed while walking. A path given explicitly is
// searched whatever those filters say, as rg does. Files are visited in path
// order (rg --sort path), so the output is deterministic. The output is
// trimmed like the reference's exec output, then cut to HeadLimit lines with
// the reference's "[output truncated ...]" note.

// grepMaxFile bounds the size of a file grep reads (rg has no limit; we keep
// memory bounded).
const grepMaxFile = 256 << 20

type grepper struct {
	w       walker
	opts    GrepOptions
	re      *regexp.Regexp
	literal []byte // set when the pattern is a plain literal (fast path)
	mode    string
	before  int
	after   int
	types   []string
	glob    *ignoreFile

	out      []string
	matches  int
	printed  bool // a context group has been printed (for "--")
	ctx      context.Context
	ignStack []ignLevel
}

func grep(ctx context.Context, w walker, opts GrepOptions) (GrepResult, error) {
	g := &grepper{w: w, opts: opts, ctx: ctx}
	if err := g.setup(); err != nil {
		return GrepResult{}, err
	}
	p := opts.Path
	rel, err := w.wRel(p)
	if err != nil {
		return GrepResult{}, relabel(err, "grep")
	}
	// How rg would print paths: relative to the root when no path is given,
	// else joined to the path as given (absolute paths outside the root were
	// made relative, so they print relative).
	display := p
	if strings.HasPrefix(p, "/") && !within(workspaceRootOf(w), path.Clean(p)) {
		display = rel
	}
	info, err := w.wStat(rel)
	if err != nil {
		return GrepResult{}, mapErr("grep", p, err)
	}
	if info.IsDir() {
		if err := g.loadParentIgnores(rel); err != nil {
			return GrepResult{}, err
		}
		if err := g.walkDir(rel, display); err != nil {
			return GrepResult{}, mapErr("grep", p, err)
		}
	} else {
		name := display
		if name == "" {
			name = rel
		}
		g.searchFile(rel, name, true)
	}
	return g.result(), nil
}

// workspaceRootOf returns the Root() of the walker's workspace.
func workspaceRootOf(w walker) string {
	if ws, ok := w.(interface{ Root() string }); ok {
		return ws.Root()
	}
	return "/"
}

func (g *grepper) setup() error {
	o := g.opts
	if o.Pattern == "" {
		return errcode.New(errcode.InvalidArgument, "grep", o.Path, "empty pattern")
	}
	g.mode = o.OutputMode
	switch g.mode {
	case "":
		g.mode = "files_with_matches"
	case "content", "files_with_matches", "count":
	default:
		return errcode.New(errcode.InvalidArgument, "grep", o.Path, "outputMode must be content, files_with_matches or count, not %q", o.OutputMode)
	}
	if o.Before < 0 || o.After < 0 || o.HeadLimit < 0 {
		return errcode.New(errcode.InvalidArgument, "grep", o.Path, "context and headLimit must not be negative")
	}
	if g.mode == "content" {
		g.before, g.after = o.Before, o.After
	}
	flags := syntax.Perl
	if o.CaseInsensitive {
		flags |= syntax.FoldCase
	}
	if o.Multiline {
		flags |= syntax.DotNL
	}
	tree, err := syntax.Parse(o.Pattern, flags)
	if err != nil {
		return errcode.New(errcode.InvalidArgument, "grep", o.Path, "invalid regex %q: %v", o.Pattern, err)
	}
	if !o.Multiline && hasLiteralNewline(tree) {
		return errcode.New(errcode.InvalidArgument, "grep", o.Path,
			"the literal \"\\n\" is not allowed in a regex; enable multiline to match across lines")
	}
	prefix := ""
	if o.CaseInsensitive {
		prefix += "(?i)"
	}
	if o.Multiline {
		prefix += "(?s)"
	}
	prefix += "(?m)"
	g.re, err = regexp.Compile(prefix + o.Pattern)
	if err != nil {
		return errcode.New(errcode.InvalidArgument, "grep", o.Path, "invalid regex %q: %v", o.Pattern, err)
	}
	if tree.Op == syntax.OpLiteral && tree.Flags&syntax.FoldCase == 0 {
		g.literal = []byte(string(tree.Rune))
	}
	if o.Type != "" {
		t, ok := rgTypes[o.Type]
		if !ok {
			return errcode.New(errcode.InvalidArgument, "grep", o.Path, "unrecognized file type: %s (use a ripgrep type name such as go, py, js, ts, rust, java, c, cpp, md, json, yaml, sh, html, css)", o.Type)
		}
		g.types = t
	}
	if o.Glob != "" {
		// An override glob: whitelist unless "!"-prefixed, gitignore syntax,
		// matched relative to the workspace root.
		gl := o.Glob
		neg := strings.HasPrefix(gl, "!")
		if neg {
			gl = gl[1:]
		}
		r, ok := parseIgnoreLine(gl)
		if ok {
			r.neg = !neg // in the ignore file's terms: a whitelist is a negation
			g.glob = &ignoreFile{dir: ".", rules: []ignoreRule{r}}
		}
	}
	return nil
}

func hasLiteralNewline(re *syntax.Regexp) bool {
	if re.Op == syntax.OpLiteral {
		for _, r := range re.Rune {
			if r == '\n' {
				return true
			}
		}
	}
	for _, s := range re.Sub {
		if hasLiteralNewline(s) {
			return true
		}
	}
	return false
}

// loadParentIgnores loads the ignore files of the directories from the root
// down to (excluding) the search directory, as rg reads parent ignore files.
func (g *grepper) loadParentIgnores(rel string) error {
	if rel == "." {
		return nil
	}
	parts := strings.Split(rel, "/")
	dir := "."
	for _, part := range parts {
		g.pushIgnores(dir)
		dir = joinRel(dir, part)
	}
	return nil
}

// pushIgnores reads the ignore files of dir onto the stack (the caller pops).
func (g *grepper) pushIgnores(dir string) {
	lv := ignLevel{}
	if _, err := g.w.wStat(joinRel(dir, ".git")); err == nil {
		lv.hasGit = true
	}
	read := func(name string) *ignoreFile {
		data, err := g.w.wRead(joinRel(dir, name), 1<<20)
		if err != nil {
			return nil
		}
		return parseIgnore(dir, string(data))
	}
	lv.rg, lv.ig, lv.gi = read(".rgignore"), read(".ignore"), read(".gitignore")
	g.ignStack = append(g.ignStack, lv)
}

// ignLevel is the ignore state of one directory on the walk's path.
type ignLevel struct {
	hasGit     bool        // the directory holds .git: a repository root
	rg, ig, gi *ignoreFile // .rgignore, .ignore, .gitignore (nil if absent)
}

// ignored applies rg's filter order to an entry found while walking: the
// --glob override decides first; then ignore files, where for each kind the
// deepest directory with a matching rule decides and .rgignore beats .ignore
// beats .gitignore (which counts only inside a git repository, and not above
// its root); then --type for files; then hidden names, unless an ignore file
// or the type whitelisted the entry.
func (g *grepper) ignored(rel, name string, isDir bool) bool {
	if g.glob != nil {
		if m, white := g.glob.match(rel, isDir); m {
			return !white
		}
		if !isDir && g.glob.rules[0].neg {
			return true // a whitelist glob exists and this file does not match it
		}
	}
	anyGit := false
	for _, lv := range g.ignStack {
		anyGit = anyGit || lv.hasGit
	}
	const none, ign, white = 0, 1, 2
	try := func(f *ignoreFile, cur int) int {
		if cur != none || f == nil {
			return cur
		}
		sub, ok := relUnder(f.dir, rel)
		if !ok {
			return none
		}
		if m, w := f.match(sub, isDir); m {
			if w {
				return white
			}
			return ign
		}
		return none
	}
	mRg, mIg, mGi := none, none, none
	sawGit := false
	for i := len(g.ignStack) - 1; i >= 0; i-- {
		lv := g.ignStack[i]
		mRg = try(lv.rg, mRg)
		mIg = try(lv.ig, mIg)
		if anyGit && !sawGit {
			mGi = try(lv.gi, mGi)
		}
		sawGit = sawGit || lv.hasGit
	}
	m := mRg
	if m == none {
		m = mIg
	}
	if m == none {
		m = mGi
	}
	if m == ign {
		return true
	}
	whitelisted := m == white
	if !isDir && g.types != nil {
		hit := false
		for _, t := range g.types {
			if matchSegment(t, name) {
				hit = true
				break
			}
		}
		if !hit {
			return true
		}
		whitelisted = true
	}
	return !whitelisted && strings.HasPrefix(name, ".")
}

func (g *grepper) walkDir(rel, display string) error {
	if err := g.ctx.Err(); err != nil {
		return err
	}
	g.pushIgnores(rel)
	defer func() { g.ignStack = g.ignStack[:len(g.ignStack)-1] }()
	entries, err := g.w.wList(rel)
	if err != nil {
		return nil // unreadable directory: rg reports it on stderr and goes on
	}
	for _, e := range entries {
		if e.Mode&fs.ModeSymlink != 0 {
			continue // rg does not follow links while walking
		}
		crel := joinRel(rel, e.Name)
		isDir := e.IsDir()
		if g.ignored(crel, e.Name, isDir) {
			continue
		}
		cdisp := joinDisplay(display, e.Name)
		if isDir {
			if err := g.walkDir(crel, cdisp); err != nil {
				return err
			}
			continue
		}
		if !e.Mode.IsRegular() {
			continue
		}
		g.searchFile(crel, cdisp, false)
	}
	return nil
}

// joinDisplay joins like Rust's Path::join, which rg uses to print paths.
func joinDisplay(dir, name string) string {
	switch {
	case dir == "":
		return name
	case strings.HasSuffix(dir, "/"):
		return dir + name
	}
	return dir + "/" + name
}

// span is a match covering lines [first, last] (0-based line indexes).
type span struct{ first, last int }

func (g *grepper) searchFile(rel, name string, explicit bool) {
	data, err := g.w.wRead(rel, grepMaxFile)
	if err != nil {
		return
	}
	nul := bytes.IndexByte(data, 0)
	if nul >= 0 && !explicit {
		return // binary: rg skips it while walking
	}
	spans := g.find(data)
	if len(spans) == 0 {
		return
	}
	switch g.mode {
	case "files_with_matches":
		g.out = append(g.out, name)
		g.matches++
	case "count":
		n := len(spans)
		g.out = append(g.out, name+":"+strconv.Itoa(n))
		g.matches += n
	default:
		if nul >= 0 {
			g.out = append(g.out, name+": binary file matches (found \"\\0\" byte around offset "+strconv.Itoa(nul)+")")
			g.matches++
			return
		}
		g.emitContent(name, data, spans)
	}
}

// find returns the matching lines (line mode) or match spans (multiline).
func (g *grepper) find(data []byte) []span {
	if g.literal != nil && !bytes.Contains(data, g.literal) {
		return nil
	}
	var spans []span
	if g.opts.Multiline {
		line, pos := 0, 0
		for _, m := range g.re.FindAllIndex(data, -1) {
			if m[1] == m[0] && m[0] == len(data) && len(data) > 0 && data[len(data)-1] == '\n' {
				break // an empty match after the final newline is not a line
			}
			first := line + bytes.Count(data[pos:m[0]], []byte{'\n'})
			end := m[1]
			if end > m[0] && data[end-1] == '\n' {
				end-- // a match ending with the newline ends on that line
			}
			last := first + bytes.Count(data[m[0]:max(end, m[0])], []byte{'\n'})
			line, pos = first, m[0]
			if n := len(spans); n > 0 && spans[n-1].last >= first {
				if last > spans[n-1].last {
					spans[n-1].last = last
				}
				continue
			}
			spans = append(spans, span{first, last})
		}
		return spans
	}
	// Line mode: search the whole buffer (fast), line by line only when a
	// match would cross a newline (e.g. \s matching "\n").
	pos, line := 0, 0
	for pos <= len(data) {
		var m []int
		if g.literal != nil {
			i := bytes.Index(data[pos:], g.literal)
			if i >= 0 {
				m = []int{pos + i, pos + i + len(g.literal)}
			}
		} else {
			m = g.re.FindIndex(data[pos:])
			if m != nil {
				m[0] += pos
				m[1] += pos
			}
		}
		if m == nil {
			break
		}
		if bytes.IndexByte(data[m[0]:m[1]], '\n') >= 0 {
			return g.findLines(data)
		}
		if m[0] == len(data) && len(data) > 0 && data[len(data)-1] == '\n' {
			break
		}
		line += bytes.Count(data[pos:m[0]], []byte{'\n'})
		spans = append(spans, span{line, line})
		nl := bytes.IndexByte(data[m[0]:], '\n')
		if nl < 0 {
			break
		}
		pos = m[0] + nl + 1
		line++
	}
	return spans
}

// findLines matches each line on its own (the slow, exact path).
func (g *grepper) findLines(data []byte) []span {
	var spans []span
	line := 0
	for start := 0; start <= len(data); line++ {
		end := bytes.IndexByte(data[start:], '\n')
		var l []byte
		if end < 0 {
			if start == len(data) && start > 0 {
				break
			}
			l = data[start:]
		} else {
			l = data[start : start+end]
		}
		if g.re.Match(l) {
			spans = append(spans, span{line, line})
		}
		if end < 0 {
			break
		}
		start += end + 1
	}
	return spans
}

// emitContent prints matching lines with context, as rg does.
func (g *grepper) emitContent(name string, data []byte, spans []span) {
	lines := splitLinesNoNL(data)
	isMatch := make(map[int]bool)
	for _, s := range spans {
		for l := s.first; l <= s.last && l < len(lines); l++ {
			isMatch[l] = true
		}
		g.matches++
	}
	lastPrinted := -2
	for _, s := range spans {
		from := max(0, s.first-g.before)
		to := min(len(lines)-1, s.last+g.after)
		if from <= lastPrinted {
			from = lastPrinted + 1
		}
		if from > to {
			continue
		}
		if (g.before > 0 || g.after > 0) && g.printed && from != lastPrinted+1 {
			g.out = append(g.out, "--")
		}
		for l := from; l <= to; l++ {
			sep := "-"
			if isMatch[l] {
				sep = ":"
			}
			var b strings.Builder
			b.WriteString(name)
			if g.opts.LineNumbers {
				b.WriteString(sep)
				b.WriteString(strconv.Itoa(l + 1))
			}
			b.WriteString(sep)
			b.Write(lines[l])
			g.out = append(g.out, b.String())
		}
		g.printed = true
		lastPrinted = to
	}
	// rg's "--" between files: the next file's first group is never adjacent.
	if lastPrinted >= 0 {
		g.printed = true
	}
}

func splitLinesNoNL(data []byte) [][]byte {
	if len(data) > 0 && data[len(data)-1] == '\n' {
		data = data[:len(data)-1]
	}
	return bytes.Split(data, []byte{'\n'})
}

func (g *grepper) result() GrepResult {
	if len(g.out) == 0 {
		return GrepResult{}
	}
	text := strings.TrimSpace(strings.Join(g.out, "\n"))
	if n := g.opts.HeadLimit; n > 0 {
		lines := strings.Split(text, "\n")
		if len(lines) > n {
			text = strings.Join(lines[:n], "\n") + "\n[output truncated to first " + strconv.Itoa(n) +
				" lines; " + strconv.Itoa(len(lines)-n) + " more hidden]"
		}
	}
	return GrepResult{Output: text, Matches: g.matches}
}

package fsops

import (
	"bytes"
	"context"
	"io/fs"
	"path"
	"regexp"
	"regexp/syntax"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

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

// grepMaxLines and grepMaxOutput bound the output one grep call holds: a
// 256 MiB file of "a\n" has 128 million matching lines, and rendering or
// even recording every one of them took gigabytes (32 MiB of "a\n" made
// content mode allocate 4.9 GB). Files are searched only for as many
// matches as can still be printed; past either bound the search stops and
// the output ends with a note (grepCutNote). The byte bound is /mcp's
// default reply limit (--max-reply-bytes), past which the answer could not
// be sent anyway.
const (
	grepMaxLines  = 1 << 20
	grepMaxOutput = 32 << 20
)

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
	rgCap    int  // ripgrep's read buffer size by now (it grows, never shrinks)
	ctx      context.Context
	ignStack []ignLevel

	// What is left of the output bounds, taken by the workers as they
	// render lines (take); once either is below zero nothing more is
	// rendered. cut is set by the in-order merge at the first file whose
	// output was cut: nothing after it is merged.
	linesLeft, bytesLeft atomic.Int64
	cut                  bool
	binHeld              atomic.Int64 // bytes of binaryFile.text held (grepMaxBinaryHeld)
}

// take reserves one output line of size bytes; false once the output
// bounds are spent (they then stay spent).
func (g *grepper) take(size int) bool {
	return g.linesLeft.Add(-1) >= 0 && g.bytesLeft.Add(-int64(size)) >= 0
}

// spent reports whether the output bounds are spent.
func (g *grepper) spent() bool { return g.linesLeft.Load() <= 0 || g.bytesLeft.Load() <= 0 }

func grep(ctx context.Context, w walker, opts GrepOptions) (GrepResult, error) {
	g := &grepper{w: w, opts: opts, ctx: ctx, rgCap: rgBufferSize}
	g.linesLeft.Store(grepMaxLines)
	g.bytesLeft.Store(grepMaxOutput)
	if err := g.setup(); err != nil {
		return GrepResult{}, err
	}
	p := opts.Path
	rel, err := w.wRel(p)
	if err != nil {
		return GrepResult{}, withOp(err, opGrep)
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
		return GrepResult{}, mapErr(opGrep, p, err)
	}
	if info.IsDir() {
		g.printed = false
		if err := g.loadParentIgnores(rel); err != nil {
			return GrepResult{}, err
		}
		if err := g.walkDir(rel, display); err != nil {
			return GrepResult{}, mapErr(opGrep, p, err)
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
	if len(o.Glob) > MaxGlobBytes {
		return errcode.New(errcode.InvalidArgument, "grep", o.Path, "glob is %d bytes, over the %d-byte limit for a glob pattern", len(o.Glob), MaxGlobBytes)
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
		g.pushIgnores(dir, nil)
		dir = joinRel(dir, part)
	}
	return nil
}

// pushIgnores reads the ignore files of dir onto the stack (the caller
// pops). names, when known, is the directory's listing, so files that are not
// there are not even tried.
func (g *grepper) pushIgnores(dir string, names map[string]bool) {
	lv := ignLevel{}
	has := func(n string) bool {
		if names != nil {
			return names[n]
		}
		_, err := g.w.wStat(joinRel(dir, n))
		return err == nil
	}
	lv.hasGit = has(".git")
	read := func(name string) *ignoreFile {
		if !has(name) {
			return nil
		}
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
	d, err := openGrepDir(g.w, rel)
	if err != nil {
		return nil // unreadable directory: rg reports it on stderr and goes on
	}
	ents := d.entries()
	names := make(map[string]bool, 4)
	for _, e := range ents {
		switch e.name {
		case ".git", ".gitignore", ".ignore", ".rgignore":
			names[e.name] = true
		}
	}
	g.pushIgnores(rel, names)
	defer func() { g.ignStack = g.ignStack[:len(g.ignStack)-1] }()

	// Decide what to visit (in name order), then search this directory's
	// files in parallel, then emit in order, descending into directories
	// where they fall so the output is in path order.
	type item struct {
		name  string
		isDir bool
		file  int // index into files, for a file
	}
	var items []item
	var files []string
	for _, e := range ents {
		if e.symlink {
			continue // rg does not follow links while walking
		}
		crel := joinRel(rel, e.name)
		if g.ignored(crel, e.name, e.dir) {
			continue
		}
		if e.dir {
			items = append(items, item{name: e.name, isDir: true})
		} else if e.regular {
			items = append(items, item{name: e.name, file: len(files)})
			files = append(files, e.name)
		}
	}
	results := g.searchAll(d, rel, files, display)
	d.close()
	for _, it := range items {
		if it.isDir {
			if err := g.walkDir(joinRel(rel, it.name), joinDisplay(display, it.name)); err != nil {
				return err
			}
		} else {
			g.merge(results[it.file])
		}
		if g.cut {
			return nil
		}
	}
	return g.ctx.Err()
}

// fileResult is what searching one file produced, merged in path order.
type fileResult struct {
	lines   []string
	matches int
	longest int         // longest line, when it could grow rg's buffer
	binary  *binaryFile // an implicitly found binary file, finished in order
	cut     bool        // the output bounds were spent: lines is a prefix
}

// binaryFile is the text before the NUL of a binary file found while
// walking; what rg searches of it depends on its buffer size at that point,
// which only the in-order merge knows.
type binaryFile struct {
	text      []byte // a copy of the content before the NUL; nil: read it again
	nul       int
	name      string
	dir, file string // where to read it again
}

// grepMaxBinaryHeld bounds the text of binary files held between their
// search and the in-order merge, which alone knows how much of each rg
// would search. A directory's files are all searched before any is merged,
// and a file's text before its NUL can be 256 MiB: a directory of such
// files held every one. Past the bound a file is read again when merged.
const grepMaxBinaryHeld = 64 << 20

// searchAll searches the named files of one directory with up to GOMAXPROCS
// workers; results are indexed like names.
func (g *grepper) searchAll(d grepDir, rel string, names []string, display string) []fileResult {
	results := make([]fileResult, len(names))
	workers := min(runtime.GOMAXPROCS(0), len(names))
	if workers <= 1 {
		var buf []byte
		for i, n := range names {
			results[i], buf = g.searchOne(d, rel, n, joinDisplay(display, n), false, buf)
		}
		return results
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for {
				i := int(next.Add(1) - 1)
				if i >= len(names) || g.ctx.Err() != nil {
					return
				}
				if g.spent() {
					results[i] = fileResult{cut: true}
					continue
				}
				results[i], buf = g.searchOne(d, rel, names[i], joinDisplay(display, names[i]), false, buf)
			}
		}()
	}
	wg.Wait()
	return results
}

// merge appends one file's output, adding rg's "--" between context groups
// of different files.
func (g *grepper) merge(r fileResult) {
	if g.cut {
		return
	}
	if r.binary != nil {
		r = g.finishBinary(r.binary)
	} else {
		g.rgCap = rgGrow(g.rgCap, r.longest)
	}
	g.cut = r.cut
	if len(r.lines) == 0 {
		return
	}
	if g.mode == "content" && (g.before > 0 || g.after > 0) && g.printed {
		g.out = append(g.out, "--")
	}
	g.out = append(g.out, r.lines...)
	g.matches += r.matches
	g.printed = true
}

// searchFile searches one explicitly named file (filters do not apply).
func (g *grepper) searchFile(rel, name string, explicit bool) {
	d := &genericDir{w: g.w, rel: path.Dir(rel)}
	r, _ := g.searchOne(d, path.Dir(rel), path.Base(rel), name, explicit, nil)
	g.merge(r)
}

// searchOne reads and searches one file; buf is a reusable read buffer.
func (g *grepper) searchOne(d grepDir, dir, file, name string, explicit bool, buf []byte) (fileResult, []byte) {
	data, err := d.read(file, buf, grepMaxFile)
	if err != nil {
		return fileResult{}, buf
	}
	buf = data[:0]
	nul := bytes.IndexByte(data, 0)
	if nul >= 0 {
		if explicit {
			return g.searchExplicitBinary(data, nul, name), buf
		}
		b := &binaryFile{nul: nul, name: name, dir: dir, file: file}
		if g.binHeld.Add(int64(nul)) <= grepMaxBinaryHeld {
			b.text = append([]byte(nil), data[:nul]...)
		} else {
			g.binHeld.Add(-int64(nul)) // read again when merged
		}
		return fileResult{binary: b}, buf
	}
	limit := 1 // files_with_matches: the first match says it
	switch g.mode {
	case "count":
		limit = -1
	case "content":
		limit = int(max(0, g.linesLeft.Load()))
	}
	spans, n, more := g.find(data, limit)
	longest := 0
	if len(data) >= rgBufferSize {
		if g.mode == "files_with_matches" && n > 0 {
			// rg stops reading at the first match.
			longest = longestLine(data[:lineStart(data, spans[0].first)])
		} else {
			longest = longestLine(data)
		}
	}
	if n == 0 {
		return fileResult{longest: longest}, buf
	}
	var r fileResult
	switch g.mode {
	case "files_with_matches":
		r = g.fileLine(name, 1)
	case "count":
		r = g.fileLine(name+":"+strconv.Itoa(n), n)
	default:
		r = g.content(name, data, spans)
		r.cut = r.cut || more
	}
	r.longest = longest
	return r, buf
}

// fileLine is the one line files_with_matches and count print for a file.
func (g *grepper) fileLine(line string, matches int) fileResult {
	if !g.take(len(line) + 1) {
		return fileResult{cut: true}
	}
	return fileResult{lines: []string{line}, matches: matches}
}

// longestLine is the length of the longest line of data (without its "\n").
func longestLine(data []byte) int {
	longest := 0
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return max(longest, len(data))
		}
		longest = max(longest, i)
		data = data[i+1:]
	}
	return longest
}

// rgGrow is ripgrep's buffer size after reading a line of n bytes: it
// doubles while a line fills it.
func rgGrow(capacity, n int) int {
	for n >= capacity {
		capacity *= 2
	}
	return capacity
}

// Binary files (a NUL byte) follow ripgrep 13. Found while walking, a file
// is read until the read that brings the NUL and given up before searching
// that read (see rgTextEnd): content mode prints the matches before it and
// a warning, -l the name, -c nothing. Named explicitly, rg searches the text
// up to the line holding the first NUL and then, if anything else matches,
// prints "binary file matches"; -l and -c count NULs as line ends.

func binaryNotice(name, msg string, nul int) string {
	return name + ": " + msg + " (found \"\\0\" byte around offset " + strconv.Itoa(nul) + ")"
}

// finishBinary searches an implicitly found binary file, in walk order.
func (g *grepper) finishBinary(b *binaryFile) fileResult {
	if b.text != nil {
		g.binHeld.Add(-int64(b.nul))
	} else if b.nul > 0 {
		// Not kept (grepMaxBinaryHeld): read again, and searched as it is
		// now.
		data, err := g.w.wRead(joinRel(b.dir, b.file), grepMaxFile)
		if err != nil {
			return fileResult{}
		}
		if b.nul = bytes.IndexByte(data, 0); b.nul < 0 {
			b.nul = len(data)
		}
		b.text = data[:b.nul]
	}
	end, capacity := rgTextEnd(b.text, b.nul, g.rgCap)
	text := b.text[:end]
	limit := 1
	if g.mode == "content" {
		limit = int(max(0, g.linesLeft.Load()))
	}
	spans, n, more := g.find(text, limit)
	if n == 0 {
		g.rgCap = capacity
		return fileResult{}
	}
	switch g.mode {
	case "files_with_matches":
		// rg stops reading at the first match: only the lines before it
		// could have grown the buffer.
		g.rgCap = rgGrow(g.rgCap, longestLine(text[:lineStart(text, spans[0].first)]))
		return g.fileLine(b.name, 1)
	case "count":
		g.rgCap = capacity
		return fileResult{}
	}
	g.rgCap = capacity
	r := g.content(b.name, text, spans)
	if r.cut || more {
		r.cut = true
		return r
	}
	notice := binaryNotice(b.name, "WARNING: stopped searching binary file after match", b.nul)
	if !g.take(len(notice) + 1) {
		r.cut = true
		return r
	}
	r.lines = append(r.lines, notice)
	return r
}

// searchExplicitBinary follows rg's search of a file named on its command
// line, which it maps whole: a NUL in the first 64 KiB makes the file binary
// from the start (content mode prints only the notice, if anything matches);
// otherwise matches print until one whose line holds a NUL, which prints the
// notice instead. -l and -c read NULs as line ends.
func (g *grepper) searchExplicitBinary(data []byte, nul int, name string) fileResult {
	conv := bytes.ReplaceAll(data, []byte{0}, []byte{'\n'})
	limit := 1
	if g.mode == "count" {
		limit = -1
	}
	_, all, _ := g.find(conv, limit)
	if all == 0 {
		return fileResult{}
	}
	switch g.mode {
	case "files_with_matches":
		return g.fileLine(name, 1)
	case "count":
		return g.fileLine(name+":"+strconv.Itoa(all), all)
	}
	noticeLine := binaryNotice(name, "binary file matches", nul)
	notice := func() fileResult {
		if !g.take(len(noticeLine) + 1) {
			return fileResult{cut: true}
		}
		return fileResult{lines: []string{noticeLine}, matches: 1}
	}
	if nul < min(len(data), rgBufferSize) {
		return notice()
	}
	spans, _, more := g.find(data, int(max(0, g.linesLeft.Load())))
	keep := spans
	stopped := false
	cur := lineCursor{data: data}
	for i, sp := range spans {
		start := cur.seek(sp.first)
		end := len(data)
		if next, ok := cur.startOf(sp.last + 1); ok {
			end = next
		}
		if bytes.IndexByte(data[start:end], 0) >= 0 {
			keep, stopped = spans[:i], true
			break
		}
	}
	var r fileResult
	if len(keep) > 0 {
		r = g.content(name, data, keep)
	}
	switch {
	case r.cut || (more && !stopped):
		r.cut = true
	case stopped:
		n := notice()
		r.lines = append(r.lines, n.lines...)
		r.matches += n.matches
		r.cut = n.cut
	}
	return r
}

// lineCursor finds line starts in data for lines asked in increasing
// order, in one pass over data whatever the number of lines (no table of
// every line's offset).
type lineCursor struct {
	data      []byte
	line, off int // line starts at off
}

// seek returns the offset where line l starts (len(data) past the end).
func (c *lineCursor) seek(l int) int {
	for c.line < l {
		i := bytes.IndexByte(c.data[c.off:], '\n')
		if i < 0 {
			c.off = len(c.data)
			c.line = l
			break
		}
		c.off += i + 1
		c.line++
	}
	return c.off
}

// startOf is where line l starts, and false when data ends before it (as
// lineStartOffsets counted: a final "\n" starts no line). It does not move
// the cursor past line l-1.
func (c *lineCursor) startOf(l int) (int, bool) {
	c.seek(l - 1)
	i := bytes.IndexByte(c.data[c.off:], '\n')
	if c.line != l-1 || i < 0 || c.off+i+1 >= len(c.data) {
		return 0, false
	}
	return c.off + i + 1, true
}

// text is line l without its "\n".
func (c *lineCursor) text(l int) []byte {
	start := c.seek(l)
	rest := c.data[start:]
	if i := bytes.IndexByte(rest, '\n'); i >= 0 {
		return rest[:i]
	}
	return rest
}

// lineStart returns the offset where line n (0-based) of data starts.
func lineStart(data []byte, n int) int {
	off := 0
	for ; n > 0; n-- {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			return len(data)
		}
		off += i + 1
	}
	return off
}

// rgBufferSize is ripgrep's initial read buffer (64 KiB).
const rgBufferSize = 64 << 10

// rgTextEnd returns how much of a file ripgrep searches before it notices
// the NUL at offset nul, and its buffer size afterwards; data needs to hold
// only the bytes before the NUL. rg reads into its buffer (capacity bytes,
// kept from file to file); after each read it searches up to the last
// complete line, keeps the partial line at the front and fills the rest,
// doubling the buffer when a line fills it. Binary detection looks at each
// read's new bytes before that read is searched, so the text ends where the
// buffer holding the NUL begins.
func rgTextEnd(data []byte, nul, capacity int) (end, newCap int) {
	consumed, read := 0, 0
	for {
		free := capacity - (read - consumed)
		if free == 0 {
			capacity *= 2
			continue
		}
		next := read + free
		if nul < next {
			return consumed, capacity
		}
		read = next
		if i := bytes.LastIndexByte(data[consumed:read], '\n'); i >= 0 {
			consumed += i + 1
		}
	}
}

// span is a match covering lines [first, last] (0-based line indexes).
type span struct{ first, last int }

// find returns the matching lines (line mode) or match spans (multiline),
// at most limit of them (limit < 0: none kept, only counted), with n, how
// many there are, and more, whether the search stopped at limit with more
// to come (n then counts what was kept). A file is searched only as far as
// its output can go: one match for files_with_matches, what is left of the
// output bounds for content; count counts without keeping spans.
func (g *grepper) find(data []byte, limit int) (spans []span, n int, more bool) {
	if g.literal != nil && !bytes.Contains(data, g.literal) {
		return nil, 0, false
	}
	// add records one span (merged spans were extended in place); false
	// when limit is reached.
	var last span
	have := false
	add := func(sp span) bool {
		if limit >= 0 && n == limit {
			more = true
			return false
		}
		n++
		if limit >= 0 {
			spans = append(spans, sp)
		}
		last, have = sp, true
		return true
	}
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
			lastLine := first + bytes.Count(data[m[0]:max(end, m[0])], []byte{'\n'})
			line, pos = first, m[0]
			if have && last.last >= first {
				if lastLine > last.last {
					last.last = lastLine
					if len(spans) > 0 {
						spans[len(spans)-1].last = lastLine
					}
				}
				continue
			}
			if !add(span{first, lastLine}) {
				break
			}
		}
		return spans, n, more
	}
	// Line mode: search the whole buffer (fast), line by line only when a
	// match would cross a newline (e.g. \s matching "\n").
	pos, line := 0, 0
	for pos <= len(data) {
		var m0, m1 int
		if g.literal != nil {
			i := bytes.Index(data[pos:], g.literal)
			if i < 0 {
				break
			}
			m0, m1 = pos+i, pos+i+len(g.literal)
		} else {
			m := g.re.FindIndex(data[pos:])
			if m == nil {
				break
			}
			m0, m1 = m[0]+pos, m[1]+pos
		}
		if bytes.IndexByte(data[m0:m1], '\n') >= 0 {
			return g.findLines(data, limit)
		}
		if m0 == len(data) && len(data) > 0 && data[len(data)-1] == '\n' {
			break
		}
		line += bytes.Count(data[pos:m0], []byte{'\n'})
		if !add(span{line, line}) {
			break
		}
		nl := bytes.IndexByte(data[m0:], '\n')
		if nl < 0 {
			break
		}
		pos = m0 + nl + 1
		line++
	}
	return spans, n, more
}

// findLines matches each line on its own (the slow, exact path), with
// find's limit.
func (g *grepper) findLines(data []byte, limit int) (spans []span, n int, more bool) {
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
			if limit >= 0 && n == limit {
				return spans, n, true
			}
			n++
			if limit >= 0 {
				spans = append(spans, span{line, line})
			}
		}
		if end < 0 {
			break
		}
		start += end + 1
	}
	return spans, n, false
}

// content renders matching lines with context, as rg does: "name:n:text"
// for matches, "name-n-text" for context, "--" between groups that are not
// adjacent (the caller adds the one between files). Each line is taken from
// the output bounds; when they are spent the result is cut there.
func (g *grepper) content(name string, data []byte, spans []span) fileResult {
	if len(data) > 0 && data[len(data)-1] == '\n' {
		data = data[:len(data)-1]
	}
	nLines := bytes.Count(data, []byte{'\n'}) + 1
	cur := lineCursor{data: data}
	var out []string
	lastPrinted := -2
	j := 0 // the first span that does not end before the line printed
	for _, s := range spans {
		from := max(0, s.first-g.before)
		to := min(nLines-1, s.last+g.after)
		if from <= lastPrinted {
			from = lastPrinted + 1
		}
		if from > to {
			continue
		}
		if (g.before > 0 || g.after > 0) && lastPrinted >= 0 && from != lastPrinted+1 {
			if !g.take(3) {
				return fileResult{lines: out, matches: len(spans), cut: true}
			}
			out = append(out, "--")
		}
		for l := from; l <= to; l++ {
			for j < len(spans) && spans[j].last < l {
				j++
			}
			sep := "-"
			if j < len(spans) && spans[j].first <= l {
				sep = ":"
			}
			text := cur.text(l)
			var b strings.Builder
			b.Grow(len(name) + len(text) + 8)
			b.WriteString(name)
			if g.opts.LineNumbers {
				b.WriteString(sep)
				b.WriteString(strconv.Itoa(l + 1))
			}
			b.WriteString(sep)
			if !g.take(b.Len() + len(text) + 1) {
				return fileResult{lines: out, matches: len(spans), cut: true}
			}
			b.Write(text)
			out = append(out, b.String())
		}
		lastPrinted = to
	}
	return fileResult{lines: out, matches: len(spans)}
}

// grepDir is one directory open for grep: its entries, typed from the
// listing itself (no stat per entry), and reads of its files by name.
type grepDir interface {
	entries() []grepEntry
	read(name string, buf []byte, max int64) ([]byte, error)
	close()
}

type grepEntry struct {
	name                  string
	dir, regular, symlink bool
}

// typeMode is the entry's type as fs.FileMode bits; anything that is not a
// directory, regular file or symlink (FIFO, socket, device) is irregular.
func (e grepEntry) typeMode() fs.FileMode {
	switch {
	case e.dir:
		return fs.ModeDir
	case e.symlink:
		return fs.ModeSymlink
	case e.regular:
		return 0
	}
	return fs.ModeIrregular
}

// openGrepDir opens rel with the implementation's fast path when it has one
// (the directory workspace reads files relative to the open directory).
func openGrepDir(w walker, rel string) (grepDir, error) {
	if o, ok := w.(interface {
		openGrepDir(rel string) (grepDir, error)
	}); ok {
		return o.openGrepDir(rel)
	}
	infos, err := w.wList(rel)
	if err != nil {
		return nil, err
	}
	d := &genericDir{w: w, rel: rel}
	for _, i := range infos {
		d.ents = append(d.ents, grepEntry{name: i.Name, dir: i.IsDir(), regular: i.Mode.IsRegular(), symlink: i.Mode&fs.ModeSymlink != 0})
	}
	return d, nil
}

// genericDir is grepDir over the walker methods.
type genericDir struct {
	w    walker
	rel  string
	ents []grepEntry
}

func (d *genericDir) entries() []grepEntry { return d.ents }
func (d *genericDir) close()               {}
func (d *genericDir) read(name string, _ []byte, max int64) ([]byte, error) {
	return d.w.wRead(joinRel(d.rel, name), max)
}
func (g *grepper) result() GrepResult {
	if len(g.out) == 0 && !g.cut {
		return GrepResult{}
	}
	text := strings.TrimSpace(strings.Join(g.out, "\n"))
	if n := g.opts.HeadLimit; n > 0 {
		lines := strings.Split(text, "\n")
		if len(lines) > n {
			more := strconv.Itoa(len(lines)-n) + " more hidden"
			if g.cut {
				more = "at least " + more + "; " + grepCutReason
			}
			return GrepResult{Output: strings.Join(lines[:n], "\n") + "\n[output truncated to first " + strconv.Itoa(n) +
				" lines; " + more + "]", Matches: g.matches}
		}
	}
	if g.cut {
		text = strings.TrimPrefix(text+"\n"+grepCutNote, "\n")
	}
	return GrepResult{Output: text, Matches: g.matches}
}

// grepCutReason and grepCutNote end an output cut at grepMaxLines or
// grepMaxOutput.
const (
	grepCutReason = "the search stopped at grep's output bound of 1,048,576 lines or 33,554,432 bytes"
	grepCutNote   = "[output cut: " + grepCutReason + "; narrow it with path, glob, type or a more specific pattern, or use headLimit]"
)

// joinDisplay joins like Rust's Path::join, which rg uses to print paths,
// a name found by the walk as ShownName prints it: rg prints a name's bytes
// raw, so a file named "a\nb.go:1:x" would forge a line of the output.
func joinDisplay(dir, name string) string {
	name = ShownName(name)
	switch {
	case dir == "":
		return name
	case strings.HasSuffix(dir, "/"):
		return dir + name
	}
	return dir + "/" + name
}

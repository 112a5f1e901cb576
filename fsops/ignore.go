package fsops

import (
	"strings"
)

// ignoreRule is one line of a .gitignore/.ignore file, or one --glob.
type ignoreRule struct {
	segs    []string // pattern segments; basename patterns start with "**"
	neg     bool     // "!pattern": whitelist
	dirOnly bool     // "pattern/": directories only
}

// ignoreFile is the parsed rules of one ignore file; paths are matched
// relative to dir (the directory holding the file, relative to the root).
type ignoreFile struct {
	dir   string
	rules []ignoreRule
}

// parseIgnore parses gitignore syntax: blank lines and "#" comments skipped,
// "\#" and "\!" escape, unescaped trailing spaces trimmed, "!" negates, a
// trailing "/" restricts to directories, a pattern with a "/" before its end
// is anchored to dir (a leading "/" just anchors), any other pattern matches
// a name at any depth.
func parseIgnore(dir, text string) *ignoreFile {
	f := &ignoreFile{dir: dir}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if r, ok := parseIgnoreLine(line); ok {
			f.rules = append(f.rules, r)
		}
	}
	return f
}

func parseIgnoreLine(line string) (ignoreRule, bool) {
	// Trailing spaces are dropped unless escaped with a backslash.
	for strings.HasSuffix(line, " ") && !strings.HasSuffix(line, `\ `) {
		line = line[:len(line)-1]
	}
	if line == "" || strings.HasPrefix(line, "#") {
		return ignoreRule{}, false
	}
	var r ignoreRule
	switch {
	case strings.HasPrefix(line, "!"):
		r.neg = true
		line = line[1:]
	case strings.HasPrefix(line, `\!`), strings.HasPrefix(line, `\#`):
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		r.dirOnly = true
		line = strings.TrimRight(line, "/")
	}
	if line == "" {
		return ignoreRule{}, false
	}
	anchored := strings.Contains(line, "/")
	line = strings.TrimPrefix(line, "/")
	segs := strings.Split(line, "/")
	if !anchored {
		segs = append([]string{"**"}, segs...)
	}
	r.segs = segs
	return r, true
}

// match reports whether rel (relative to the file's dir) is ignored or
// whitelisted by this file: the last matching rule decides.
func (f *ignoreFile) match(rel string, isDir bool) (matched, whitelist bool) {
	segs := strings.Split(rel, "/")
	for i := len(f.rules) - 1; i >= 0; i-- {
		r := f.rules[i]
		if r.dirOnly && !isDir {
			continue
		}
		if matchSegments(r.segs, segs) {
			return true, r.neg
		}
	}
	return false, false
}

// relUnder returns p relative to dir (both relative to the workspace root),
// or false when p is not below dir.
func relUnder(dir, p string) (string, bool) {
	if dir == "." || dir == "" {
		return p, true
	}
	if strings.HasPrefix(p, dir+"/") {
		return p[len(dir)+1:], true
	}
	return "", false
}

// rgTypes are ripgrep's file types (from `rg --type-list` of ripgrep 13, the
// Debian 12 version, plus the extensions ripgrep 14 added to js, ts and py):
// name → globs matched against the file name.
var rgTypes = map[string][]string{
	"asm":          {"*.S", "*.asm", "*.s"},
	"c":            {"*.[chH]", "*.[chH].in", "*.cats"},
	"clojure":      {"*.clj", "*.cljc", "*.cljs", "*.cljx"},
	"cmake":        {"*.cmake", "CMakeLists.txt"},
	"coffeescript": {"*.coffee"},
	"config":       {"*.cfg", "*.conf", "*.config", "*.ini"},
	"cpp":          {"*.[ChH]", "*.[ChH].in", "*.[ch]pp", "*.[ch]pp.in", "*.[ch]xx", "*.[ch]xx.in", "*.cc", "*.cc.in", "*.hh", "*.hh.in", "*.inl"},
	"cs":           {"*.cs"},
	"csharp":       {"*.cs"},
	"css":          {"*.css", "*.scss"},
	"csv":          {"*.csv"},
	"d":            {"*.d"},
	"dart":         {"*.dart"},
	"docker":       {"*Dockerfile*"},
	"elixir":       {"*.eex", "*.ex", "*.exs"},
	"elm":          {"*.elm"},
	"erlang":       {"*.erl", "*.hrl"},
	"fish":         {"*.fish"},
	"fortran":      {"*.F", "*.F77", "*.F90", "*.F95", "*.f", "*.f77", "*.f90", "*.f95", "*.pfo"},
	"fsharp":       {"*.fs", "*.fsi", "*.fsx"},
	"go":           {"*.go"},
	"gradle":       {"*.gradle"},
	"groovy":       {"*.gradle", "*.groovy"},
	"h":            {"*.h", "*.hpp"},
	"haskell":      {"*.c2hs", "*.cpphs", "*.hs", "*.hsc", "*.lhs"},
	"hs":           {"*.hs", "*.lhs"},
	"html":         {"*.ejs", "*.htm", "*.html"},
	"java":         {"*.java", "*.jsp", "*.jspx", "*.properties"},
	"js":           {"*.cjs", "*.js", "*.jsx", "*.mjs", "*.vue"},
	"json":         {"*.json", "composer.lock"},
	"jsonl":        {"*.jsonl"},
	"julia":        {"*.jl"},
	"kotlin":       {"*.kt", "*.kts"},
	"less":         {"*.less"},
	"lisp":         {"*.el", "*.jl", "*.lisp", "*.lsp", "*.sc", "*.scm"},
	"log":          {"*.log"},
	"lua":          {"*.lua"},
	"make":         {"*.mak", "*.mk", "[Gg][Nn][Uu]makefile", "[Gg][Nn][Uu]makefile.am", "[Gg][Nn][Uu]makefile.in", "[Mm]akefile", "[Mm]akefile.am", "[Mm]akefile.in"},
	"markdown":     {"*.markdown", "*.md", "*.mdown", "*.mkdn"},
	"matlab":       {"*.m"},
	"md":           {"*.markdown", "*.md", "*.mdown", "*.mkdn"},
	"mk":           {"mkfile"},
	"nim":          {"*.nim", "*.nimble", "*.nimf", "*.nims"},
	"nix":          {"*.nix"},
	"objc":         {"*.h", "*.m"},
	"objcpp":       {"*.h", "*.mm"},
	"ocaml":        {"*.ml", "*.mli", "*.mll", "*.mly"},
	"pascal":       {"*.dpr", "*.inc", "*.lpr", "*.pas", "*.pp"},
	"perl":         {"*.PL", "*.perl", "*.pl", "*.plh", "*.plx", "*.pm", "*.t"},
	"php":          {"*.php", "*.php3", "*.php4", "*.php5", "*.phtml"},
	"protobuf":     {"*.proto"},
	"ps":           {"*.cdxml", "*.ps1", "*.ps1xml", "*.psd1", "*.psm1"},
	"purs":         {"*.purs"},
	"py":           {"*.py", "*.pyi"},
	"r":            {"*.R", "*.Rmd", "*.Rnw", "*.r"},
	"racket":       {"*.rkt"},
	"rst":          {"*.rst"},
	"ruby":         {"*.gemspec", "*.rb", "*.rbw", ".irbrc", "Gemfile", "Rakefile", "config.ru"},
	"rust":         {"*.rs"},
	"sass":         {"*.sass", "*.scss"},
	"scala":        {"*.sbt", "*.scala"},
	"sh": {"*.bash", "*.bashrc", "*.csh", "*.cshrc", "*.ksh", "*.kshrc", "*.sh", "*.tcsh", "*.zsh",
		".bash_login", ".bash_logout", ".bash_profile", ".bashrc", ".cshrc", ".kshrc", ".login", ".logout",
		".profile", ".tcshrc", ".zlogin", ".zlogout", ".zprofile", ".zshenv", ".zshrc", "bash_login",
		"bash_logout", "bash_profile", "bashrc", "profile", "zlogin", "zlogout", "zprofile", "zshenv", "zshrc"},
	"sml":   {"*.sig", "*.sml"},
	"sql":   {"*.psql", "*.sql"},
	"svg":   {"*.svg"},
	"swift": {"*.swift"},
	"tex":   {"*.bib", "*.cls", "*.dtx", "*.ins", "*.ltx", "*.sty", "*.tex"},
	"tf":    {"*.tf"},
	"toml":  {"*.toml", "Cargo.lock"},
	"ts":    {"*.cts", "*.mts", "*.ts", "*.tsx"},
	"txt":   {"*.txt"},
	"vb":    {"*.vb"},
	"vim":   {"*.vim"},
	"xml":   {"*.dtd", "*.rng", "*.sch", "*.xhtml", "*.xjb", "*.xml", "*.xml.dist", "*.xsd", "*.xsl", "*.xslt"},
	"yaml":  {"*.yaml", "*.yml"},
	"zig":   {"*.zig"},
	"zsh":   {"*.zsh", ".zlogin", ".zlogout", ".zprofile", ".zshenv", ".zshrc", "zlogin", "zlogout", "zprofile", "zshenv", "zshrc"},
}

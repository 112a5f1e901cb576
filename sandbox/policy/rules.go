package policy

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

var (
	downloaders = set("curl", "wget", "fetch", "aria2c", "http", "https", "xh", "lwp-download",
		"lwp-request", "GET", "axel")
	shells = set("sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "yash",
		"posh", "rbash")
	langInterpreters = set("python", "python2", "python3", "perl", "ruby", "node", "nodejs", "php",
		"lua", "deno", "bun", "tclsh", "Rscript", "pwsh", "osascript", "R", "expect", "wish", "julia",
		"irb", "ipython", "ipython3", "jshell", "ghci", "guile", "racket", "sbcl", "ocaml", "erl",
		"iex", "scala", "groovysh", "jjs", "luajit", "php8", "perl5", "pypy", "pypy3")
	// codeVars are environment variables whose value programs run as a
	// shell command; a static value is judged like the command it is.
	codeVars = set("GIT_SSH_COMMAND", "GIT_EDITOR", "GIT_PAGER", "GIT_ASKPASS", "GIT_EXTERNAL_DIFF",
		"GIT_SEQUENCE_EDITOR", "EDITOR", "VISUAL", "PAGER", "MANPAGER", "LESSOPEN", "LESSCLOSE",
		"BROWSER", "SSH_ASKPASS", "SUDO_ASKPASS", "PROMPT_COMMAND", "RSYNC_RSH", "FCEDIT",
		"GIT_PROXY_COMMAND", "GIT_SSH", "SYSTEMD_PAGER", "SYSTEMD_EDITOR", "SUDO_EDITOR", "SVN_EDITOR",
		"HGEDITOR", "CVS_RSH", "RSYNC_CONNECT_PROG")
	// codeValueOptions are options of some program whose value is code
	// (judged where the program is known; under xargs the value would come
	// from the input).
	codeValueOptions = map[string]map[string]bool{
		"env":    set("-S", "--split-string"),
		"git":    set("-c", "--config-env"),
		"flock":  set("-c", "--command"),
		"script": set("-c", "--command"),
		"tar":    set("--to-command", "-I", "--use-compress-program"),
		"rsync":  set("-e", "--rsh"),
		"zip":    set("-TT"),
		"make":   set("--eval", "-E", "-f"),
		"sed":    set("-e", "--expression", "-f"),
		"expect": set("-c"),
		"vim":    set("-c", "--cmd"),
	}
	// readOnlyVerbs of ip/tc/systemctl-like tools: anything else changes state.
	readOnlyVerbs = set("", "show", "sh", "s", "list", "ls", "lst", "l", "get", "help", "status",
		"monitor", "cat", "is-active", "is-enabled", "is-failed", "list-units", "list-unit-files",
		"list-timers", "list-sockets", "list-dependencies", "show-environment", "--version", "-h", "--help")
	// rmDanger are rm -r targets that wipe the root, a home or a parent
	// (".*" matches ".." in older bash). `*` and `.` are judged by where
	// they resolve: the workspace root is refused, a subdirectory is not.
	rmDanger = set("/", "/*", "~", "~/", "~/*", "..", "../", "../*", ".*",
		"$HOME", "$HOME/", "$HOME/*")
	// safeDevices are /dev files a command may write.
	safeDevices = set("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
		"/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty")
	// systemPrefixes may not be written (they are read-only or absent under
	// bwrap anyway; this is for software mode and for a clear message).
	systemPrefixes = []string{"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
		"/libx32", "/boot", "/sys", "/proc", "/root", "/var/lib", "/var/spool", "/var/log",
		"/var/cache", "/dev", "/run", "/opt", "/snap", "/home"}
)

// systemPath reports whether writing absolute p touches the system.
func systemPath(p string) bool {
	if safeDevices[p] || strings.HasPrefix(p, "/dev/fd/") || strings.HasPrefix(p, "/dev/shm/") ||
		strings.HasPrefix(p, "/dev/pts/") || strings.HasPrefix(p, "/proc/self/fd/") {
		return false
	}
	if p == "/" || path.Dir(p) == "/" {
		return true
	}
	for _, s := range systemPrefixes {
		if Within(s, p) {
			return true
		}
	}
	return false
}

// args is a simple command's words with their static values.
type args struct {
	words []*syntax.Word
	vals  []string
	ok    []bool
}

func newArgs(words []*syntax.Word) args {
	a := args{words: words, vals: make([]string, len(words)), ok: make([]bool, len(words))}
	for i, w := range words {
		a.vals[i], a.ok[i] = litWord(w)
	}
	return a
}

// operands returns the indexes of non-option arguments (after the program),
// treating every word after "--" as an operand. valued lists options that
// take the next word as their value.
func (a args) operands(valued map[string]bool) []int {
	var out []int
	dashdash := false
	for i := 1; i < len(a.vals); i++ {
		v := a.vals[i]
		if !dashdash && a.ok[i] {
			if v == "--" {
				dashdash = true
				continue
			}
			if strings.HasPrefix(v, "-") && v != "-" {
				if valued[v] {
					i++
				}
				continue
			}
		}
		out = append(out, i)
	}
	return out
}

func (a args) has(flags ...string) bool {
	for i := 1; i < len(a.vals); i++ {
		if !a.ok[i] {
			continue
		}
		if a.vals[i] == "--" {
			return false
		}
		for _, f := range flags {
			if a.vals[i] == f || (strings.HasPrefix(f, "--") && strings.HasPrefix(a.vals[i], f+"=")) {
				return true
			}
		}
	}
	return false
}

// hasShort reports a short flag letter in any -abc cluster.
func (a args) hasShort(letter byte) bool {
	for i := 1; i < len(a.vals); i++ {
		v := a.vals[i]
		if !a.ok[i] || v == "--" {
			return false
		}
		if len(v) > 1 && v[0] == '-' && v[1] != '-' && strings.IndexByte(v[1:], letter) >= 0 {
			return true
		}
	}
	return false
}

// simple judges one simple command given as words (after wrappers are
// peeled off, the inner command comes back here): the checks every
// command gets, then its program's rule (programs.go) and the files it
// writes.
func (c *checker) simple(words []*syntax.Word, x surroundings, sio *stmtIO) error {
	if len(words) == 0 {
		return nil
	}
	// Brace expansion comes first in bash: judge the words it makes.
	if exp, changed, ok := braceExpand(words); !ok {
		return c.unsafe(RuleUnjudgeable, "brace expansions make more than %d words", maxBraceWords)
	} else if changed {
		return c.simple(exp, x, sio)
	}
	a := newArgs(words)
	info := wordValue(words[0])
	if !info.ok {
		return c.unsafe(RuleUnjudgeable, "the program name %s comes from an expansion", wordSource(words[0]))
	}
	if info.glob {
		return c.unsafe(RuleUnjudgeable, "the program name %s is a glob or brace pattern", wordSource(words[0]))
	}
	if c.allowed(a) {
		return nil
	}
	name := info.val
	base := path.Base(name)
	if _, isAlias := c.aliases[name]; isAlias && !x.external && !c.inAlias[name] {
		if err := c.aliasCall(words, x, sio); err != nil {
			return err
		}
	}
	if strings.Contains(name, "/") {
		if err := c.execPath(name); err != nil {
			return err
		}
		// A link to a program outside the workspace runs that program
		// (ln -s /usr/bin/sudo x; ./x id runs sudo): judge it as the
		// program it is.
		if real, err := c.execTarget(name); err != nil {
			return err
		} else if real != "" {
			w := &syntax.Word{Parts: []syntax.WordPart{&syntax.SglQuoted{Value: real}}}
			return c.simple(append([]*syntax.Word{w}, words[1:]...), x, sio)
		}
	}
	if x.inFunc != "" && name == x.inFunc && x.bg {
		return c.danger(RuleForkBomb, "function %s starts copies of itself in the background or a pipeline", name)
	}
	if c.funcs[name] && !strings.Contains(name, "/") && !x.external {
		// The body was judged where it was defined. A name the table has a
		// rule for is judged as that program too: the function may not be
		// defined where it is called (defined in a subshell, a pipeline or
		// a branch not taken, removed by unset -f), and bash then runs the
		// program.
		if _, has := ruleFor(base); !has {
			return c.pathArgs(a)
		}
	}
	if err := c.pathArgs(a); err != nil {
		return err
	}
	r, ok := ruleFor(base)
	if !ok {
		return nil
	}
	k := call{args: a, x: x, sio: sio, base: base}
	if r.judge != nil {
		if err := r.judge(c, k); err != nil || r.final {
			return err
		}
	}
	if r.writes == nil {
		return nil
	}
	return r.writes(c, k)
}

// remoteSpec reports an rsync/scp-style host:path operand.
func remoteSpec(v string) bool {
	i := strings.IndexByte(v, ':')
	if i <= 0 || strings.Contains(v[:i], "/") {
		return false
	}
	return true
}

func (c *checker) anyDownloadSubst(ws []*syntax.Word) bool {
	for _, w := range ws {
		if c.wordHasDownloadSubst(w) {
			return true
		}
	}
	return false
}

// allowed reports whether an allow pattern exempts this simple command.
func (c *checker) allowed(a args) bool {
	if len(c.p.allow) == 0 {
		return false
	}
	parts := make([]string, len(a.words))
	for i, w := range a.words {
		if a.ok[i] {
			parts[i] = a.vals[i]
		} else {
			parts[i] = wordSource(w)
		}
	}
	line := strings.Join(parts, " ")
	for _, re := range c.p.allow {
		if re.MatchString(line) {
			return true
		}
	}
	return false
}

// execPath judges running a program by path: a file fetched by this same
// command must not be run.
func (c *checker) execPath(name string) error {
	for _, d := range c.st.cwds {
		if p := c.abs(name, d); p != "" && c.downloads[p] {
			return c.danger(RuleDownloadExec, "%s was downloaded by this command and is then run", name)
		}
	}
	return nil
}

// execTarget is the program that running the path name runs when that
// is another program: name, a path in the workspace, leads through a link
// (one this command makes, or a symlink on disk) to a file outside the
// workspace whose base name differs. "" when it does not.
func (c *checker) execTarget(name string) (string, error) {
	for _, d := range c.st.cwds {
		abs := c.abs(name, d)
		if abs == "" || !c.inside(abs) {
			continue // a system path runs what it names there (/bin/sh)
		}
		// The links this command makes (any component), then a symlink on
		// disk at the path itself; system links past them are not
		// followed, so that /usr/sbin/reboot stays reboot whatever it
		// links to on this host.
		real := abs
		for hop := 0; hop < maxLinkHops; hop++ {
			if err := c.spend(1); err != nil {
				return "", err
			}
			next := ""
			for q := real; ; q = path.Dir(q) {
				if t, isLink := c.links[q]; isLink {
					if t == "" {
						return "", c.unsafe(RuleUnjudgeable, "%s leads through a link whose target is computed at run time", name)
					}
					next = path.Join(t, below(q, real))
					break
				}
				if q == "/" || q == "." {
					break
				}
			}
			if next == "" && c.inside(real) {
				e, err := c.lstat(real)
				if err != nil {
					return "", err
				}
				if e.link {
					next = c.abs(e.target, path.Dir(real))
				}
			}
			if next == "" || next == real {
				break
			}
			real = next
		}
		if real != abs && !c.inside(real) && path.Base(real) != path.Base(abs) {
			return real, nil
		}
	}
	return "", nil
}

// shell judges sh/bash/...: `-c <code>` is judged as a script; a script
// file runs like any program; reading commands from stdin is judged only
// for a static heredoc or here-string, and refused when fed by a pipe or a
// file.
func (c *checker) shell(a args, x surroundings, sio *stmtIO) error {
	cmode, stdin := false, false
	i := 1
	for ; i < len(a.words); i++ {
		if !a.ok[i] {
			if a.words[i] != nil && c.wordHasDownloadSubst(a.words[i]) {
				return c.danger(RuleDownloadExec, "a shell runs downloaded code")
			}
			break
		}
		v := a.vals[i]
		if v == "--" || v == "-" {
			i++
			break
		}
		if len(v) < 2 || (v[0] != '-' && v[0] != '+') {
			break
		}
		if strings.HasPrefix(v, "--") {
			if v == "--rcfile" || v == "--init-file" {
				i++
			}
			continue
		}
		for _, f := range v[1:] {
			switch f {
			case 'c':
				cmode = true
			case 's':
				stdin = true
			case 'o', 'O':
				i++
			}
		}
	}
	if cmode {
		if i >= len(a.words) {
			if x.moreArgs {
				return c.unsafe(RuleUnjudgeable, "%s -c runs code pasted from its input by xargs", a.vals[0])
			}
			return nil
		}
		code, ok := litWord(a.words[i])
		if !ok {
			if c.wordHasDownloadSubst(a.words[i]) {
				return c.danger(RuleDownloadExec, "a shell runs downloaded code")
			}
			return c.unsafe(RuleUnjudgeable, "%s -c runs code computed at run time (%s)", a.vals[0], wordSource(a.words[i]))
		}
		return c.nestedIn(code, inheritedStdin(x, sio))
	}
	if !stdin && i < len(a.words) {
		if !a.ok[i] {
			if c.wordHasDownloadSubst(a.words[i]) {
				return c.danger(RuleDownloadExec, "a shell runs downloaded code")
			}
			if hasProcSubst(a.words[i]) {
				return c.unsafe(RuleUnjudgeable, "a shell reads its script from a process substitution")
			}
			return c.stdinPathWord(a.vals[0], a.words[i], x, sio)
		}
		if fd, isFd := fdPath(a.vals[i]); isFd {
			if fd != "0" {
				return c.unsafe(RuleUnjudgeable, "%s reads its script from file descriptor %s", a.vals[0], fd)
			}
			return c.stdinCode(a.vals[0], x, sio)
		}
		return c.execScript(a.vals[i])
	}
	return c.stdinCode(a.vals[0], x, sio)
}

// stdinCode judges a shell that reads its commands from stdin.
func (c *checker) stdinCode(prog string, x surroundings, sio *stmtIO) error {
	return c.stdinProgram(prog, x, sio, true)
}

// stdinProgram judges a program that reads the code it runs from stdin: a
// shell (shell true), whose code from a static heredoc or here-string is
// judged as a script, or another interpreter, whose code is another
// language and is not judged. Code piped in from a download is
// pipe-to-shell; code piped or redirected into a shell cannot be judged;
// in software mode (escape checks on), where nothing else confines it, no
// program may read its code from a pipe, a file redirection or the
// command's own stdin (an SSH client's input).
func (c *checker) stdinProgram(prog string, x surroundings, sio *stmtIO, shell bool) error {
	in := inheritedStdin(x, sio)
	if c.execStdin && !in.pipedIn && !in.stdinFile && in.stdinHdoc == nil {
		in.stdinFile = true // `exec < file` earlier replaced the script's stdin
	}
	switch {
	case in.stdinHdoc != nil:
		if !shell {
			if _, static := hdocText(in.stdinHdoc); static || !c.p.escapes {
				return nil // a literal program, like -c
			}
			return c.unsafe(RuleUnjudgeable, "%s reads a program built at run time from a heredoc, which cannot be judged in software mode; "+
				"pass the program as a file or with -c (bwrap and landlock isolation allow it)", prog)
		}
		if c.hdocs[in.stdinHdoc] {
			return nil // the rest of a heredoc already judged as a script
		}
		body, ok := hdocText(in.stdinHdoc)
		if !ok {
			return c.unsafe(RuleUnjudgeable, "a heredoc with expansions is fed to %s", prog)
		}
		if c.hdocs == nil {
			c.hdocs = map[*syntax.Word]bool{}
		}
		c.hdocs[in.stdinHdoc] = true
		return c.nestedIn(body, surroundings{stdinHdoc: in.stdinHdoc})
	case in.pipedIn && in.pipeDownload:
		return c.danger(RulePipeToShell, "downloaded content is piped into %s; download to a file, inspect it, then run it", prog)
	case in.pipedIn && shell:
		return c.unsafe(RuleUnjudgeable, "commands piped into %s cannot be judged", prog)
	case in.stdinFile && shell:
		return c.unsafe(RuleUnjudgeable, "commands redirected into %s cannot be judged", prog)
	case c.p.escapes:
		from := "stdin"
		switch {
		case in.pipedIn:
			from = "a pipe"
		case in.stdinFile:
			from = "a redirected file"
		}
		return c.unsafe(RuleUnjudgeable, "%s reads the program it runs from %s, which cannot be judged in software mode; "+
			"pass the program as a file or with -c (bwrap and landlock isolation allow it)", prog, from)
	}
	return nil
}

// hdocText is a heredoc's or here-string's static text.
func hdocText(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(unescapeDouble(l.Value))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

func hasProcSubst(w *syntax.Word) bool {
	found := false
	syntax.Walk(w, func(n syntax.Node) bool {
		if _, ok := n.(*syntax.ProcSubst); ok {
			found = true
		}
		return !found
	})
	return found
}

// nested judges code that a command will run as a shell script.
// Its stdin counts as unknown data (see unknownStdin).
func (c *checker) nested(code string) error { return c.nestedIn(code, unknownStdin) }

// nestedIn judges code run as a shell script whose stdin is in's.
func (c *checker) nestedIn(code string, in surroundings) error {
	saved := c.st.clone()
	err := c.script(code, c.depth+1, in)
	c.st = saved
	return err
}

// execScript refuses running a file downloaded earlier in the command.
func (c *checker) execScript(file string) error {
	for _, d := range c.st.cwds {
		if p := c.abs(file, d); p != "" && c.downloads[p] {
			return c.danger(RuleDownloadExec, "%s was downloaded by this command and is then run", file)
		}
	}
	return nil
}

// interpSpec says how an interpreter takes its program: codeLetters are
// short options whose value is the program (python -c, perl -e), codeLong
// the long ones; replLetters make it read stdin even with a script
// (python -i); valued are options that take the next word as a value.
type interpSpec struct {
	codeLetters, replLetters string
	codeLong                 map[string]bool
}

var interpSpecs = map[string]interpSpec{
	"python":    {codeLetters: "cm", replLetters: "i"},
	"perl":      {codeLetters: "eE"},
	"ruby":      {codeLetters: "e"},
	"node":      {codeLetters: "ep", replLetters: "i", codeLong: set("--eval", "--print", "--interactive")},
	"php":       {codeLetters: "rRBEF", replLetters: "a"},
	"lua":       {codeLetters: "e", replLetters: "i"},
	"Rscript":   {codeLetters: "e"},
	"R":         {codeLetters: "ef", codeLong: set("--file")},
	"expect":    {codeLetters: "cf", replLetters: "i"},
	"pwsh":      {codeLetters: "cf", codeLong: set("-Command", "-command", "-File", "-file", "-EncodedCommand", "-e")},
	"deno":      {},
	"bun":       {codeLetters: "e", codeLong: set("--eval", "--print")},
	"osascript": {codeLetters: "e"},
	"julia":     {codeLetters: "eE", replLetters: "i", codeLong: set("--eval", "--print")},
}

// interpreter judges python/perl/node/...: their code is another language
// and is not judged, but feeding them downloaded code is
// download-and-execute, and reading the program from stdin is judged by
// stdinProgram.
func (c *checker) interpreter(a args, x surroundings, sio *stmtIO, base string) error {
	if c.anyDownloadSubst(a.words[1:]) {
		return c.danger(RuleDownloadExec, "%s runs downloaded code", base)
	}
	key := unversioned(base)
	switch {
	case strings.HasPrefix(base, "python"), strings.HasPrefix(base, "pypy"):
		key = "python"
	case base == "nodejs":
		key = "node"
	}
	spec := interpSpecs[key]
	if key == "expect" || key == "tclsh" || key == "wish" {
		for i := 1; i+1 < len(a.vals); i++ {
			if a.ok[i] && a.vals[i] == "-c" {
				if !a.ok[i+1] {
					return c.unsafe(RuleUnjudgeable, "%s -c runs code computed at run time", base)
				}
				if err := c.tclCode(a.vals[i+1], base); err != nil {
					return err
				}
			}
		}
	}
	code, repl, moreCode := false, false, false
	for i := 1; i < len(a.vals); i++ {
		if !a.ok[i] {
			break
		}
		v := a.vals[i]
		if v == "--" || v == "-" || !strings.HasPrefix(v, "-") || len(v) < 2 {
			break
		}
		if spec.codeLong[v] || strings.HasPrefix(v, "--") && spec.codeLong[strings.SplitN(v, "=", 2)[0]] {
			code = true
			if !strings.Contains(v, "=") && i+1 >= len(a.vals) {
				moreCode = true
			}
			break
		}
		if v[1] == '-' {
			continue
		}
		if j := strings.IndexAny(v[1:], spec.codeLetters); spec.codeLetters != "" && j >= 0 {
			code = true
			if j == len(v)-2 && i+1 >= len(a.vals) {
				moreCode = true // the program is the next word, and there is none
			}
			if strings.ContainsAny(v[1:j+1], spec.replLetters) && spec.replLetters != "" {
				repl = true
			}
			break
		}
		if spec.replLetters != "" && strings.ContainsAny(v[1:], spec.replLetters) {
			repl = true
		}
	}
	if moreCode && x.moreArgs {
		return c.unsafe(RuleUnjudgeable, "%s runs a program pasted from its input by xargs", base)
	}
	if code && !repl {
		return nil
	}
	if !code {
		ops := a.operands(set("-W", "-X", "-I", "-M", "--require", "-r", "-C", "--config", "-J"))
		if len(ops) > 0 {
			i := ops[0]
			if !a.ok[i] {
				return c.stdinPathWord(base, a.words[i], x, sio)
			}
			if fd, isFd := fdPath(a.vals[i]); !isFd {
				if err := c.execScript(a.vals[i]); err != nil || !repl {
					return err
				}
			} else if fd != "0" {
				return c.unsafe(RuleUnjudgeable, "%s reads its program from file descriptor %s", base, fd)
			}
		}
	}
	return c.stdinProgram(base, x, sio, false)
}

// stdinPathWord judges a script operand computed at run time: it runs like
// a script on disk unless it names stdin or a descriptor in some way.
func (c *checker) stdinPathWord(prog string, w *syntax.Word, x surroundings, sio *stmtIO) error {
	if hasProcSubst(w) {
		return c.unsafe(RuleUnjudgeable, "%s reads its program from a process substitution", prog)
	}
	src := wordSource(w)
	if strings.Contains(src, "/fd/") || strings.Contains(src, "/dev/std") {
		return c.unsafe(RuleUnjudgeable, "%s reads its program from a descriptor named at run time (%s)", prog, src)
	}
	return nil
}

// source judges `source file` / `. file`.
func (c *checker) source(a args, x surroundings, sio *stmtIO) error {
	if len(a.words) < 2 {
		return nil
	}
	w := a.words[1]
	if c.wordHasDownloadSubst(w) {
		return c.danger(RuleDownloadExec, "sourcing downloaded code")
	}
	if hasProcSubst(w) {
		return c.unsafe(RuleUnjudgeable, "sourcing a process substitution cannot be judged")
	}
	if !a.ok[1] {
		return nil // like running a script file named by a variable
	}
	if fd, isFd := fdPath(a.vals[1]); isFd {
		if fd != "0" {
			return c.unsafe(RuleUnjudgeable, "sourcing file descriptor %s cannot be judged", fd)
		}
		if x.pipedIn && x.pipeDownload {
			return c.danger(RulePipeToShell, "downloaded content is sourced from a pipe")
		}
		return c.stdinCode("source", x, sio)
	}
	return c.execScript(a.vals[1])
}

// trap judges the handler code of `trap 'code' SIGNALS`.
func (c *checker) trap(a args) error {
	ops := a.operands(nil)
	if len(ops) < 2 {
		return nil // trap -l, trap -p, trap SIG (reset)
	}
	i := ops[0]
	if !a.ok[i] {
		return c.unsafe(RuleUnjudgeable, "trap runs code computed at run time (%s); quote it with single quotes", wordSource(a.words[i]))
	}
	if a.vals[i] == "-" || a.vals[i] == "" {
		return nil
	}
	return c.nested(a.vals[i])
}

// alias judges alias values as the commands they will become, and
// remembers them: where bash expands an alias (expand_aliases, posix
// mode), its value is the start of the command that uses it (aliasCall).
func (c *checker) alias(a args) error {
	for i := 1; i < len(a.words); i++ {
		if !a.ok[i] {
			return c.unsafe(RuleUnjudgeable, "alias with a computed value (%s)", wordSource(a.words[i]))
		}
		if name, val, ok := strings.Cut(a.vals[i], "="); ok {
			if err := c.nested(val); err != nil {
				return err
			}
			if c.aliases == nil {
				c.aliases = map[string]string{}
			}
			c.aliases[name] = val
		}
	}
	return nil
}

// aliasCall judges a command whose first word is an alias defined
// earlier in the script as bash runs it when it expands the alias: the
// alias's text followed by the rest of the command (alias x=env; x sudo
// id is env sudo id). A value ending in a blank makes bash expand the
// next word too, so that word's alias is spliced in as well.
func (c *checker) aliasCall(words []*syntax.Word, x surroundings, sio *stmtIO) error {
	v0, _ := litWord(words[0])
	text := c.aliases[v0]
	seen := map[string]bool{v0: true}
	i := 1
	for i < len(words) && (strings.HasSuffix(text, " ") || strings.HasSuffix(text, "\t")) {
		v, ok := litWord(words[i])
		val, isAlias := c.aliases[v]
		if !ok || !isAlias || seen[v] {
			break
		}
		seen[v] = true
		text += val
		i++
	}
	for ; i < len(words); i++ {
		text += " " + wordSource(words[i])
	}
	// bash does not expand an alias again inside its own expansion
	// (alias ls='ls -l').
	if c.inAlias == nil {
		c.inAlias = map[string]bool{}
	}
	for n := range seen {
		if c.inAlias[n] {
			delete(seen, n)
		} else {
			c.inAlias[n] = true
		}
	}
	defer func() {
		for n := range seen {
			delete(c.inAlias, n)
		}
	}()
	return c.nestedIn(text, inheritedStdin(x, sio))
}

// wrapper is a program that runs a command given by its words (env, nice,
// timeout, xargs, ...): its options, and how to find where that command
// starts.
type wrapper struct {
	// valued are the options that take the next word as their value.
	valued map[string]bool
	// values is how many words follow the options before the command
	// (timeout's duration, chrt's priority, taskset's mask).
	values int
	// noCommand are options with which the wrapper runs no command (a
	// -p PID acting on a running process): nothing more to judge.
	// noCommandLetters are short ones found in any -abc cluster.
	noCommand        []string
	noCommandLetters string
	// unwrap, when set, replaces the above: it returns the index of the
	// command's first word, and the string xargs replaces with its input
	// ("" for none), or start -1 when nothing more is to be judged (err
	// then says why, or is nil).
	unwrap func(c *checker, k call) (start int, repl string, err error)
}

// wrappers are the programs that run a command given by their words; each
// one's entry in the program table (programs.go) judges that command
// (checker.wrapper). The default is options without values.
var wrappers = map[string]wrapper{
	"command":  {noCommand: []string{"-v", "-V"}, noCommandLetters: "vV"},
	"exec":     {valued: set("-a")},
	"env":      {unwrap: unwrapEnv},
	"nice":     {valued: set("-n", "--adjustment")},
	"timeout":  {valued: set("-s", "--signal", "-k", "--kill-after"), values: 1},
	"stdbuf":   {valued: set("-i", "-o", "-e", "--input", "--output", "--error")},
	"ionice":   {noCommand: []string{"-p", "-P", "-u"}, valued: set("-c", "-n", "--class", "--classdata")},
	"chrt":     {noCommand: []string{"-p", "--pid"}, valued: set("-T", "-P", "-D", "--sched-runtime", "--sched-period", "--sched-deadline"), values: 1},
	"taskset":  {noCommand: []string{"-p", "--pid"}, noCommandLetters: "p", values: 1},
	"time":     {valued: set("-f", "-o", "--format", "--output")},
	"xargs":    {unwrap: unwrapXargs},
	"flock":    {unwrap: unwrapFlock},
	"watch":    {unwrap: unwrapWatch},
	"script":   {unwrap: unwrapScript},
	"strace":   {noCommand: []string{"-p"}, valued: traceValued},
	"ltrace":   {noCommand: []string{"-p"}, valued: traceValued},
	"xvfb-run": {valued: set("-n", "-s", "-f", "-e", "-p", "--server-num", "--server-args", "--auth-file", "--error-file")},
	"unshare": {valued: set("--setuid", "--setgid", "-S", "-G", "--root", "-R", "--wd", "-w", "--propagation",
		"--map-user", "--map-group", "--map-users", "--map-groups", "--setgroups", "--monotonic", "--boottime", "--load-interp")},
	// Multi-call binaries: the first word is the applet, judged as the
	// program it is.
	"busybox":   {unwrap: unwrapMultiCall},
	"toybox":    {unwrap: unwrapMultiCall},
	"coreutils": {unwrap: unwrapCoreutils},
	"ssh-agent": {valued: set("-a", "-E", "-t", "-P", "-O")},
	"prlimit":   {noCommand: []string{"-p", "--pid"}, valued: set("-p", "--pid", "-o", "--output")},
	"numactl": {noCommand: []string{"-s", "--show", "-H", "--hardware"}, valued: set("-N", "-m", "-C", "-i", "-p", "-P", "-w",
		"--cpunodebind", "--membind", "--physcpubind", "--interleave", "--preferred", "--preferred-many", "--weighted-interleave")},
	"dbus-launch": {valued: set("--config-file", "--autolaunch")},
	// dbus-run-session --dbus-daemon=BINARY runs BINARY as the bus.
	"dbus-run-session": {unwrap: func(c *checker, k call) (int, string, error) {
		for j := 1; j < len(k.words); j++ {
			if !k.ok[j] {
				break
			}
			name, _, _ := strings.Cut(k.vals[j], "=")
			if name == "--" || !strings.HasPrefix(name, "--") {
				break
			}
			if len(name) > 2 && strings.HasPrefix("--dbus-daemon", name) {
				return -1, "", c.unsafe(RuleUnjudgeable, "dbus-run-session --dbus-daemon runs the program it names")
			}
		}
		return skipOptions(k.args, 1, set("--config-file", "--dbus-daemon")), "", nil
	}},
	"fakeroot": {valued: set("-l", "--lib", "-f", "--faked", "-i", "-s", "-b", "--fd-base")},
	"sudoedit": {unwrap: func(c *checker, _ call) (int, string, error) {
		return -1, "", c.danger(RulePrivilege, "sudoedit edits files as another user")
	}},
	"builtin": {}, "nohup": {}, "setsid": {}, "unbuffer": {}, "catchsegv": {},
	"valgrind": {}, "firejail": {},
}

var traceValued = set("-e", "-o", "-s", "-u", "-E", "-P", "-I", "-b", "-a", "-X", "-O", "-S", "-U", "-n",
	"--output", "--env", "--user", "--attach", "--string-limit", "--trace-path", "--const-print-style",
	"--columns", "--summary-syscall-overhead", "--detach-on", "--interruptible", "--trace", "--signal",
	"--status", "--abbrev", "--raw", "--read", "--write", "--kvm", "--summary-sort-by", "--summary-columns",
	"--trace-fds", "--seccomp-bpf", "--argv0")

// skipOptions returns the index of the first word from i on that is not
// an option of a wrapper (valued: the options that take a value): past a
// "--", at a word that does not start with -, or at one computed at run
// time.
func skipOptions(a args, i int, valued map[string]bool) int {
	for i < len(a.words) && a.ok[i] {
		v := a.vals[i]
		if v == "--" {
			return i + 1
		}
		if len(v) < 2 || v[0] != '-' {
			return i
		}
		if takesNext(v, valued) {
			i++
		}
		i++
	}
	return i
}

// takesNext reports whether the option word v takes the next word as its
// value, as GNU getopt_long reads it (valued: the options with a value):
// -n, --signal, a long option abbreviated (--sig: getopt takes any
// unambiguous prefix, and an ambiguous one runs nothing), and a cluster
// whose first valued letter is its last (exec -cla NAME; in -oL the rest
// of the cluster is the value).
func takesNext(v string, valued map[string]bool) bool {
	if valued[v] {
		return true
	}
	if strings.HasPrefix(v, "--") {
		return longPrefix(v, valued) != ""
	}
	for j := 1; j < len(v); j++ {
		if valued["-"+v[j:j+1]] {
			return j == len(v)-1
		}
	}
	return false
}

// longPrefix returns the long option of names that v (--name, without
// =value) names as a prefix ("" for none): getopt_long takes any
// unambiguous abbreviation.
func longPrefix(v string, names map[string]bool) string {
	if len(v) < 3 || !strings.HasPrefix(v, "--") || strings.Contains(v, "=") {
		return ""
	}
	best := ""
	for n := range names {
		if strings.HasPrefix(n, "--") && strings.HasPrefix(n, v) && (best == "" || n < best) {
			best = n
		}
	}
	return best
}

// splits reports a word that bash may turn into several words or none:
// a glob, or an unquoted parameter expansion or command substitution
// (word splitting). Expansions that make only digits ($#, ${#x}) do not.
func splits(w *syntax.Word) bool {
	if wordValue(w).glob {
		return true
	}
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.CmdSubst:
			return true
		case *syntax.ParamExp:
			if !p.Length && !(p.Param != nil && strings.Contains("#?$!", p.Param.Value)) {
				return true
			}
		}
	}
	return false
}

// wrapper judges the command the wrapper k runs (w says how to find it).
func (c *checker) wrapper(k call, w wrapper) error {
	a, x := k.args, k.x
	i, repl := 1, ""
	if w.unwrap != nil {
		var err error
		if i, repl, err = w.unwrap(c, k); err != nil || i < 0 {
			return err
		}
	} else {
		if len(w.noCommand) > 0 && a.has(w.noCommand...) {
			return nil
		}
		for _, l := range []byte(w.noCommandLetters) {
			if a.hasShort(l) {
				return nil
			}
		}
		i = skipOptions(a, 1, w.valued) + w.values
	}
	// A word before the command that bash may turn into more or fewer
	// words (a glob, an unquoted expansion) moves where the command
	// starts: with files 5 and sudo, timeout * id is timeout 5 sudo id.
	for j := 1; j < i && j < len(a.words); j++ {
		if splits(a.words[j]) {
			return c.unsafe(RuleUnjudgeable, "%s's word %s may become several words or none, so the command it runs cannot be told", k.base, wordSource(a.words[j]))
		}
	}
	// Under xargs, a wrapper left without its command runs the words xargs
	// appends (echo sudo | xargs env), and one whose words up to its
	// command hold the -I string runs what the input puts there (xargs
	// -I{} env {} id): the input chooses the program.
	if x.repl != "" {
		for j := 1; j <= i && j < len(a.words); j++ {
			if v, ok := litWord(a.words[j]); !ok || strings.Contains(v, x.repl) {
				return c.unsafe(RuleUnjudgeable, "%s runs a program chosen by the input that xargs or find pastes into its words", k.base)
			}
		}
	}
	if i >= len(a.words) {
		if x.moreArgs && k.base != "xargs" {
			return c.unsafe(RuleUnjudgeable, "%s runs a program pasted from its input by xargs", k.base)
		}
		return nil
	}
	inner := a.words[i:]
	x.external = true // a program runs it: shell functions do not apply
	if k.base == "xargs" {
		x.moreArgs, x.repl = true, repl
		// xargs appends its input: an option left without its value
		// takes it from the input (xargs git -c, xargs env -S, xargs
		// rebase -x), and some of those values are code.
		if last := len(a.words) - 1; repl == "" && last > i && a.ok[last] && a.ok[i] &&
			codeValueOptions[path.Base(a.vals[i])][a.vals[last]] {
			return c.unsafe(RuleUnjudgeable, "xargs appends its input as the value of %s %s, which runs it as code", path.Base(a.vals[i]), a.vals[last])
		}
	}
	if repl != "" {
		if err := c.replCheck(inner, repl, "xargs"); err != nil {
			return err
		}
	}
	return c.simple(inner, x, k.sio)
}

func unwrapEnv(c *checker, k call) (int, string, error) {
	i, err := c.envWrapper(k.args, k.x, k.sio)
	return i, "", err
}

// xargsValued are xargs's options with a value (-e, -i and -l take one
// only attached, as --eof=, --replace= and --max-lines= do).
var xargsValued = set("-a", "-E", "-I", "-L", "-n", "-P", "-s", "-d", "--arg-file", "--delimiter",
	"--max-args", "--max-chars", "--max-procs", "--process-slot-var")

// unwrapXargs skips xargs's options as getopt_long reads them (clusters,
// attached values, abbreviated long options), noting the string -I (-i,
// --replace) replaces with each input item.
func unwrapXargs(_ *checker, k call) (int, string, error) {
	a := k.args
	i, repl := 1, ""
	for i < len(a.words) && a.ok[i] {
		v := a.vals[i]
		if v == "--" {
			i++
			break
		}
		if len(v) < 2 || v[0] != '-' {
			break
		}
		if strings.HasPrefix(v, "--") {
			name, val, has := strings.Cut(v, "=")
			switch {
			case len(name) > 2 && strings.HasPrefix("--replace", name):
				repl = val
				if repl == "" {
					repl = "{}"
				}
			case !has && (xargsValued[name] || longPrefix(name, xargsValued) != ""):
				i++
			}
			i++
			continue
		}
	cluster:
		for j := 1; j < len(v); j++ {
			switch l := v[j]; {
			case l == 'e' || l == 'l':
				break cluster // an optional value: the rest of the word
			case l == 'i':
				repl = v[j+1:]
				if repl == "" {
					repl = "{}"
				}
				break cluster
			case xargsValued["-"+string(l)]:
				val := v[j+1:]
				if val == "" && i+1 < len(a.words) {
					i++
					val = a.vals[i]
				}
				if l == 'I' {
					repl = val
				}
				break cluster
			}
		}
		i++
	}
	return i, repl, nil
}

// flockValued are flock's options with a value.
var flockValued = set("-w", "--timeout", "--wait", "-E", "--conflict-exit-code")

// unwrapFlock finds flock's command: -c CODE (a script), or the words
// after the lock file.
func unwrapFlock(c *checker, k call) (int, string, error) {
	a, x, sio := k.args, k.x, k.sio
	i := 1
	for i < len(a.words) && a.ok[i] {
		v := a.vals[i]
		if v == "-c" || v == "--command" {
			if i+1 >= len(a.words) {
				return -1, "", nil
			}
			if !a.ok[i+1] {
				return -1, "", c.unsafe(RuleUnjudgeable, "flock -c with computed code")
			}
			return -1, "", c.nestedIn(a.vals[i+1], inheritedStdin(x, sio))
		}
		if len(v) < 2 || v[0] != '-' {
			break
		}
		if takesNext(v, flockValued) {
			i++
		}
		i++
	}
	i++ // the lock file
	for j := i; j < len(a.words); j++ {
		if a.ok[j] && (a.vals[j] == "-c" || a.vals[j] == "--command") && j+1 < len(a.words) {
			if !a.ok[j+1] {
				return -1, "", c.unsafe(RuleUnjudgeable, "flock -c with computed code")
			}
			return -1, "", c.nestedIn(a.vals[j+1], inheritedStdin(x, sio))
		}
	}
	return i, "", nil
}

// unwrapWatch finds watch's command: its words as argv with -x, else
// joined into a script for sh -c.
func unwrapWatch(c *checker, k call) (int, string, error) {
	a := k.args
	i, exe := 1, false
	valued := set("-n", "--interval", "-q", "--equexit")
	for i < len(a.words) && a.ok[i] && strings.HasPrefix(a.vals[i], "-") {
		v := a.vals[i]
		if v == "--" {
			i++
			break
		}
		if v == "-x" || v == "--exec" || longPrefix(v, set("--exec")) != "" ||
			!strings.HasPrefix(v, "--") && strings.Contains(strings.SplitN(strings.SplitN(v, "n", 2)[0], "q", 2)[0], "x") {
			exe = true
		}
		if takesNext(v, valued) {
			i++
		}
		i++
	}
	if exe {
		return i, "", nil
	}
	parts := make([]string, 0, len(a.words)-i)
	for j := i; j < len(a.words); j++ {
		if !a.ok[j] {
			return -1, "", c.unsafe(RuleUnjudgeable, "watch runs a command string computed at run time")
		}
		parts = append(parts, a.vals[j])
	}
	return -1, "", c.nestedIn(strings.Join(parts, " "), inheritedStdin(k.x, k.sio))
}

// scriptValued are script's options with a value (-t takes one only
// attached).
var scriptValued = set("-c", "-E", "-I", "-O", "-B", "-T", "-m", "--command", "--echo", "--log-in",
	"--log-out", "--log-io", "--log-timing", "--logging-format", "--output-limit")

// unwrapScript judges script -c CODE, read as getopt_long reads it
// (options anywhere before --, clusters such as -qc, attached values,
// abbreviated long options: --com); without -c, script runs an
// interactive shell on its stdin.
func unwrapScript(c *checker, k call) (int, string, error) {
	a := k.args
	var codes []string
	for j := 1; j < len(a.words); j++ {
		if !a.ok[j] {
			continue
		}
		v := a.vals[j]
		if v == "--" {
			break
		}
		isCode, code, next := false, "", false
		switch {
		case strings.HasPrefix(v, "--"):
			name, val, eq := strings.Cut(v, "=")
			full := name
			if !scriptValued[name] {
				full = longPrefix(name, scriptValued)
			}
			switch {
			case full == "--command":
				isCode, code, next = true, val, !eq
			case full != "" && !eq:
				j++
			}
		case len(v) > 1 && v[0] == '-':
			for l := 1; l < len(v) && v[l] != 't'; l++ {
				if scriptValued["-"+v[l:l+1]] {
					val := v[l+1:]
					if v[l] == 'c' {
						isCode, code, next = true, val, val == ""
					} else if val == "" {
						j++
					}
					break
				}
			}
		}
		if next {
			if j+1 >= len(a.words) {
				return -1, "", nil // script fails: -c needs its value
			}
			j++
			if !a.ok[j] {
				return -1, "", c.unsafe(RuleUnjudgeable, "script -c with computed code")
			}
			code = a.vals[j]
		}
		if isCode {
			codes = append(codes, code)
		}
	}
	for _, code := range codes {
		if err := c.nestedIn(code, inheritedStdin(k.x, k.sio)); err != nil {
			return -1, "", err
		}
	}
	if len(codes) > 0 {
		return -1, "", nil
	}
	return -1, "", c.stdinCode("script", k.x, k.sio)
}

// unwrapMultiCall: busybox APPLET ARGS runs the applet; busybox --list,
// --install, --help run nothing.
func unwrapMultiCall(_ *checker, k call) (int, string, error) {
	if len(k.words) > 1 && k.ok[1] && strings.HasPrefix(k.vals[1], "-") {
		return -1, "", nil
	}
	return 1, "", nil
}

// unwrapCoreutils: coreutils --coreutils-prog=rm -rf / runs the program
// the option names; anything else runs nothing judged.
func unwrapCoreutils(c *checker, k call) (int, string, error) {
	a := k.args
	if len(a.words) > 1 && a.ok[1] {
		if prog, ok := strings.CutPrefix(a.vals[1], "--coreutils-prog="); ok {
			words := append([]*syntax.Word{{Parts: []syntax.WordPart{&syntax.SglQuoted{Value: prog}}}}, a.words[2:]...)
			x := k.x
			x.external = true
			return -1, "", c.simple(words, x, k.sio)
		}
	}
	return -1, "", nil
}

// replCheck refuses xargs/find templates that paste input into code: in the
// program name, or into `sh -c` code.
func (c *checker) replCheck(inner []*syntax.Word, repl, tool string) error {
	if len(inner) == 0 {
		return nil
	}
	v0, ok := litWord(inner[0])
	if ok && strings.Contains(v0, repl) {
		return c.unsafe(RuleUnjudgeable, "%s pastes its input into the program name", tool)
	}
	if ok && shells[path.Base(v0)] {
		for j := 1; j < len(inner); j++ {
			v, ok := litWord(inner[j])
			if ok && len(v) > 1 && v[0] == '-' && strings.Contains(v, "c") && j+1 < len(inner) {
				code, ok := litWord(inner[j+1])
				if ok && strings.Contains(code, repl) {
					return c.unsafe(RuleUnjudgeable, "%s pastes its input into shell code", tool)
				}
				break
			}
		}
	}
	return nil
}

// find judges the commands of -exec/-execdir/-ok/-okdir, and -delete from
// the root or a system directory.
func (c *checker) find(a args, x surroundings) error {
	del := a.has("-delete")
	for i := 1; i < len(a.words); i++ {
		v := a.vals[i]
		if !a.ok[i] {
			continue
		}
		if del && (v == "/" || (strings.HasPrefix(v, "/") && !c.inside(path.Clean(v)) && systemPath(path.Clean(v)))) {
			return c.danger(RuleDestructive, "find %s -delete removes system files", v)
		}
		if v != "-exec" && v != "-execdir" && v != "-ok" && v != "-okdir" {
			continue
		}
		j := i + 1
		for j < len(a.words) && !(a.ok[j] && (a.vals[j] == ";" || a.vals[j] == "+")) {
			j++
		}
		inner := a.words[i+1 : j]
		if err := c.replCheck(inner, "{}", "find "+v); err != nil {
			return err
		}
		if len(inner) == 0 {
			i = j
			continue
		}
		// A wrapper whose words up to its command hold {} runs the file
		// found (find /usr/bin -name sudo -exec env {} id ;).
		if v0, ok := litWord(inner[0]); ok {
			if _, isWrapper := wrappers[path.Base(v0)]; isWrapper {
				if err := c.simple(inner, surroundings{inFunc: x.inFunc, external: true, repl: "{}"}, nil); err != nil {
					return err
				}
			}
		}
		// {} is each file found: judge the command with {} as the start
		// points themselves, or, when tests before -exec select files, as
		// a file inside them (find / -name x -exec rm {} + removes /x-like
		// files; find / -exec rm -rf {} + removes /).
		starts, filtered := c.findStarts(a, i)
		for _, sp := range starts {
			words := inner
			if sp != "" {
				if filtered {
					sp = path.Join(sp, "x")
				}
				words = substituteBraces(inner, sp)
			}
			if err := c.simple(words, surroundings{inFunc: x.inFunc, external: true}, nil); err != nil {
				return err
			}
		}
		i = j
	}
	return nil
}

// findStarts returns find's start points as paths ("" for one computed at
// run time; "." when none is given) and whether a test before the action
// at index end selects among the files found.
func (c *checker) findStarts(a args, end int) (starts []string, filtered bool) {
	i := 1
	for ; i < end && a.ok[i]; i++ {
		v := a.vals[i]
		if v == "-H" || v == "-L" || v == "-P" || strings.HasPrefix(v, "-O") {
			continue
		}
		if v == "-D" {
			i++
			continue
		}
		break
	}
	for ; i < end; i++ {
		if a.ok[i] && (strings.HasPrefix(a.vals[i], "-") || a.vals[i] == "(" || a.vals[i] == "!" || a.vals[i] == ")") {
			break
		}
		p, ok := c.pathWord(a.words[i])
		if !ok || strings.HasPrefix(p, "~") {
			p = ""
		}
		starts = append(starts, p)
	}
	if len(starts) == 0 {
		starts = []string{"."}
	}
	global := set("-maxdepth", "-mindepth", "-depth", "-d", "-xdev", "-mount", "-follow", "-ignore_readdir_race",
		"-noignore_readdir_race", "-noleaf", "-regextype", "-warn", "-nowarn", "-daystart", "-print", "-print0", "(", ")")
	for ; i < end; i++ {
		if !a.ok[i] {
			filtered = true
			continue
		}
		v := a.vals[i]
		if strings.HasPrefix(v, "-") || v == "!" {
			if !global[v] {
				filtered = true
			}
			if v == "-maxdepth" || v == "-mindepth" || v == "-regextype" {
				i++
			}
		}
	}
	return starts, filtered
}

// substituteBraces returns words with every {} in a static word replaced by
// p (as a quoted word, so it is taken literally).
func substituteBraces(words []*syntax.Word, p string) []*syntax.Word {
	out := make([]*syntax.Word, len(words))
	for k, w := range words {
		out[k] = w
		if v, ok := litWord(w); ok && strings.Contains(v, "{}") {
			out[k] = &syntax.Word{Parts: []syntax.WordPart{&syntax.SglQuoted{Value: strings.ReplaceAll(v, "{}", p)}}}
		}
	}
	return out
}

// cd follows a directory change, refusing one that leaves the boundary
// when escape checks are on.
func (c *checker) cd(a args) error {
	ops := a.operands(nil)
	var target string
	switch {
	case len(ops) == 0:
		if c.st.home == "" {
			return c.cdUnknown("cd to an unknown HOME")
		}
		target = c.st.home
	case a.ok[ops[0]] && a.vals[ops[0]] == "-":
		return nil // back to a directory already judged
	default:
		p, ok := c.pathWord(a.words[ops[0]])
		if !ok {
			return c.cdUnknown("cd to a computed directory (" + wordSource(a.words[ops[0]]) + ")")
		}
		if strings.HasPrefix(p, "~") {
			if c.p.escapes {
				return c.danger(RuleEscape, "cd %s leaves the workspace", p)
			}
			c.st.cwds = []string{""}
			return nil
		}
		target = p
	}
	next := make([]string, 0, len(c.st.cwds))
	for _, d := range c.st.cwds {
		p := c.abs(target, d)
		if err := c.checkPathSize(p); err != nil {
			return err
		}
		if p == "" {
			if c.p.escapes {
				return c.unsafe(RuleUnjudgeable, "cd from an unknown directory")
			}
		} else if c.p.escapes {
			if !c.inside(p) {
				return c.danger(RuleEscape, "cd %s leaves the workspace %s", target, c.boundary)
			}
			real, ok, err := c.followLinks(p, true)
			if err != nil {
				return err
			}
			if !ok || !c.inside(real) {
				return c.danger(RuleEscape, "cd %s follows a symlink out of the workspace", target)
			}
		}
		next = append(next, p)
	}
	c.st.cwds = dedup(next)
	return nil
}

func dedup(in []string) []string {
	out := in[:0]
	seen := map[string]bool{}
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func (c *checker) cdUnknown(what string) error {
	if c.p.escapes {
		return c.unsafe(RuleUnjudgeable, "%s cannot be judged", what)
	}
	c.st.cwds = []string{""}
	return nil
}

// pathArgs applies the escape checks to every argument that is a path
// (or an --option=path): `..` leading past the boundary, `~` or $HOME
// leading out, `~user`.
func (c *checker) pathArgs(a args) error {
	if !c.p.escapes {
		return nil
	}
	for i := 1; i < len(a.words); i++ {
		info := wordValue(a.words[i])
		v := info.val
		if strings.HasPrefix(v, "-") {
			if _, after, ok := strings.Cut(v, "="); ok {
				v = after
			} else {
				continue
			}
		}
		if info.home {
			if strings.HasPrefix(v, "~") && v != "~" && !strings.HasPrefix(v, "~/") {
				return c.danger(RuleEscape, "%s names another user's home", v)
			}
			p, ok := c.pathWord(a.words[i])
			if !ok {
				if !wordStaticBut(a.words[i]) {
					continue
				}
				return c.unsafe(RuleUnjudgeable, "%s uses HOME after it was changed", wordSource(a.words[i]))
			}
			if !c.inside(path.Clean(p)) {
				return c.danger(RuleEscape, "%s leads out of the workspace", v)
			}
			continue
		}
		if !hasDotDot(v) {
			continue
		}
		for _, d := range c.st.cwds {
			p := c.abs(v, d)
			if p == "" {
				return c.unsafe(RuleUnjudgeable, "%s is relative to an unknown directory", v)
			}
			if !c.inside(p) {
				return c.danger(RuleEscape, "%s goes above the workspace root %s", v, c.boundary)
			}
		}
	}
	return nil
}

func hasDotDot(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

// rm refuses recursive deletion of the root, a home, the whole workspace
// (or an ancestor of it), a system directory, or `$VAR/` forms that become
// `/` when the variable is empty.
func (c *checker) rm(a args) error {
	recursive := a.has("--recursive") || a.hasShort('r') || a.hasShort('R')
	for _, i := range a.operands(nil) {
		info := wordValue(a.words[i])
		if !recursive {
			if a.ok[i] {
				if err := c.writeTarget(a.words[i], "rm"); err != nil {
					return err
				}
			}
			continue
		}
		if rmDanger[info.val] && (a.ok[i] || info.home) {
			return c.danger(RuleDestructive, "rm -r %s deletes everything there", info.val)
		}
		if !a.ok[i] && !info.home {
			if p, isExt := extglobPath(a.words[i]); isExt {
				// An extended glob (shopt -s extglob) matches at most what
				// * matches there: /@(etc) is /etc, @(*) everything.
				for _, d := range c.st.cwds {
					abs := c.abs(p, d)
					if abs == "" {
						return c.danger(RuleDestructive, "rm -r %s from an unknown directory", wordSource(a.words[i]))
					}
					if err := c.rmLinked(p, abs, true); err != nil {
						return err
					}
				}
				continue
			}
			// A path computed from where the command runs ($PWD,
			// ${PWD%/*}, ${HOME::1}, $(dirname "$PWD")) is judged by its
			// value, or refused when it cannot be computed.
			if v, ok := c.evalPath(a.words[i]); ok {
				if v == "" {
					continue
				}
				if rmDanger[v] {
					return c.danger(RuleDestructive, "rm -r %s (%s) deletes everything there", wordSource(a.words[i]), v)
				}
				for _, d := range c.st.cwds {
					if abs := c.abs(v, d); abs != "" {
						if err := c.rmLinked(wordSource(a.words[i])+" ("+abs+")", abs, false); err != nil {
							return err
						}
					}
				}
				continue
			}
			if mentionsLocation(a.words[i]) {
				return c.unsafe(RuleUnjudgeable, "rm -r %s: a path computed from the working directory or HOME that the policy cannot follow", wordSource(a.words[i]))
			}
			src := wordSource(a.words[i])
			if w := a.words[i]; len(w.Parts) >= 1 {
				// ${VAR:?} stops the shell when VAR is empty: the safe idiom.
				if pe, isParam := firstPart(w).(*syntax.ParamExp); isParam &&
					!(pe.Exp != nil && (pe.Exp.Op == syntax.ErrorUnset || pe.Exp.Op == syntax.ErrorUnsetOrNull)) {
					rest := strings.TrimLeft(src, "\"")
					if j := strings.IndexAny(rest, "/"); j >= 0 && strings.Trim(rest[j:], "/*\"") == "" {
						return c.unsafe(RuleUnjudgeable, "rm -r %s deletes / or everything in it when the variable is empty", src)
					}
				}
			}
			continue
		}
		p, ok := c.pathWord(a.words[i])
		if !ok {
			if info.home {
				return c.unsafe(RuleUnjudgeable, "rm -r %s with an unknown HOME", wordSource(a.words[i]))
			}
			continue
		}
		if strings.HasPrefix(p, "~") {
			return c.danger(RuleDestructive, "rm -r %s deletes another user's home", p)
		}
		glob := info.glob
		for _, d := range c.st.cwds {
			abs := c.abs(p, d)
			if abs == "" {
				if glob {
					return c.danger(RuleDestructive, "rm -r %s from an unknown directory", p)
				}
				continue
			}
			if err := c.rmLinked(p, abs, glob); err != nil {
				return err
			}
		}
	}
	return nil
}

// extglobPath is w with each extended glob (@(...), !(...), ...) as *,
// when w has one and nothing else computed.
func extglobPath(w *syntax.Word) (string, bool) {
	var b strings.Builder
	ext := false
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.ExtGlob:
			ext = true
			b.WriteString("*")
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(escapeGlob(p.Value))
		default:
			return "", false
		}
	}
	return b.String(), ext
}

func firstPart(w *syntax.Word) syntax.WordPart {
	p := w.Parts[0]
	if dq, ok := p.(*syntax.DblQuoted); ok && len(dq.Parts) > 0 {
		return dq.Parts[0]
	}
	return p
}

func (c *checker) rmTarget(p, abs string, glob bool) error {
	dir := abs
	if glob {
		// `dir/*` empties dir: judge dir itself.
		if b := path.Base(abs); strings.ContainsAny(b, "*?[") && strings.Trim(b, "*") == "" {
			dir = path.Dir(abs)
		}
	}
	switch {
	case dir == "/":
		return c.danger(RuleDestructive, "rm -r %s deletes the whole filesystem", p)
	case Within(dir, c.boundary):
		return c.danger(RuleDestructive, "rm -r %s deletes the whole workspace", p)
	case !c.inside(abs) && systemPath(abs):
		return c.danger(RuleDestructive, "rm -r %s deletes system files", p)
	case !c.inside(abs) && c.p.escapes:
		return c.danger(RuleEscape, "rm -r %s deletes outside the workspace", p)
	}
	return nil
}

// kill refuses signalling every process (-1) or init (1).
func (c *checker) kill(a args) error {
	first := true
	for i := 1; i < len(a.vals); i++ {
		v := a.vals[i]
		if first && (v == "-s" || v == "-n") {
			i++
			first = false
			continue
		}
		if first && strings.HasPrefix(v, "-") && v != "-1" && v != "--" {
			first = false
			continue
		}
		if first && v == "-1" && i+1 < len(a.vals) {
			first = false // kill -1 PID: signal 1 (HUP)
			continue
		}
		first = false
		if v == "-1" || v == "1" {
			return c.danger(RuleSystemControl, "kill %s signals every process or init", v)
		}
	}
	return nil
}

// netVerb refuses ip/tc/route/nmcli subcommands that change state.
func (c *checker) netVerb(a args, base string) error {
	ops := a.operands(set("-n", "-netns", "-f", "-family", "-b", "-batch", "-rc", "-rcvbuf"))
	if base == "route" {
		if len(ops) > 0 && a.ok[ops[0]] && (a.vals[ops[0]] == "add" || a.vals[ops[0]] == "del" || a.vals[ops[0]] == "flush") {
			return c.danger(RuleNetwork, "route %s changes the routing table", a.vals[ops[0]])
		}
		return nil
	}
	if base == "nmcli" {
		for _, i := range ops {
			switch a.vals[i] {
			case "down", "up", "delete", "modify", "add", "off", "disconnect", "connect", "reload", "edit", "set":
				return c.danger(RuleNetwork, "nmcli %s changes the network configuration", a.vals[i])
			}
		}
		return nil
	}
	if a.has("-b", "-batch", "-force") {
		return c.danger(RuleNetwork, "%s batch mode changes the network configuration", base)
	}
	if len(ops) >= 2 && a.ok[ops[1]] && !readOnlyVerbs[a.vals[ops[1]]] && !strings.HasPrefix(a.vals[ops[1]], "sh") && !strings.HasPrefix(a.vals[ops[1]], "li") && !isIfaceLike(a.vals[ops[1]]) {
		return c.danger(RuleNetwork, "%s %s %s changes the network configuration", base, a.vals[ops[0]], a.vals[ops[1]])
	}
	return nil
}

// isIfaceLike accepts `ip addr dev eth0`-style filters after the object.
func isIfaceLike(v string) bool {
	switch v {
	case "dev", "to", "from", "table", "scope", "label", "up", "type", "vrf", "master", "proto", "via":
		return true
	}
	return false
}

// recordDownload remembers files a downloader writes, so running them
// later in the same command is download-and-execute.
func (c *checker) recordDownload(a args, sio *stmtIO) {
	dir := ""
	if len(c.st.cwds) > 0 {
		dir = c.st.cwds[0]
	}
	add := func(p string) {
		if abs := c.abs(p, dir); abs != "" {
			c.downloads[abs] = true
		}
	}
	remoteName := false
	for i := 1; i < len(a.vals); i++ {
		if !a.ok[i] {
			continue
		}
		v := a.vals[i]
		switch {
		case (v == "-o" || v == "--output" || v == "-O" && a.vals[0] != "curl" || v == "--output-document") && i+1 < len(a.vals):
			if a.vals[0] == "curl" && v == "-O" {
				remoteName = true
				continue
			}
			add(a.vals[i+1])
			i++
		case strings.HasPrefix(v, "--output-document=") || strings.HasPrefix(v, "--output="):
			_, f, _ := strings.Cut(v, "=")
			add(f)
		case v == "-O" || v == "--remote-name" || v == "--remote-name-all":
			remoteName = true
		case strings.HasPrefix(v, "-o") && len(v) > 2 && path.Base(a.vals[0]) == "curl":
			add(v[2:])
		case strings.HasPrefix(v, "-O") && len(v) > 2 && path.Base(a.vals[0]) != "curl":
			add(v[2:])
		}
	}
	for i := 1; i < len(a.vals); i++ {
		if a.ok[i] && strings.Contains(a.vals[i], "://") && (remoteName || path.Base(a.vals[0]) != "curl") {
			u := a.vals[i]
			if j := strings.IndexAny(u, "?#"); j >= 0 {
				u = u[:j]
			}
			if b := path.Base(u); b != "" && b != "/" && b != "." && !strings.Contains(b, ":") {
				add(b)
			}
		}
	}
	if sio != nil && sio.stdoutFile != "" {
		add(sio.stdoutFile)
	}
}

func hasPrefixArg(a args, p string) bool {
	for i := 1; i < len(a.vals); i++ {
		if a.ok[i] && strings.HasPrefix(a.vals[i], p) {
			return true
		}
	}
	return false
}

// writeTarget judges a file a command writes, given as a word.
func (c *checker) writeTarget(w *syntax.Word, what string) error {
	p, ok := c.pathWord(w)
	if !ok {
		if p, ok = extglobPath(w); ok {
			// An extended glob names what * names there: /@(etc)/ is
			// judged as /*/, a system path.
			return c.writePath(p, what)
		}
		if p, ok = c.evalPath(w); !ok {
			return nil // computed target: nothing static to judge
		}
	}
	return c.writePath(p, what)
}

// writePath refuses writes to system paths and devices (and, with escape
// checks, `..` past the boundary, handled by pathArgs for words).
func (c *checker) writePath(p, what string) error {
	if isNetDev(p) {
		return c.danger(RuleRemoteAccess, "%s to %s opens a network connection", what, p)
	}
	for _, d := range c.st.cwds {
		abs := c.abs(p, d)
		if abs == "" {
			continue
		}
		real, ok, err := c.followLinks(abs, true)
		if err != nil {
			return err
		}
		if !ok {
			return c.unsafe(RuleUnjudgeable, "%s writes to %s through a symlink whose target is computed at run time", what, p)
		}
		if real != abs {
			abs, p = real, p+" (a symlink to "+real+")"
		}
		if c.inside(abs) {
			continue
		}
		if strings.HasPrefix(abs, "/dev/") && !systemPathSafeDev(abs) {
			return c.danger(RuleDisk, "%s writes to the device %s", what, abs)
		}
		if systemPath(abs) {
			return c.danger(RuleSystemWrite, "%s writes to %s, a system path", what, abs)
		}
		if c.p.escapes && hasDotDot(p) {
			return c.danger(RuleEscape, "%s writes to %s, above the workspace root", what, p)
		}
	}
	return nil
}

func systemPathSafeDev(p string) bool { return !systemPath(p) }

// fdPath recognizes /dev/stdin and /dev/fd/N-style paths and returns N.
func fdPath(p string) (string, bool) {
	switch p {
	case "/dev/stdin", "-":
		return "0", true
	}
	for _, pre := range []string{"/dev/fd/", "/proc/self/fd/"} {
		if rest, ok := strings.CutPrefix(p, pre); ok && isDigits(rest) {
			return rest, true
		}
	}
	return "", false
}

// parallel judges GNU parallel's command template, which it runs through
// a shell: the words before ":::" (or all words, reading args from stdin).
// parallelFlags and parallelValued are the GNU parallel options the
// policy reads: flags, and options with a value (-j 4, -j4, --jobs=4).
var (
	parallelFlags = set("-k", "--keep-order", "-q", "--quote", "-X", "-m", "--xargs", "-v", "--verbose",
		"-t", "--dry-run", "--no-notice", "--will-cite", "--line-buffer", "--lb", "--tag", "--group",
		"-u", "--ungroup", "--bar", "--eta", "--progress", "-0", "--null", "-r", "--no-run-if-empty")
	parallelValued = set("-j", "--jobs", "-P", "--max-procs", "-N", "-n", "--max-args", "-L", "--max-lines",
		"--delay", "--timeout", "-I", "-C", "--colsep", "-d", "--delimiter", "-a", "--arg-file")
)

func (c *checker) parallel(a args) error {
	var parts []string
	opts := true
	for i := 1; i < len(a.words); i++ {
		if a.ok[i] && (a.vals[i] == ":::" || a.vals[i] == "::::" || a.vals[i] == ":::+" || a.vals[i] == "::::+") {
			break
		}
		if opts && a.ok[i] && a.vals[i] == "--" {
			opts = false
			continue
		}
		if opts && a.ok[i] && strings.HasPrefix(a.vals[i], "-") && len(a.vals[i]) > 1 {
			// Only the options below are read; GNU parallel has many
			// more, with values, and takes abbreviations (--jo 2), so
			// any other one leaves the command unknown.
			v := a.vals[i]
			name, _, eq := strings.Cut(v, "=")
			switch {
			case parallelFlags[v]:
			case parallelValued[name] && eq:
			case parallelValued[v]:
				i++
			case len(v) > 2 && v[1] != '-' && parallelValued[v[:2]]:
				// -j4: the value attached
			default:
				return c.unsafe(RuleUnjudgeable, "parallel %s: an option the policy does not read, so the command it runs cannot be told", v)
			}
			continue
		}
		opts = false
		if !a.ok[i] {
			return c.unsafe(RuleUnjudgeable, "parallel runs a command template computed at run time")
		}
		parts = append(parts, a.vals[i])
	}
	if len(parts) == 0 {
		return c.unsafe(RuleUnjudgeable, "parallel reads the commands it runs from its input")
	}
	return c.nested(strings.Join(parts, " "))
}

// codeOptions judges options whose value tar, rsync or zip runs as a shell
// command (--to-command, --checkpoint-action=exec=, -e/--rsh, -TT, ...).
func (c *checker) codeOptions(a args, base string) error {
	valued := map[string]map[string]bool{
		"tar":   set("--to-command", "--use-compress-program", "-I", "--info-script", "--new-volume-script", "-F"),
		"rsync": set("-e", "--rsh", "--rsync-path"),
		"zip":   set("-TT", "--unzip-command"),
	}[base]
	for i := 1; i < len(a.vals); i++ {
		if !a.ok[i] {
			continue
		}
		v := a.vals[i]
		code, found := "", false
		if valued[v] && i+1 < len(a.vals) {
			if !a.ok[i+1] {
				return c.unsafe(RuleUnjudgeable, "%s %s runs a command computed at run time", base, v)
			}
			code, found = a.vals[i+1], true
			i++
		} else if k, val, ok := strings.Cut(v, "="); ok && valued[k] {
			code, found = val, true
		} else if rest, ok := strings.CutPrefix(v, "--checkpoint-action=exec="); ok && base == "tar" {
			code, found = rest, true
		}
		if found {
			if err := c.nested(code); err != nil {
				return err
			}
		}
	}
	return nil
}

// unversioned strips a version suffix from an interpreter's name
// (python3.12, lua5.4, ruby3.1, php8.2, tclsh8.6 are python3, lua, ...).
func unversioned(base string) string {
	if langInterpreters[base] {
		return base
	}
	v := strings.TrimRight(base, "0123456789.")
	if v != base && langInterpreters[v] {
		return v
	}
	if v != base && langInterpreters[v+base[len(v):len(v)+1]] {
		return v + base[len(v):len(v)+1] // python3.12 -> python3
	}
	return base
}

//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"
	"mvdan.cc/sh/v3/syntax"

	"github.com/agentbe/agentbe-daemon/sandbox/policy"
)

// The direct fast path. Most of an exec's latency is bash's own start-up
// (figures: docs/performance.md, "exec — the shell was the cost"), and most
// commands agents send are one program with literal arguments, often behind
// the `cd "<dir>" &&` prefix the TypeScript client puts on every SSH exec.
// When a script is provably equivalent to executing one program, the
// executor execs that program itself: same Dir, environment, credentials, process group,
// Pdeathsig, pty, output capture, timeout and kill semantics. bash would
// exec it in place anyway (it execs the last simple command of a `-c`
// script, also after `cd X &&`), so the process tree is the same.
//
// The fast path is only an optimisation: whenever anything below is not
// clearly the case, the shell runs the script.
//
// The script (bash dialect, parsed once by sandbox/policy: the parse the
// policy judged):
//   - is valid UTF-8 without control characters other than tab and newline;
//   - is exactly one statement, not negated, backgrounded or a coprocess,
//     without redirections and without comments;
//   - is either one simple command without assignment prefixes, or
//     `cd <dir> && <simple command>` where the cd may carry literal
//     assignment prefixes (`HOME='<cwd>' K='v' cd "<cwd>" && cmd`, the
//     TypeScript client's shape; bash applies them to cd only, so they are
//     dropped) whose names bash does not treat specially;
//   - has only literal words: unquoted text without \ $ * ? [ ] { } ~ or
//     backquote, single quotes, double quotes with literal text without \,
//     $ or backquote, and concatenations of those (no $'…', $"…",
//     expansions, globs, braces, tildes, process substitution, extglob);
//   - names a program that is not a bash builtin or keyword (bashBuiltins),
//     except `true` and `false` without arguments when the program found
//     is coreutils' /usr/bin/true or /usr/bin/false, which then behave as
//     the builtins; a name with `=` or starting with `%` (a job spec: bash
//     runs `fg`) falls back.
//
// The executor (the shell must be bash 5.1 or later, as the environment
// rules below are bash's and it must exec in place after `cd X &&`, which
// probeDirect checks at New; no Rlimits, which the shell's ulimit applies;
// not an interactive shell):
//   - the environment has no variable bash changes or reacts to on import
//     (bashSpecialVars, BASH_*; SHLVL, OLDPWD, CDPATH, POSIXLY_CORRECT, PS1),
//     and LC_ALL is C, POSIX or C.UTF-8 (for another locale bash warns if
//     it is not installed);
//   - a cd target is non-empty, does not start with `-` or `//` (which bash
//     keeps in PWD), is made absolute
//     against the request's dir and cleaned as bash's logical cd does, is
//     an existing directory inside the boundary (its real path too), and
//     searchable;
//   - the program is found as bash would: a name with `/` relative to the
//     cwd, otherwise along the command's PATH (every entry absolute and
//     clean, nothing else of that name before the hit); it is a regular
//     file executable by the credential that runs it and starts with
//     "\x7fELF" or "#!" (bash runs other files as shell scripts);
//   - under bwrap, the program and every PATH entry searched are visible at
//     the same path inside the sandbox (system directories bound read-only,
//     or the bound boundary; never the private /tmp), following each
//     symlink; the program is an ELF file for this machine; and since
//     bwrap 0.8 cannot set argv[0], a PATH name is searched by bwrap's own
//     execvp (same PATH, same result), so argv[0] stays the typed name.
//
// The child environment then equals the shell's as a set: bash adds
// SHLVL=0 (it increments SHLVL and decrements it again before exec'ing
// the last command), `_=<path as found>`, and after a cd PWD=<target> and
// OLDPWD=<dir>.
//
// In software and none modes a direct start that fails (execve refused:
// ENOEXEC, EACCES from an ACL, a missing #! interpreter) is retried through
// the shell, which then reports it exactly as it would without the direct
// path; nothing ran.

// bashBuiltins are bash 5.2's builtins (`bash -c 'enable -a'`) and
// reserved words (`bash -c 'compgen -k'`) on Debian 12. A command with one
// of these names runs inside bash, never as a program from PATH.
var bashBuiltins = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(`
		. : [ alias bg bind break builtin caller cd command compgen complete
		compopt continue declare dirs disown echo enable eval exec exit export
		false fc fg getopts hash help history jobs kill let local logout
		mapfile popd printf pushd pwd read readarray readonly return set shift
		shopt source suspend test times trap true type typeset ulimit umask
		unalias unset wait
		if then else elif fi case esac for select while until do done in
		function time { } ! [[ ]] coproc`) {
		m[n] = true
	}
	return m
}()

// bashSpecialVars are variables bash sets, overrides or reacts to when
// they come in through the environment (found by passing each of `env -i
// bash -c 'compgen -v'` in and comparing `env` inside with `env` outside),
// plus those that change what cd does (a non-interactive bash also drops
// PS1 and PS2). A command whose environment has one
// of them, or a cd assignment naming one, takes the shell.
var bashSpecialVars = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(`
		BASH BASHOPTS BASHPID COMP_WORDBREAKS DIRSTACK EPOCHREALTIME EPOCHSECONDS
		EUID FUNCNAME GROUPS HISTCMD IFS LINENO OPTARG OPTERR OPTIND PPID PS4
		RANDOM SRANDOM SECONDS SHELLOPTS SHLVL UID _ OLDPWD PWD CDPATH
		POSIXLY_CORRECT ENV PS1 PS2`) {
		m[n] = true
	}
	return m
}()

// probeDirect checks once, at New, that this bash execs the last command
// of `cd X && cmd` in place (bash 5.1 and later): it then decrements SHLVL
// before the exec, so a bash started that way sees SHLVL 0 and prints 1.
// An older bash forks and waits (the inner one prints 2), and the fast
// path would not be what it does: it is then turned off.
func probeDirect(shellPath, shellArg0 string) bool {
	cmd := &exec.Cmd{Path: shellPath, Args: []string{shellArg0, "-c", "cd / && " + shellPath + ` -c 'echo "$SHLVL"'`},
		Env: []string{"PATH=" + basePath}, Dir: "/"}
	out, err := cmd.Output()
	return err == nil && string(out) == "1\n"
}

// directPlan is a script's fast-path shape: argv to exec, and the cd
// target ("" when there is none).
type directPlan struct {
	argv  []string
	cd    string
	hasCd bool
}

// parseDirect decides from the script alone whether it can take the fast
// path (see the comment at the top of this file).
func parseDirect(parsed *policy.Script) (directPlan, bool) {
	var plan directPlan
	script := parsed.Source()
	// Only tab and newline separate words in both bash and the parser;
	// other control characters (form feed, CR, ...) and invalid UTF-8
	// are where the two might disagree.
	if !utf8.ValidString(script) {
		return plan, false
	}
	for i := 0; i < len(script); i++ {
		if b := script[i]; (b < 0x20 && b != '\t' && b != '\n') || b == 0x7f {
			return plan, false
		}
	}
	f, err := parsed.Syntax()
	if err != nil || len(f.Stmts) != 1 {
		return plan, false
	}
	s := f.Stmts[0]
	if !plainStmt(s) {
		return plan, false
	}
	var words []syntax.Node // every word and assignment of the script
	switch cmd := s.Cmd.(type) {
	case *syntax.CallExpr:
		if len(cmd.Assigns) != 0 {
			return plan, false
		}
		argv, ok := literalArgs(script, cmd.Args)
		if !ok {
			return plan, false
		}
		plan.argv = argv
		words = wordNodes(nil, cmd)
	case *syntax.BinaryCmd:
		if cmd.Op != syntax.AndStmt || !plainStmt(cmd.X) || !plainStmt(cmd.Y) {
			return plan, false
		}
		cd, ok1 := cmd.X.Cmd.(*syntax.CallExpr)
		run, ok2 := cmd.Y.Cmd.(*syntax.CallExpr)
		if !ok1 || !ok2 || len(run.Assigns) != 0 || len(cd.Args) != 2 {
			return plan, false
		}
		for _, a := range cd.Assigns {
			if a.Append || a.Naked || a.Index != nil || a.Array != nil || a.Name == nil ||
				!policy.ValidEnvName(a.Name.Value) || bashSpecialVars[a.Name.Value] ||
				strings.HasPrefix(a.Name.Value, "BASH") {
				return plan, false
			}
			if a.Value != nil {
				if _, ok := literalWord(script, a.Value); !ok {
					return plan, false
				}
			}
		}
		cdArgs, ok := literalArgs(script, cd.Args)
		if !ok || cdArgs[0] != "cd" || cdArgs[1] == "" || strings.HasPrefix(cdArgs[1], "-") {
			return plan, false
		}
		argv, ok := literalArgs(script, run.Args)
		if !ok {
			return plan, false
		}
		plan.argv, plan.cd, plan.hasCd = argv, cdArgs[1], true
		words = wordNodes(wordNodes(nil, cd), run)
	default:
		return plan, false
	}
	if hasComment(script, words) {
		return directPlan{}, false
	}
	name := plan.argv[0]
	// A name starting with % is a job spec (bash runs `fg %1`).
	if name == "" || strings.Contains(name, "=") || name[0] == '%' {
		return plan, false
	}
	if bashBuiltins[name] && !((name == "true" || name == "false") && len(plan.argv) == 1) {
		return plan, false
	}
	return plan, true
}

// plainStmt is a statement without anything around its command.
func plainStmt(s *syntax.Stmt) bool {
	return s != nil && s.Cmd != nil && !s.Negated && !s.Background && !s.Coprocess &&
		len(s.Redirs) == 0
}

// wordNodes appends call's assignments and words to nodes.
func wordNodes(nodes []syntax.Node, call *syntax.CallExpr) []syntax.Node {
	for _, a := range call.Assigns {
		nodes = append(nodes, a)
	}
	for _, w := range call.Args {
		nodes = append(nodes, w)
	}
	return nodes
}

// hasComment reports a comment in src, a script whose words and
// assignments are words: the parse does not keep comments, and in a
// script of literal words and operators a # outside every word starts
// one (inside a word, as in a#b or '#', it is text).
func hasComment(src string, words []syntax.Node) bool {
	for i := strings.IndexByte(src, '#'); i >= 0; {
		inside := false
		for _, w := range words {
			if uint(i) >= w.Pos().Offset() && uint(i) < w.End().Offset() {
				inside = true
				break
			}
		}
		if !inside {
			return true
		}
		j := strings.IndexByte(src[i+1:], '#')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

func literalArgs(src string, words []*syntax.Word) ([]string, bool) {
	if len(words) == 0 {
		return nil, false
	}
	out := make([]string, len(words))
	for i, w := range words {
		v, ok := literalWord(src, w)
		if !ok {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

// unsafeUnquoted are the characters that make unquoted text anything but
// itself: escapes, expansions, globs, braces, tildes.
const unsafeUnquoted = "\\$*?[]{}~`"

// literalWord is w's value when it is plainly literal (see the top of this
// file). Each literal's source text must be its value, which rules out
// line continuations and anything the parser decoded.
func literalWord(src string, w *syntax.Word) (string, bool) {
	if w == nil || len(w.Parts) == 0 {
		return "", false
	}
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(p.Value, unsafeUnquoted) || !sourceIs(src, p, p.Value) {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			if p.Dollar || !sourceIs(src, p, "'"+p.Value+"'") {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false
			}
			var inner strings.Builder
			for _, dp := range p.Parts {
				l, ok := dp.(*syntax.Lit)
				if !ok || strings.ContainsAny(l.Value, "\\$`") {
					return "", false
				}
				inner.WriteString(l.Value)
			}
			if !sourceIs(src, p, `"`+inner.String()+`"`) {
				return "", false
			}
			b.WriteString(inner.String())
		default:
			return "", false
		}
	}
	return b.String(), true
}

func sourceIs(src string, n syntax.Node, want string) bool {
	start, end := n.Pos(), n.End()
	if !start.IsValid() || !end.IsValid() {
		return false
	}
	i, j := int(start.Offset()), int(end.Offset())
	return 0 <= i && i <= j && j <= len(src) && src[i:j] == want
}

// directCmd is a resolved fast-path command.
type directCmd struct {
	path string   // the program's absolute host path
	rel  string   // the name as typed when it is relative to the cwd ("./tool"), else empty
	argv []string // argv[0] is the name as typed
	dir  string   // the cwd (the cd target, or the request's dir)
	env  []string // the request's env plus what bash adds
}

// directOn reports an executor whose commands may take the fast path: bash
// that execs in place after cd (probeDirect), no ulimit prefix, and a
// strategy that allows it.
func (e *executor) directOn() bool {
	return !e.noDirect && e.shellKind == "bash" && e.ulimit == "" && e.iso.directOK()
}

// direct decides whether the script parsed takes the fast path from dir
// and returns the command to exec, or false for the shell. parsed is nil
// for an empty script.
func (e *executor) direct(parsed *policy.Script, dir, boundary string, env []string) (*directCmd, bool) {
	if parsed == nil || !e.directOn() {
		return nil, false
	}
	plan, ok := parseDirect(parsed)
	if !ok {
		return nil, false
	}
	path, lcAll := "", ""
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if bashSpecialVars[k] && k != "PWD" || strings.HasPrefix(k, "BASH") {
			return nil, false
		}
		switch k {
		case "PATH":
			path = v
		case "LC_ALL":
			lcAll = v
		}
	}
	// bash warns on stderr when LC_ALL names a locale that is not
	// installed; these always are.
	switch lcAll {
	case "C", "POSIX", "C.UTF-8", "C.utf8":
	default:
		return nil, false
	}
	d := &directCmd{dir: dir}
	if plan.hasCd {
		t := plan.cd
		if strings.HasPrefix(t, "//") {
			return nil, false // bash keeps a leading // in PWD
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(dir, t)
		}
		t = filepath.Clean(t)
		if !policy.Within(boundary, t) {
			return nil, false
		}
		real, err := filepath.EvalSymlinks(t)
		if err != nil || !policy.Within(boundary, real) {
			return nil, false
		}
		fi, err := os.Stat(t)
		if err != nil || !fi.IsDir() || !e.mayAccess(fi, 1) {
			return nil, false
		}
		if !e.iso.visible(t, boundary, false) {
			return nil, false
		}
		d.dir = t
	}
	name := plan.argv[0]
	var found, real string
	var realp *string // where runnable puts the program's real path, when it is needed
	if bashBuiltins[name] {
		realp = &real
	}
	if strings.Contains(name, "/") {
		// Not cleaned: the kernel resolves `..` after a symlink
		// physically, and so do Stat and execve on this path.
		found = name
		d.path = name
		if !filepath.IsAbs(name) {
			d.path = d.dir + "/" + name
			d.rel = name
		}
		if !e.runnable(d.path, boundary, -1, realp) {
			return nil, false
		}
	} else {
		if path == "" {
			return nil, false
		}
		for _, p := range filepath.SplitList(path) {
			if p == "" || p == "/" || !filepath.IsAbs(p) || filepath.Clean(p) != p {
				return nil, false
			}
			// The entry itself must be bound, not only on the way to a
			// bound directory (bwrap creates those with less in them).
			if !e.iso.visible(p, boundary, true) {
				return nil, false
			}
			cand := p + "/" + name
			// What Lstat would say, and the descriptor runnable judges
			// when it is not a symlink: one open for the usual hit.
			fd, err := unix.Open(cand, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err == unix.ENOENT {
				continue
			}
			if err != nil || !e.runnable(cand, boundary, fd, realp) {
				return nil, false
			}
			found, d.path = cand, cand
			break
		}
		if found == "" {
			return nil, false // bash says "command not found" (127)
		}
	}
	if bashBuiltins[name] {
		// true or false without arguments: bash runs its builtin, which
		// only coreutils' program of that name is sure to equal.
		if real != "/usr/bin/"+name && real != "/bin/"+name {
			return nil, false
		}
	}
	d.argv = plan.argv
	d.env = make([]string, 0, len(env)+4)
	for _, kv := range env {
		if plan.hasCd && strings.HasPrefix(kv, "PWD=") {
			continue
		}
		d.env = append(d.env, kv)
	}
	if plan.hasCd {
		d.env = append(d.env, "PWD="+d.dir, "OLDPWD="+dir)
	}
	d.env = append(d.env, "SHLVL=0", "_="+found)
	return d, true
}

// runnable reports a regular file the command's credential may execute,
// that the kernel runs itself (ELF or #!), and under bwrap an ELF file for
// this machine visible at the same path. The name may be in the workspace,
// where a command can swap it for a FIFO or a link to a device at any
// moment: it is opened once with O_PATH (which neither blocks nor runs a
// device's open) and only a regular file is read, through that descriptor.
// fd, when not -1, is p already opened with O_PATH|O_NOFOLLOW (a symlink
// there is opened again, followed); runnable closes it. With real set, it
// stores there the program's real path, as the kernel names the file
// opened (symlinks resolved), when it reports true.
func (e *executor) runnable(p, boundary string, fd int, real *string) bool {
	defer func() {
		if fd >= 0 {
			unix.Close(fd)
		}
	}()
	if !e.iso.visible(p, boundary, false) {
		return false
	}
	var st unix.Stat_t
	if fd >= 0 {
		if unix.Fstat(fd, &st) != nil {
			return false
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(fd)
			fd = -1
		}
	}
	if fd < 0 {
		var err error
		if fd, err = unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0); err != nil {
			fd = -1
			return false
		}
		if unix.Fstat(fd, &st) != nil {
			return false
		}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || !e.mayAccessIDs(st.Uid, st.Gid, st.Mode&0o777, 1) {
		return false
	}
	self := "/proc/self/fd/" + strconv.Itoa(fd)
	rfd, err := unix.Open(self, unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	var hdr [20]byte
	n := 0
	for n < len(hdr) {
		m, err := unix.Read(rfd, hdr[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			break
		}
		n += m
	}
	unix.Close(rfd)
	if !e.iso.runs(hdr[:n]) {
		return false
	}
	if real != nil {
		r, err := os.Readlink(self)
		if err != nil || !filepath.IsAbs(r) {
			return false
		}
		*real = r
	}
	return true
}

// elfMachineOK reports an ELF header for this machine (64-bit, little
// endian, e_machine), so that execve cannot fail with ENOEXEC.
func elfMachineOK(h []byte) bool {
	if h[4] != 2 || h[5] != 1 {
		return false
	}
	machine := uint16(h[18]) | uint16(h[19])<<8
	switch runtime.GOARCH {
	case "amd64":
		return machine == 62
	case "arm64":
		return machine == 183
	}
	return false
}

// mayAccess checks permission bits (bit: 1 execute/search) for the uid and
// groups that run commands, by class as the kernel does, but without
// root's override (capabilities are dropped under bwrap). ACLs are not
// read: in software and none modes a refused execve is retried through the
// shell, and under bwrap the program must be visible system or workspace
// files, where ACLs are not expected. Unsure means no.
func (e *executor) mayAccess(fi os.FileInfo, bit uint32) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	return e.mayAccessIDs(st.Uid, st.Gid, uint32(fi.Mode().Perm()), bit)
}

// mayAccessIDs is mayAccess for a file's owner, group and permission bits,
// with the ids of resolveUser: the run-as credential, or the daemon's own,
// read once (nothing in the daemon changes them).
func (e *executor) mayAccessIDs(owner, group, perm, bit uint32) bool {
	if owner == e.uid {
		return perm&(bit<<6) != 0
	}
	inGroup := group == e.gid
	for _, g := range e.groups {
		inGroup = inGroup || g == group
	}
	if inGroup {
		return perm&(bit<<3) != 0
	}
	return perm&bit != 0
}

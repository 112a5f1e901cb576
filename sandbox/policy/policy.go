// Package policy is the command safety policy: it parses a shell command
// once (Parse: bash's dialect, mvdan.cc/sh), judges every command in it
// (Policy.CheckScript), and words a refusal for clients (RefusalText) with
// its code, DANGEROUS_OPERATION or UNSAFE_COMMAND, and its rule.
//
// It is portable Go, apart from the executor that runs what it accepts: the
// executor (sandbox) judges each command with it and reads the same parse
// for its direct path, and the client library's remote backend judges a
// command with it before sending it, on any system. Start here: Policy
// (this file) says what is judged and how; simple (rules.go) judges one
// simple command, and each program's rule is an entry in the table of
// programs.go (wrappers such as env or xargs in rules.go's wrappers);
// rules_code.go holds the rules of programs that run code they are given
// (git settings, env -S, sed, editors, make), rules_data.go what runs as
// arithmetic, words.go the static values of words. The corpora in
// testdata (blocked.txt, allowed.txt) and the refusal texts they get
// (refusals.golden) are the policy's reference.
package policy

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// Limits that bound the time one Check can take, whatever the input: the
// policy refuses (UNSAFE_COMMAND) rather than spends unbounded time.
const (
	// MaxCommandBytes is the largest command the policy judges: just under
	// the kernel's limit for one argument (MAX_ARG_STRLEN, 128 KiB), which
	// no `<shell> -c <command>` can exceed anyway.
	MaxCommandBytes = 128<<10 - 1024
	// MaxNesting bounds `bash -c '...'`, trap, alias and heredoc-into-shell
	// scripts judged inside one another.
	MaxNesting = 8
	// maxVisits bounds the statements and word parts visited, counting
	// re-visits of loop bodies while following directory changes.
	maxVisits = 200_000
	// parseBytesPerVisit is how many bytes of parsed code count as one
	// visit.
	parseBytesPerVisit = 64
	// maxJudgeTime bounds the wall-clock time of one judgement, a backstop
	// for work the visit count misses.
	maxJudgeTime = time.Second
	// clockEvery is how many visits pass between looks at the clock.
	clockEvery = 256
	// maxCwds bounds the working directories followed at once (branches
	// that cd to different places).
	maxCwds = 16
)

// Rule names, as they appear at the start of a refusal's message.
const (
	RulePrivilege      = "privilege-escalation"
	RuleDestructive    = "destructive-delete"
	RuleDisk           = "disk-overwrite"
	RuleForkBomb       = "fork-bomb"
	RulePipeToShell    = "pipe-to-shell"
	RuleDownloadExec   = "download-and-execute"
	RuleNetwork        = "network-tampering"
	RuleRemoteAccess   = "remote-access"
	RuleSystemControl  = "system-control"
	RuleSystemWrite    = "system-write"
	RuleEscape         = "workspace-escape"
	RuleUnjudgeable    = "unjudgeable"
	RuleTooLarge       = "too-large"
	RuleAllowedPattern = "allow-pattern" // never a refusal; documented for logs
)

// Policy is the command safety policy. It parses a command with a real shell
// parser (mvdan.cc/sh, bash dialect) and judges every command that would
// run: in pipelines, lists, subshells, command and process substitutions,
// function bodies, `bash -c '<literal>'` and heredocs fed to a shell
// (recursively), and behind wrappers (env, nice, timeout, nohup, xargs,
// exec, command, find -exec, ...). Quoting tricks therefore change nothing:
// `s""udo`, `\sudo` and `$'\x73udo'` are all `sudo`, while
// `git commit -m "fix su bug"` runs git. What it cannot judge statically
// (a program name computed by an expansion, eval, code piped into a shell)
// it refuses as UNSAFE_COMMAND; what matches a dangerous category it
// refuses as DANGEROUS_OPERATION. Heredoc bodies are data unless a shell
// reads them.
//
// With escape checks on (software mode, where no namespace confines the
// command) it also refuses cd/pushd out of the boundary, `..` leading past
// it, `~`/$HOME paths that lead out, and any shell or interpreter reading
// the program it runs from stdin (bwrap mode allows that).
//
// It follows what it needs to judge code that does not stand in the
// command as written: the stdin each command really reads (through bash -c,
// env -S, substitutions, >(...), xargs), the environment (the request's env
// and every assignment: code-carrying variables, GIT_CONFIG_* pairs,
// BASH_ENV, PS4), git settings and options that run commands, what find
// -exec's {} stands for, links made by ln and symlinks on disk, paths
// computed from PWD and HOME, and which variables hold values that bash may
// evaluate as arithmetic (where a[$(cmd)] runs cmd).
//
// What it does not judge, by design: code in other languages (python -c,
// node -e, awk's system(), perl -e), scripts, Makefiles and config files on
// disk (running ./build.sh is allowed like any program), and data computed
// at run time where it is only data. The policy is a guard rail and a
// clear refusal message; the isolation boundary is bwrap.
//
// A Policy is immutable and safe for concurrent use.
type Policy struct {
	allow   []*regexp.Regexp
	escapes bool
}

// New compiles a policy with allow patterns (regular expressions; a
// simple command whose words, joined by spaces, match one is not judged:
// sandbox.PolicyConfig.Allow). Escape checks are off; WithEscapeChecks
// turns them on.
func New(allow ...string) (*Policy, error) {
	p := &Policy{}
	for _, a := range allow {
		re, err := regexp.Compile(a)
		if err != nil {
			return nil, fmt.Errorf("invalid policy allow pattern %q: %v", a, err)
		}
		p.allow = append(p.allow, re)
	}
	return p, nil
}

// WithEscapeChecks returns a copy of p that also refuses workspace escapes
// (cd out, `..` past the boundary, `~`/$HOME leading out), as software mode
// does.
func (p *Policy) WithEscapeChecks(on bool) *Policy {
	q := *p
	q.escapes = on
	return &q
}

// Check judges command as run from the boundary directory itself. It
// returns nil or an *errcode.Error with Code DangerousOperation or
// UnsafeCommand, Command set, and a Msg that starts with the rule name.
func (p *Policy) Check(command, boundary string) error {
	return p.CheckScript(Parse(command), nil, boundary, boundary)
}

// CheckDir is Check for a command run from dir, a directory inside
// boundary.
func (p *Policy) CheckDir(command, dir, boundary string) error {
	return p.CheckScript(Parse(command), nil, dir, boundary)
}

// CheckEnv is CheckDir for a command that also gets env (an exec request's
// environment): values that programs run as code (PAGER, GIT_SSH_COMMAND,
// GIT_CONFIG_KEY_n/VALUE_n, ...) are judged like the same assignments
// written before the command. Names the executor drops (DeniedEnv) are
// not judged.
func (p *Policy) CheckEnv(command string, env map[string]string, dir, boundary string) error {
	return p.CheckScript(Parse(command), env, dir, boundary)
}

// CheckScript is CheckEnv for a command already parsed: the executor
// parses each command once, judges it here and reads the same Script for
// its direct path.
func (p *Policy) CheckScript(s *Script, env map[string]string, dir, boundary string) error {
	_, err := p.judge(s, env, dir, boundary, maxJudgeTime)
	return err
}

// judge is CheckScript with the time limit given; it also returns the
// checker, whose counters tell the work done.
func (p *Policy) judge(s *Script, env map[string]string, dir, boundary string, limit time.Duration) (*checker, error) {
	c := &checker{p: p, src: s.src, boundary: path.Clean(boundary),
		funcs: map[string]bool{}, downloads: map[string]bool{}}
	c.st = state{cwds: []string{path.Clean(dir)}, home: path.Clean(dir)}
	c.deadline = time.Now().Add(limit)
	return c, c.run(s, env)
}

func (c *checker) run(s *Script, env map[string]string) error {
	if len(s.src) > MaxCommandBytes {
		return c.unsafe(RuleTooLarge, "the command is %d bytes; the policy judges at most %d", len(s.src), MaxCommandBytes)
	}
	err := c.envGroup(mapGroup(env), true)
	if err == nil {
		// The command's own script, parsed by Parse, counts against the
		// budget like a nested one (script).
		err = c.spend(len(s.src)/parseBytesPerVisit + 1)
	}
	if err == nil {
		err = c.judgeFile(s.src, s.file, s.err, 0, surroundings{})
	}
	switch err {
	case errBudget:
		return c.unsafe(RuleUnjudgeable, "the command is too complex to judge")
	case errSlow:
		return c.unsafe(RuleUnjudgeable, "the command took too long to judge")
	}
	return err
}

// state is what the checker follows through the script: the possible
// working directories ("" = unknown) and HOME ("" = unknown).
type state struct {
	cwds []string
	home string
}

func (s state) clone() state {
	return state{cwds: append([]string(nil), s.cwds...), home: s.home}
}

func (s *state) union(o state) {
	for _, d := range o.cwds {
		found := false
		for _, e := range s.cwds {
			if e == d {
				found = true
				break
			}
		}
		if !found {
			s.cwds = append(s.cwds, d)
		}
	}
	if s.home != o.home {
		s.home = ""
	}
	if len(s.cwds) > maxCwds {
		s.cwds = []string{""}
	}
}

func (s state) equal(o state) bool {
	if s.home != o.home || len(s.cwds) != len(o.cwds) {
		return false
	}
	for i := range s.cwds {
		if s.cwds[i] != o.cwds[i] {
			return false
		}
	}
	return true
}

// surroundings is what a statement's surroundings tell about it: where its
// stdin comes from, whether it runs in the background, in a function, in a
// loop. The checker hands it down (as x) to what it judges next.
type surroundings struct {
	pipedIn      bool             // stdin is a pipe
	pipeDownload bool             // what feeds that pipe downloads something
	stdinFile    bool             // stdin is a file or descriptor redirected by an enclosing command
	stdinHdoc    *syntax.Word     // stdin is this heredoc or here-string of an enclosing command
	moreArgs     bool             // xargs appends words read from its input
	repl         string           // the string xargs -I replaces with its input ("" for none)
	self         *syntax.CallExpr // the simple command whose words these are (for >(...): does it download?)
	bg           bool             // runs concurrently (pipeline side, background)
	inFunc       string           // name of the function whose body this is
	external     bool             // run by a wrapper program: shell functions do not apply
	infLoop      bool             // inside a loop without an exit condition
}

// inheritedStdin is the stdin that code run by a command (bash -c, env -S, a
// command substitution) inherits: the command's own redirection if it has
// one, else what the command itself inherited.
func inheritedStdin(x surroundings, sio *stmtIO) surroundings {
	in := surroundings{pipedIn: x.pipedIn, pipeDownload: x.pipeDownload, stdinFile: x.stdinFile, stdinHdoc: x.stdinHdoc}
	if sio != nil && sio.hdoc != nil {
		return surroundings{stdinHdoc: sio.hdoc}
	}
	if sio != nil && sio.stdinFile {
		return surroundings{stdinFile: true}
	}
	return in
}

// unknownStdin is the surroundings of code run by another program with input
// the policy does not see (a pager, an editor, a function or alias body that
// may be called from a pipeline): stdin counts as a pipe of data.
var unknownStdin = surroundings{pipedIn: true}

// io is what a simple command's redirections tell about it.
type stmtIO struct {
	stdinFile  bool         // `< file`
	hdoc       *syntax.Word // heredoc or here-string body
	stdoutFile string       // literal `> file` target, for download tracking
}

type checker struct {
	p         *Policy
	src       string
	boundary  string
	depth     int
	visits    int
	funcs     map[string]bool
	aliases   map[string]string // aliases defined in the script: name -> value
	inAlias   map[string]bool   // aliases being expanded (aliasCall)
	downloads map[string]bool
	env       map[string]envVal     // variables assigned for the rest of the script
	links     map[string]string     // links created by ln: absolute link -> target ("" = computed)
	vars      map[string]bool       // variables assigned in the script: true = safe for arithmetic
	assoc     map[string]bool       // associative arrays (their subscripts are strings)
	ints      map[string]bool       // integer variables (declare -i: assignments are arithmetic)
	hdocs     map[*syntax.Word]bool // heredocs already judged as scripts
	execStdin bool                  // `exec <file` (or <&N, <<EOF) replaced stdin for the rest of the script
	st        state
	deadline  time.Time            // when the judgement gives up (errSlow)
	nextClock int                  // visits at which to look at the clock again
	dl        map[syntax.Node]bool // containsDownloader's answers, so each node is walked once
	fs        map[string]fsEntry   // Lstat/Readlink answers for this judgement
	fsCalls   int                  // Lstat, Readlink and Stat calls made
}

type budgetError struct{}

func (budgetError) Error() string { return "budget" }

var errBudget error = budgetError{}

type slowError struct{}

func (slowError) Error() string { return "slow" }

var errSlow error = slowError{}

// spend counts n visits of work (statements, word parts, nodes walked,
// file system calls) against maxVisits, and now and then looks whether the
// judgement is past its deadline.
func (c *checker) spend(n int) error {
	c.visits += n
	if c.visits > maxVisits {
		return errBudget
	}
	if c.visits >= c.nextClock {
		c.nextClock = c.visits + clockEvery
		if time.Now().After(c.deadline) {
			return errSlow
		}
	}
	return nil
}

// RefusalPrefix starts every refusal text a client sees, on MCP and SSH
// alike; RefusalText adds the code in parentheses.
const RefusalPrefix = "Dangerous operation blocked"

// RefusalText is the text clients see for a command the policy refused:
// "Dangerous operation blocked (<CODE>): <rule>: <why>", with CODE
// DANGEROUS_OPERATION or UNSAFE_COMMAND. ok is false for any other error.
// Every face (MCP exec, SSH exec/shell) words refusals with it, so that a
// client can match on the prefix and the code alike.
func RefusalText(err error) (text string, ok bool) {
	var e *errcode.Error
	if !errors.As(err, &e) || (e.Code != errcode.DangerousOperation && e.Code != errcode.UnsafeCommand) {
		return "", false
	}
	msg := e.Msg
	if msg == "" {
		msg = e.Error()
	}
	return RefusalPrefix + " (" + string(e.Code) + "): " + msg, true
}

func (c *checker) refuse(code errcode.Code, rule, format string, args ...any) error {
	return &errcode.Error{Code: code, Op: "exec", Command: c.src,
		Msg: rule + ": " + fmt.Sprintf(format, args...)}
}

func (c *checker) danger(rule, format string, args ...any) error {
	return c.refuse(errcode.DangerousOperation, rule, format, args...)
}

func (c *checker) unsafe(rule, format string, args ...any) error {
	return c.refuse(errcode.UnsafeCommand, rule, format, args...)
}

// script parses and judges a nested script (bash -c, a heredoc fed to a
// shell, a trap, an alias, ...).
func (c *checker) script(src string, depth int, in surroundings) error {
	if depth > MaxNesting {
		return c.unsafe(RuleUnjudgeable, "shell code nested more than %d levels deep", MaxNesting)
	}
	// Parsing counts against the budget too: code judged again and again
	// (a heredoc read by several shells, find -exec per start point) must
	// not cost more than the budget allows. It is counted before the parse,
	// so that the budget stops a judgement before it parses too much.
	if err := c.spend(len(src)/parseBytesPerVisit + 1); err != nil {
		return err
	}
	f, err := parse(src)
	return c.judgeFile(src, f, err, depth, in)
}

// judgeFile judges a script src parsed into f (or err) at nesting depth
// depth.
func (c *checker) judgeFile(src string, f *syntax.File, err error, depth int, in surroundings) error {
	if err != nil {
		return c.unsafe(RuleUnjudgeable, "cannot parse the command: %v", err)
	}
	if why := readsDifferently(src, f); why != "" {
		return c.unsafe(RuleUnjudgeable, "%s", why)
	}
	saved := c.depth
	c.depth = depth
	defer func() { c.depth = saved }()
	return c.stmts(f.Stmts, in)
}

func (c *checker) stmts(list []*syntax.Stmt, x surroundings) error {
	for _, s := range list {
		if err := c.stmt(s, x); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) stmt(s *syntax.Stmt, x surroundings) error {
	if err := c.spend(1); err != nil {
		return err
	}
	if s.Background || s.Coprocess {
		if x.infLoop {
			return c.danger(RuleForkBomb, "a loop without an exit condition starts background jobs")
		}
		x.bg = true
		saved := c.st.clone()
		defer func() { c.st = saved }()
	}
	if ce, ok := s.Cmd.(*syntax.CallExpr); ok {
		x.self = ce
	}
	var sio stmtIO
	for _, r := range s.Redirs {
		if err := c.redirect(r, &sio, x); err != nil {
			return err
		}
	}
	switch cmd := s.Cmd.(type) {
	case nil:
		return nil
	case *syntax.CallExpr:
		if len(cmd.Args) == 1 && (sio.stdinFile || sio.hdoc != nil) {
			if v, ok := litWord(cmd.Args[0]); ok && v == "exec" {
				c.execStdin = true
			}
		}
		return c.call(cmd, x, &sio)
	case *syntax.BinaryCmd:
		return c.binary(cmd, x)
	case *syntax.Subshell:
		saved := c.st.clone()
		err := c.stmts(cmd.Stmts, x)
		c.st = saved
		return err
	case *syntax.Block:
		return c.stmts(cmd.Stmts, x)
	case *syntax.IfClause:
		return c.ifClause(cmd, x)
	case *syntax.WhileClause:
		inf := isTrueCond(cmd.Cond, cmd.Until)
		return c.loop(x, inf, func(x surroundings) error {
			if err := c.stmts(cmd.Cond, x); err != nil {
				return err
			}
			return c.stmts(cmd.Do, x)
		})
	case *syntax.ForClause:
		inf := false
		switch l := cmd.Loop.(type) {
		case *syntax.WordIter:
			safe := !cmd.Select
			for _, w := range l.Items {
				if err := c.embedded(w, x); err != nil {
					return err
				}
				if hasFileGlob(w) || !c.valueSafe(w) {
					safe = false // file names or data
				}
			}
			if l.Name != nil {
				c.setVar(l.Name.Value, safe && len(l.Items) > 0)
			}
		case *syntax.CStyleLoop:
			inf = l.Cond == nil
			for _, n := range []syntax.ArithmExpr{l.Init, l.Cond, l.Post} {
				if n != nil && !isNilArith(n) {
					if err := c.arith(n); err != nil {
						return err
					}
					if err := c.embedded(n, x); err != nil {
						return err
					}
				}
			}
		}
		return c.loop(x, inf, func(x surroundings) error { return c.stmts(cmd.Do, x) })
	case *syntax.CaseClause:
		if err := c.embedded(cmd.Word, x); err != nil {
			return err
		}
		before := c.st.clone()
		after := before.clone()
		for _, it := range cmd.Items {
			for _, p := range it.Patterns {
				if err := c.embedded(p, x); err != nil {
					return err
				}
			}
			c.st = before.clone()
			if err := c.stmts(it.Stmts, x); err != nil {
				return err
			}
			after.union(c.st)
		}
		c.st = after
		return nil
	case *syntax.FuncDecl:
		name := ""
		if cmd.Name != nil {
			name = cmd.Name.Value
		}
		c.funcs[name] = true
		saved := c.st.clone()
		// The body runs wherever the function is called, maybe in a
		// pipeline: judge it with stdin unknown.
		fx := unknownStdin
		fx.inFunc = name
		err := c.stmt(cmd.Body, fx)
		c.st = saved
		return err
	case *syntax.ArithmCmd:
		if err := c.arith(cmd.X); err != nil {
			return err
		}
		return c.embedded(cmd.X, x)
	case *syntax.LetClause:
		for _, e := range cmd.Exprs {
			if err := c.arith(e); err != nil {
				return err
			}
			if err := c.embedded(e, x); err != nil {
				return err
			}
		}
		return nil
	case *syntax.TestClause:
		if err := c.testArith(cmd.X); err != nil {
			return err
		}
		return c.embedded(cmd.X, x)
	case *syntax.DeclClause:
		return c.decl(cmd, x)
	case *syntax.TimeClause:
		if cmd.Stmt == nil {
			return nil
		}
		// bash 5.2 takes `time -- cmd` and `time -p -- cmd`: the -- is
		// not the program.
		if ce, ok := cmd.Stmt.Cmd.(*syntax.CallExpr); ok && len(ce.Args) > 0 {
			if v, ok := litWord(ce.Args[0]); ok && v == "--" {
				ce2 := *ce
				ce2.Args = ce.Args[1:]
				st2 := *cmd.Stmt
				st2.Cmd = &ce2
				return c.stmt(&st2, x)
			}
		}
		return c.stmt(cmd.Stmt, x)
	case *syntax.CoprocClause:
		x.bg = true
		x.pipedIn, x.pipeDownload, x.stdinFile, x.stdinHdoc = true, false, false, nil
		saved := c.st.clone()
		err := c.stmt(cmd.Stmt, x)
		c.st = saved
		return err
	default:
		return c.unsafe(RuleUnjudgeable, "unsupported shell construct %T", cmd)
	}
}

func isNilArith(n syntax.Node) bool {
	switch v := n.(type) {
	case *syntax.Word:
		return v == nil
	case *syntax.BinaryArithm:
		return v == nil
	case *syntax.UnaryArithm:
		return v == nil
	case *syntax.ParenArithm:
		return v == nil
	}
	return false
}

// isTrueCond reports a loop condition that never ends the loop: `while
// true`, `while :`, `until false`.
func isTrueCond(cond []*syntax.Stmt, until bool) bool {
	if len(cond) != 1 {
		return false
	}
	call, ok := cond[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) != 1 {
		return false
	}
	v, ok := litWord(call.Args[0])
	if !ok {
		return false
	}
	if until {
		return v == "false"
	}
	return v == "true" || v == ":"
}

// loop judges a loop body, re-running it until the followed directories
// settle (a `cd ..` in a loop may climb any number of levels).
func (c *checker) loop(x surroundings, infinite bool, body func(surroundings) error) error {
	if infinite {
		x.infLoop = true
	}
	acc := c.st.clone()
	for i := 0; i < 4; i++ {
		if err := body(x); err != nil {
			return err
		}
		next := acc.clone()
		next.union(c.st)
		if next.equal(acc) {
			c.st = acc
			return nil
		}
		acc = next
		c.st = acc.clone()
	}
	if c.p.escapes {
		return c.unsafe(RuleUnjudgeable, "directory changes inside a loop cannot be followed")
	}
	c.st = state{cwds: []string{""}}
	return nil
}

func (c *checker) ifClause(ic *syntax.IfClause, x surroundings) error {
	if err := c.stmts(ic.Cond, x); err != nil {
		return err
	}
	before := c.st.clone()
	if err := c.stmts(ic.Then, x); err != nil {
		return err
	}
	after := c.st.clone()
	c.st = before
	if ic.Else != nil {
		if ic.Else.ThenPos.IsValid() { // elif
			if err := c.ifClause(ic.Else, x); err != nil {
				return err
			}
		} else if err := c.stmts(ic.Else.Then, x); err != nil {
			return err
		}
	}
	after.union(c.st)
	c.st = after
	return nil
}

func (c *checker) binary(b *syntax.BinaryCmd, x surroundings) error {
	switch b.Op {
	case syntax.Pipe, syntax.PipeAll:
		// Each side of a pipe runs in a subshell: directory changes do not
		// survive it, and what feeds the right side matters for shells.
		saved := c.st.clone()
		lx := x
		lx.bg = true
		if err := c.stmt(b.X, lx); err != nil {
			return err
		}
		c.st = saved.clone()
		rx := x
		rx.bg = true
		rx.pipedIn = true
		// containsDownloader remembers its answer for b.X, so a long
		// pipeline's left side is walked once, not once per |.
		rx.pipeDownload = x.pipeDownload || c.containsDownloader(b.X)
		rx.stdinFile, rx.stdinHdoc = false, nil
		err := c.stmt(b.Y, rx)
		c.st = saved
		return err
	default: // && and ||: Y may or may not run
		if err := c.stmt(b.X, x); err != nil {
			return err
		}
		afterX := c.st.clone()
		if err := c.stmt(b.Y, x); err != nil {
			return err
		}
		c.st.union(afterX)
		return nil
	}
}

func (c *checker) decl(d *syntax.DeclClause, x surroundings) error {
	assoc, integer, nameref := false, false, false
	for _, a := range d.Args {
		if !a.Naked || a.Name != nil || a.Value == nil {
			continue
		}
		v, ok := litWord(a.Value)
		switch {
		case !ok:
			if err := c.nameArg(a.Value, d.Variant.Value); err != nil {
				return err
			}
		case strings.HasPrefix(v, "-"):
			assoc = assoc || strings.Contains(v, "A")
			integer = integer || strings.Contains(v, "i")
			nameref = nameref || d.Variant.Value != "export" && d.Variant.Value != "readonly" && strings.Contains(v, "n")
		default:
			// declare 'a[$(cmd)]=1': a name bash reads from the word.
			name, _, _ := strings.Cut(v, "=")
			if err := c.nameArg(&syntax.Word{Parts: []syntax.WordPart{&syntax.SglQuoted{Value: name}}}, d.Variant.Value); err != nil {
				return err
			}
		}
	}
	if nameref {
		// A nameref makes every use of its name a use of the variable it
		// names: a[$(cmd)] runs cmd, BASH_CMDS rebinds programs. Only a
		// plain, literal name is judged.
		for _, a := range d.Args {
			if a.Name == nil {
				continue
			}
			v, ok := "", false
			if a.Value != nil && !a.Naked {
				v, ok = litWord(a.Value)
			}
			if !ok || !ValidEnvName(v) || shellTables[v] {
				return c.unsafe(RuleUnjudgeable, "%s -n %s names a variable the policy cannot follow", d.Variant.Value, a.Name.Value)
			}
		}
	}
	for _, a := range d.Args {
		if a.Name == nil {
			continue
		}
		if assoc {
			if c.assoc == nil {
				c.assoc = map[string]bool{}
			}
			c.assoc[a.Name.Value] = true
		}
		if integer {
			if c.ints == nil {
				c.ints = map[string]bool{}
			}
			c.ints[a.Name.Value] = true
		}
	}
	for _, a := range d.Args {
		if err := c.assign(a, x, true); err != nil {
			return err
		}
	}
	return c.envGroup(assignGroup(d.Args), true)
}

// assign judges an assignment's value and follows HOME and CDPATH.
func (c *checker) assign(a *syntax.Assign, x surroundings, persistent bool) error {
	if a.Value != nil {
		if err := c.embedded(a.Value, x); err != nil {
			return err
		}
	}
	if a.Array != nil {
		if err := c.embedded(a.Array, x); err != nil {
			return err
		}
	}
	if a.Index != nil {
		if a.Name == nil || !c.assoc[a.Name.Value] {
			if err := c.arith(a.Index); err != nil {
				return err
			}
		}
		if err := c.embedded(a.Index, x); err != nil {
			return err
		}
	}
	if a.Name != nil && shellTables[a.Name.Value] {
		return c.unsafe(RuleUnjudgeable, "assigning %s rebinds command names to other programs", a.Name.Value)
	}
	if a.Name != nil && !a.Naked {
		safe := c.valueSafe(a.Value)
		if c.ints[a.Name.Value] && !safe && a.Value != nil {
			return c.unsafe(RuleUnjudgeable, "%s is an integer variable: assigning %s evaluates data the policy cannot see as arithmetic", a.Name.Value, wordSource(a.Value))
		}
		if a.Array != nil {
			for _, el := range a.Array.Elems {
				if el.Index != nil && !c.assoc[a.Name.Value] {
					if err := c.arith(el.Index); err != nil {
						return err
					}
				}
				if el.Value != nil && (!c.valueSafe(el.Value) || wordValue(el.Value).glob) {
					safe = false
				}
			}
		}
		if a.Append {
			safe = safe && c.varSafe(a.Name.Value, 0)
		}
		if persistent || !safe {
			c.setVar(a.Name.Value, safe)
		}
	}
	if a.Name == nil || !persistent {
		return nil
	}
	switch a.Name.Value {
	case "HOME":
		v, ok := "", false
		if a.Value != nil {
			v, ok = c.pathWord(a.Value)
		}
		if ok && v != "" {
			c.st.home = c.abs(v, c.st.cwds[0])
		} else {
			c.st.home = ""
		}
	case "CDPATH":
		if c.p.escapes {
			return c.danger(RuleEscape, "setting CDPATH makes cd leave the workspace unseen")
		}
	}
	return nil
}

// redirect judges one redirection: its words, its target and what it feeds.
func (c *checker) redirect(r *syntax.Redirect, sio *stmtIO, x surroundings) error {
	if r.Word != nil {
		if err := c.embedded(r.Word, x); err != nil {
			return err
		}
	}
	if r.Hdoc != nil {
		// The body is data, but an unquoted heredoc still expands $(...).
		if err := c.embedded(r.Hdoc, x); err != nil {
			return err
		}
	}
	fd0 := r.N == nil || r.N.Value == "0"
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc:
		if fd0 {
			sio.hdoc = r.Hdoc
		}
		return nil
	case syntax.WordHdoc:
		if fd0 {
			sio.hdoc = r.Word
		}
		return nil
	}
	target, ok := litWord(r.Word)
	if isNetDev(target) {
		return c.danger(RuleRemoteAccess, "bash network redirection to %s (a reverse shell or raw socket)", target)
	}
	switch r.Op {
	case syntax.RdrIn, syntax.DplIn:
		if fd0 && !(r.Op == syntax.DplIn && ok && target == "-") {
			sio.stdinFile = true
		}
	case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.RdrAll, syntax.AppAll, syntax.RdrInOut, syntax.DplOut:
		if !ok {
			if v, known := c.evalPath(r.Word); known && v != "" {
				return c.writePath(v, "redirection")
			}
			return nil
		}
		if target == "-" || isDigits(target) {
			return nil
		}
		if r.Op == syntax.RdrInOut && fd0 {
			sio.stdinFile = true
		}
		if r.N == nil || r.N.Value == "1" {
			sio.stdoutFile = target
		}
		return c.writeTarget(r.Word, "redirection")
	}
	return nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func isNetDev(p string) bool {
	return strings.HasPrefix(p, "/dev/tcp/") || strings.HasPrefix(p, "/dev/udp/")
}

// embedded judges the commands hidden in a word, assignment, arithmetic or
// test expression: command and process substitutions, at any depth. They
// run in subshells, so directory changes inside do not leak out.
func (c *checker) embedded(n syntax.Node, x surroundings) error {
	var err error
	syntax.Walk(n, func(n syntax.Node) bool {
		if err != nil {
			return false
		}
		if err = c.spend(1); err != nil {
			return false
		}
		switch s := n.(type) {
		case *syntax.ArithmExp:
			if err = c.arith(s.X); err != nil {
				return false
			}
		case *syntax.ParamExp:
			if err = c.paramCheck(s); err != nil {
				return false
			}
		}
		var list []*syntax.Stmt
		// A substitution reads the stdin of the command around it; >(...)
		// reads what that command writes.
		in := inheritedStdin(x, nil)
		switch s := n.(type) {
		case *syntax.CmdSubst:
			list = s.Stmts
		case *syntax.ProcSubst:
			list = s.Stmts
			if s.Op == syntax.CmdOut {
				in = surroundings{pipedIn: true, pipeDownload: x.pipeDownload || x.self != nil && c.containsDownloader(x.self)}
			}
		default:
			return true
		}
		in.inFunc = x.inFunc
		saved := c.st.clone()
		err = c.stmts(list, in)
		c.st = saved
		return false
	})
	return err
}

// call judges a simple command: its assignments and words, then the program.
func (c *checker) call(ce *syntax.CallExpr, x surroundings, sio *stmtIO) error {
	persistent := len(ce.Args) == 0
	savedHome := c.st.home
	for _, a := range ce.Assigns {
		if err := c.assign(a, x, true); err != nil {
			return err
		}
	}
	if err := c.envGroup(assignGroup(ce.Assigns), persistent); err != nil {
		return err
	}
	if persistent {
		return nil
	}
	for _, w := range ce.Args {
		if err := c.embedded(w, x); err != nil {
			return err
		}
	}
	err := c.simple(ce.Args, x, sio)
	if len(ce.Assigns) > 0 && !persistent {
		c.st.home = savedHome // `HOME=x cmd` lasts for cmd only
	}
	return err
}

// containsDownloader reports whether n runs a program that fetches from the
// network (curl, wget, ...). Each node walked counts as a visit (the budget
// is looked at by the caller's next statement or word part), and the answer
// is remembered per node: a pipeline asks about its growing left side at
// every |, and the walk stops at a statement already answered.
func (c *checker) containsDownloader(n syntax.Node) bool {
	if v, ok := c.dl[n]; ok {
		return v
	}
	found := false
	syntax.Walk(n, func(m syntax.Node) bool {
		if found || m == nil {
			return false
		}
		c.visits++
		if m != n {
			if v, ok := c.dl[m]; ok {
				found = v
				return false
			}
		}
		if ce, ok := m.(*syntax.CallExpr); ok {
			for _, w := range ce.Args {
				if v, ok := litWord(w); ok && downloaders[path.Base(v)] {
					found = true
					return false
				}
			}
		}
		return true
	})
	if c.dl == nil {
		c.dl = map[syntax.Node]bool{}
	}
	c.dl[n] = found
	return found
}

// wordHasDownloadSubst reports a word whose value comes from $(curl ...)
// or <(curl ...).
func (c *checker) wordHasDownloadSubst(w *syntax.Word) bool {
	found := false
	syntax.Walk(w, func(n syntax.Node) bool {
		if n != nil {
			c.visits++
		}
		switch s := n.(type) {
		case *syntax.CmdSubst:
			if c.containsDownloader(s) {
				found = true
			}
			return false
		case *syntax.ProcSubst:
			if c.containsDownloader(s) {
				found = true
			}
			return false
		}
		return !found
	})
	return found
}

// abs makes p absolute against dir and cleans it. An unknown dir ("")
// leaves a relative p unknown ("").
func (c *checker) abs(p, dir string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	if dir == "" {
		return ""
	}
	return path.Join(dir, p)
}

// inside reports whether absolute p lies in the boundary.
func (c *checker) inside(p string) bool { return Within(c.boundary, p) }

// Within reports whether p is root or below it (both clean and absolute).
func Within(root, p string) bool {
	if root == "/" {
		return true
	}
	return p == root || (strings.HasPrefix(p, root) && p[len(root)] == '/')
}

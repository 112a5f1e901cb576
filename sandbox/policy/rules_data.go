package policy

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Code that bash itself evaluates from data: an arithmetic context (
// $((x)), ((x)), let, for ((;;)), [[ x -eq y ]], array subscripts,
// ${x:off:len}) evaluates the value of every variable it names as an
// expression, and a[$(cmd)] in that value runs cmd; ${!x} and printf -v,
// read, unset, declare with a computed name do the same with the name;
// ${x@P} expands a value like a prompt, $(...) included. The checker
// follows which variables hold values it has judged safe (numbers,
// arithmetic results, literal text without [ $ or `, counts from a few
// tools) and refuses these contexts on anything else.

// safeSpecial are parameters bash itself sets to numbers or flags.
var safeSpecial = set("#", "?", "$", "!", "-", "RANDOM", "SRANDOM", "SECONDS", "LINENO", "BASHPID",
	"PPID", "UID", "EUID", "EPOCHSECONDS", "EPOCHREALTIME", "OPTIND", "BASH_SUBSHELL", "SHLVL",
	"HISTCMD", "COLUMNS", "LINES", "PIPESTATUS", "BASH_LINENO")

// numericTools print numbers (for static arguments): their output may be
// used in arithmetic. stat, grep and git count only with the options
// numericOutput checks.
var numericTools = set("wc", "nproc", "date", "id", "expr", "seq", "getconf", "echo", "printf", "stat", "grep", "git")

// hasFileGlob reports an unquoted *, ? or [ in w: pathname expansion,
// whose results are file names (data).
func hasFileGlob(w *syntax.Word) bool {
	for _, part := range w.Parts {
		if l, ok := part.(*syntax.Lit); ok && strings.ContainsAny(l.Value, "*?[") {
			return true
		}
		if _, ok := part.(*syntax.ExtGlob); ok {
			return true
		}
	}
	return false
}

const maxVarDepth = 16

// varSafe reports whether variable name holds a value arithmetic may
// evaluate: one the checker judged when it was assigned, one of the
// exec request's variables with such a value, or one nobody set in this
// command (empty, or the daemon's own PATH/HOME/... ).
func (c *checker) varSafe(name string, depth int) bool {
	if safeSpecial[name] {
		return true
	}
	if isDigits(name) || name == "@" || name == "*" {
		return false // positional parameters: arguments the policy does not follow
	}
	if depth > maxVarDepth {
		return false
	}
	if v, ok := c.vars[name]; ok {
		return v
	}
	if e, ok := c.env[name]; ok {
		return !e.computed && c.textSafe(e.val, depth+1)
	}
	return true
}

// textSafe reports whether arithmetic may evaluate the literal text s:
// no subscript, expansion or backquote, and every name in it safe.
func (c *checker) textSafe(s string, depth int) bool {
	if strings.ContainsAny(s, "[$`") {
		return false
	}
	for i := 0; i < len(s); {
		ch := s[i]
		switch {
		case ch >= '0' && ch <= '9':
			// a number, with its base and digits: 0x1f, 16#ff, 2#101
			for i < len(s) && (isIdentByte(s[i]) || s[i] == '#' || s[i] == '@') {
				i++
			}
		case isIdentByte(ch):
			j := i
			for j < len(s) && isIdentByte(s[j]) {
				j++
			}
			if !c.varSafe(s[i:j], depth+1) {
				return false
			}
			i = j
		default:
			i++
		}
	}
	return true
}

func isIdentByte(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// valueSafe reports whether a word's value may be evaluated as arithmetic.
func (c *checker) valueSafe(w *syntax.Word) bool {
	if w == nil {
		return true
	}
	for _, part := range w.Parts {
		if !c.partSafe(part) {
			return false
		}
	}
	return true
}

func (c *checker) partSafe(part syntax.WordPart) bool {
	switch p := part.(type) {
	case *syntax.Lit:
		return c.textSafe(unescapeUnquoted(p.Value), 0)
	case *syntax.SglQuoted:
		if p.Dollar {
			return c.textSafe(decodeANSIC(p.Value), 0)
		}
		return c.textSafe(p.Value, 0)
	case *syntax.DblQuoted:
		for _, q := range p.Parts {
			if l, ok := q.(*syntax.Lit); ok {
				if !c.textSafe(unescapeDouble(l.Value), 0) {
					return false
				}
			} else if !c.partSafe(q) {
				return false
			}
		}
		return true
	case *syntax.ArithmExp:
		return true // a number (the expression is judged where it stands)
	case *syntax.ParamExp:
		return c.paramSafe(p)
	case *syntax.CmdSubst:
		return c.numericSubst(p)
	}
	return false
}

// paramSafe reports whether the value of a parameter expansion may be
// evaluated as arithmetic.
func (c *checker) paramSafe(p *syntax.ParamExp) bool {
	if p.Length {
		return true
	}
	if p.Param == nil || p.Excl || p.NestedParam != nil || p.Repl != nil {
		return false
	}
	if p.Exp != nil {
		switch p.Exp.Op {
		case syntax.DefaultUnset, syntax.DefaultUnsetOrNull, syntax.AlternateUnset, syntax.AlternateUnsetOrNull,
			syntax.AssignUnset, syntax.AssignUnsetOrNull, syntax.ErrorUnset, syntax.ErrorUnsetOrNull:
			if !c.valueSafe(p.Exp.Word) {
				return false
			}
		case syntax.OtherParamOps:
			return false
		}
	}
	return c.varSafe(p.Param.Value, 0)
}

// numericSubst reports a command substitution that prints a number: the
// last command of its last statement is a numeric tool with static
// arguments.
func (c *checker) numericSubst(cs *syntax.CmdSubst) bool {
	if len(cs.Stmts) == 0 {
		return true
	}
	cmd := cs.Stmts[len(cs.Stmts)-1].Cmd
	for {
		b, ok := cmd.(*syntax.BinaryCmd)
		if !ok || (b.Op != syntax.Pipe && b.Op != syntax.PipeAll) {
			break
		}
		cmd = b.Y.Cmd
	}
	ce, ok := cmd.(*syntax.CallExpr)
	if !ok || len(ce.Args) == 0 {
		return false
	}
	name, ok := litWord(ce.Args[0])
	if !ok || !numericTools[path.Base(name)] {
		return false
	}
	// Tools that print only a count may count files named at run time;
	// the others print their arguments, which must be static.
	base := path.Base(name)
	countOnly := base == "stat" || base == "grep" || base == "git"
	var vals []string
	for _, w := range ce.Args[1:] {
		i := wordValue(w)
		if hasFileGlob(w) {
			return false // several files: grep -c prints their names
		}
		if !i.ok || strings.ContainsAny(i.val, "[$`") {
			if countOnly && !strings.HasPrefix(i.val, "-") {
				vals = append(vals, "file")
				continue
			}
			return false
		}
		vals = append(vals, i.val)
	}
	switch path.Base(name) {
	case "stat": // stat -c %s f: a format without names
		return strings.Contains(strings.Join(vals, " "), "%") && !strings.Contains(strings.Join(vals, " "), "%n") && !strings.Contains(strings.Join(vals, " "), "%N")
	case "grep": // grep -c PATTERN [FILE]: one count, no file names
		counts, files := false, 0
		for _, v := range vals {
			switch {
			case v == "-c" || v == "--count" || strings.HasPrefix(v, "-") && !strings.HasPrefix(v, "--") && strings.Contains(v, "c"):
				counts = true
			case v == "-H" || v == "--with-filename" || v == "-r" || v == "-R" || v == "--recursive":
				return false
			case !strings.HasPrefix(v, "-"):
				files++
			}
		}
		return counts && files <= 2
	case "git": // git rev-list --count
		return slicesContains(vals, "--count")
	}
	return true
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// arith judges an arithmetic expression: every value it evaluates must be
// safe; names it assigns hold numbers afterwards.
func (c *checker) arith(n syntax.ArithmExpr) error {
	switch e := n.(type) {
	case nil:
		return nil
	case *syntax.Word:
		if e == nil {
			return nil
		}
		for _, part := range e.Parts {
			if err := c.arithPart(part); err != nil {
				return err
			}
		}
	case *syntax.BinaryArithm:
		if e == nil {
			return nil
		}
		if e.Op >= syntax.Assgn && e.Op <= syntax.ShrAssgn || e.Op == syntax.AndBoolAssgn || e.Op == syntax.OrBoolAssgn || e.Op == syntax.XorBoolAssgn || e.Op == syntax.PowAssgn {
			if err := c.arith(e.Y); err != nil {
				return err
			}
			if e.Op != syntax.Assgn {
				if err := c.arith(e.X); err != nil {
					return err
				}
			}
			c.markAssigned(e.X)
			return nil
		}
		if err := c.arith(e.X); err != nil {
			return err
		}
		return c.arith(e.Y)
	case *syntax.UnaryArithm:
		if e == nil {
			return nil
		}
		if err := c.arith(e.X); err != nil {
			return err
		}
		if e.Op == syntax.Inc || e.Op == syntax.Dec {
			c.markAssigned(e.X)
		}
	case *syntax.ParenArithm:
		if e == nil {
			return nil
		}
		return c.arith(e.X)
	}
	return nil
}

// markAssigned records that an arithmetic assignment target holds a number.
func (c *checker) markAssigned(x syntax.ArithmExpr) {
	w, ok := x.(*syntax.Word)
	if !ok || w == nil || len(w.Parts) != 1 {
		return
	}
	switch p := w.Parts[0].(type) {
	case *syntax.Lit:
		c.setVar(p.Value, true)
	case *syntax.ParamExp:
		if p.Param != nil && p.Index == nil {
			c.setVar(p.Param.Value, true)
		}
	}
}

func (c *checker) setVar(name string, safe bool) {
	if c.vars == nil {
		c.vars = map[string]bool{}
	}
	c.vars[name] = safe
}

func (c *checker) arithPart(part syntax.WordPart) error {
	refuse := func(what string) error {
		return c.unsafe(RuleUnjudgeable, "arithmetic evaluates %s, data the policy cannot see; bash runs a[$(cmd)] in it as code", what)
	}
	switch p := part.(type) {
	case *syntax.Lit:
		if !c.textSafe(p.Value, 0) {
			return refuse(p.Value)
		}
	case *syntax.ParamExp:
		if p.Index != nil && !c.assoc[paramName(p)] {
			if err := c.arith(p.Index); err != nil {
				return err
			}
		}
		if !c.paramSafe(p) {
			return refuse(wordSource(&syntax.Word{Parts: []syntax.WordPart{p}}))
		}
	case *syntax.CmdSubst:
		if !c.numericSubst(p) {
			return refuse("the output of " + wordSource(&syntax.Word{Parts: []syntax.WordPart{p}}))
		}
	case *syntax.ArithmExp:
		return c.arith(p.X)
	case *syntax.DblQuoted:
		for _, q := range p.Parts {
			if err := c.arithPart(q); err != nil {
				return err
			}
		}
	case *syntax.SglQuoted:
		if !c.textSafe(p.Value, 0) {
			return refuse(p.Value)
		}
	default:
		return refuse(wordSource(&syntax.Word{Parts: []syntax.WordPart{p}}))
	}
	return nil
}

func paramName(p *syntax.ParamExp) string {
	if p.Param == nil {
		return ""
	}
	return p.Param.Value
}

// paramCheck judges a parameter expansion outside arithmetic: its
// subscript and substring offsets are arithmetic, ${!x} takes a name from
// data, ${x@P} expands data like a prompt.
func (c *checker) paramCheck(p *syntax.ParamExp) error {
	name := paramName(p)
	if p.Index != nil && !c.assoc[name] {
		if w, ok := p.Index.(*syntax.Word); !ok || !isAllIndex(w) {
			if err := c.arith(p.Index); err != nil {
				return err
			}
		}
	}
	if p.Slice != nil {
		if err := c.arith(p.Slice.Offset); err != nil {
			return err
		}
		if err := c.arith(p.Slice.Length); err != nil {
			return err
		}
	}
	if p.Excl && p.Names == 0 && (p.Index == nil) && !c.varSafe(name, 0) {
		return c.unsafe(RuleUnjudgeable, "${!%s} uses the value of %s as a variable name, data the policy cannot see", name, name)
	}
	if p.Exp != nil && p.Exp.Op == syntax.OtherParamOps {
		if v, ok := litWord(p.Exp.Word); ok && v == "P" {
			return c.unsafe(RuleUnjudgeable, "${%s@P} expands data like a prompt, running the $(...) in it", name)
		}
	}
	return nil
}

func isAllIndex(w *syntax.Word) bool {
	v, ok := litWord(w)
	return ok && (v == "@" || v == "*")
}

// testArith judges [[ a -eq b ]]-style comparisons, whose operands bash
// evaluates as arithmetic.
func (c *checker) testArith(n syntax.TestExpr) error {
	var err error
	syntax.Walk(n, func(n syntax.Node) bool {
		if err != nil {
			return false
		}
		switch t := n.(type) {
		case *syntax.BinaryTest:
			if t.Op >= syntax.TsEql && t.Op <= syntax.TsGtr {
				for _, side := range []syntax.TestExpr{t.X, t.Y} {
					if w, ok := side.(*syntax.Word); ok {
						if err = c.arith(w); err != nil {
							return false
						}
					}
				}
			}
		case *syntax.UnaryTest:
			if t.Op == syntax.TsVarSet || t.Op == syntax.TsRefVar {
				if w, ok := t.X.(*syntax.Word); ok {
					err = c.nameArg(w, "[[ -v ]]")
				}
			}
		}
		return err == nil
	})
	return err
}

// nameArg judges a word used as a variable name (read NAME, printf -v
// NAME, unset NAME, declare NAME): one computed at run time, or one with a
// subscript that expands something, can run code.
func (c *checker) nameArg(w *syntax.Word, what string) error {
	v, ok := litWord(w)
	if !ok {
		return c.unsafe(RuleUnjudgeable, "%s takes a variable name computed at run time (%s); a[$(cmd)] in it runs cmd", what, wordSource(w))
	}
	if name, _, _ := strings.Cut(v, "["); shellTables[name] && what != "unset" {
		return c.unsafe(RuleUnjudgeable, "%s sets %s, which rebinds command names to other programs", what, v)
	}
	if i := strings.IndexByte(v, '['); i >= 0 && !c.textSafe(strings.TrimSuffix(v[i+1:], "]"), 0) && !c.assoc[v[:i]] {
		return c.unsafe(RuleUnjudgeable, "%s with the subscript %s, which bash evaluates as code", what, v[i:])
	}
	return nil
}

// codeBuiltin judges the bash builtins that run code given in their
// options or kept in the history: mapfile -C (a callback per line),
// compgen -C/-F/-W (a command, a function, a word list bash expands),
// fc (re-runs history entries, or runs an editor on them), set -H (history
// expansion: !! re-runs and edits earlier lines), set -k (NAME=value
// arguments become the command's environment), and test -v / [ -v
// (the name's subscript is evaluated, a[$(cmd)] runs cmd).
func (c *checker) codeBuiltin(k call) error {
	a := k.args
	switch k.base {
	case "mapfile", "readarray":
		for i := 1; i < len(a.words); i++ {
			if a.ok[i] && strings.HasPrefix(a.vals[i], "-") && !strings.HasPrefix(a.vals[i], "--") && strings.Contains(a.vals[i], "C") {
				return c.unsafe(RuleUnjudgeable, "%s -C runs a callback for the lines it reads", k.base)
			}
		}
		return c.nameArgs(a, k.base)
	case "compgen":
		for i := 1; i < len(a.words); i++ {
			v := a.vals[i]
			if !a.ok[i] || !strings.HasPrefix(v, "-") || strings.HasPrefix(v, "--") {
				continue
			}
			if strings.ContainsAny(v, "CF") {
				return c.unsafe(RuleUnjudgeable, "compgen -C and -F run commands")
			}
			if strings.HasSuffix(v, "W") && i+1 < len(a.words) && (!a.ok[i+1] || strings.ContainsAny(a.vals[i+1], "$`")) {
				return c.unsafe(RuleUnjudgeable, "compgen -W expands its word list, running the substitutions in it")
			}
		}
	case "fc":
		if !a.has("-l") && !a.hasShort('l') {
			return c.unsafe(RuleUnjudgeable, "fc runs commands from the history")
		}
	case "set":
		for i := 1; i < len(a.words); i++ {
			v := a.vals[i]
			if !a.ok[i] || v == "--" {
				break
			}
			if v == "-o" && i+1 < len(a.words) && a.vals[i+1] == "histexpand" ||
				len(v) > 1 && v[0] == '-' && v[1] != '-' && strings.Contains(v, "H") {
				return c.unsafe(RuleUnjudgeable, "set -H turns on history expansion, which re-runs and edits earlier lines")
			}
			if v == "-o" && i+1 < len(a.words) && a.vals[i+1] == "keyword" ||
				len(v) > 1 && v[0] == '-' && v[1] != '-' && strings.Contains(v, "k") {
				return c.unsafe(RuleUnjudgeable, "set -k makes NAME=value arguments anywhere in a command part of its environment (git log GIT_PAGER=cmd runs cmd)")
			}
		}
	case "test", "[":
		for i := 1; i+1 < len(a.words); i++ {
			if a.ok[i] && a.vals[i] == "-v" {
				if err := c.nameArg(a.words[i+1], k.base+" -v"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// shellTables are bash's variables that are its tables of command names:
// BASH_CMDS[ls]=/usr/bin/sudo makes ls run sudo, and BASH_ALIASES[x]=sudo
// defines an alias.
var shellTables = set("BASH_CMDS", "BASH_ALIASES")

// nameArgs judges the variable names a builtin sets (read, mapfile,
// printf -v, unset, getopts) and marks them as holding data.
func (c *checker) nameArgs(a args, base string) error {
	var names []int
	switch base {
	case "read":
		valued := set("-p", "-d", "-n", "-N", "-t", "-u", "-i")
		for i := 1; i < len(a.words); i++ {
			if a.ok[i] && valued[a.vals[i]] {
				i++
				continue
			}
			if a.ok[i] && a.vals[i] == "-a" && i+1 < len(a.words) {
				i++
				names = append(names, i)
				continue
			}
			if a.ok[i] && strings.HasPrefix(a.vals[i], "-") {
				continue
			}
			names = append(names, i)
		}
		if len(names) == 0 {
			c.setVar("REPLY", false)
		}
	case "mapfile", "readarray":
		ops := a.operands(set("-d", "-n", "-O", "-s", "-u", "-C", "-c"))
		if len(ops) > 0 {
			names = ops[len(ops)-1:]
		} else {
			c.setVar("MAPFILE", false)
		}
	case "printf":
		for i := 1; i+1 < len(a.words); i++ {
			if a.ok[i] && a.vals[i] == "-v" {
				names = append(names, i+1)
			}
		}
	case "unset":
		names = a.operands(nil)
	case "getopts":
		if ops := a.operands(nil); len(ops) >= 2 {
			names = ops[1:2]
		}
		c.setVar("OPTARG", false)
	}
	for _, i := range names {
		if err := c.nameArg(a.words[i], base); err != nil {
			return err
		}
		v := a.vals[i]
		if j := strings.IndexByte(v, '['); j >= 0 {
			v = v[:j]
		}
		c.setVar(v, base == "unset")
	}
	return nil
}

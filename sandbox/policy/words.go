package policy

import (
	"errors"
	"path"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// wordInfo is the static value of a word after quote removal.
type wordInfo struct {
	val  string
	ok   bool // fully static: no expansion of any kind
	glob bool // unquoted *, ?, [ or a brace expansion: the shell may rewrite it
	home bool // starts with an unquoted ~ or with $HOME / ${HOME}
}

// litWord returns the static value of w, if it has one.
func litWord(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", false
	}
	i := wordValue(w)
	return i.val, i.ok
}

// wordValue computes w's static value: quotes removed, escapes decoded
// ($'\x73udo' is "sudo"), expansions making it non-static. A leading
// $HOME or ${HOME} is kept as the text "$HOME" with home set, so path
// checks can substitute the HOME they follow.
func wordValue(w *syntax.Word) wordInfo {
	var b strings.Builder
	info := wordInfo{ok: true}
	// shape is the word's unquoted text with each quoted or expanded part
	// as one letter: bash's brace expansion and bracket globs span the
	// quoted parts ({"sudo",x} is sudo x, s["u"]do matches a file sudo).
	var shape strings.Builder
	for i, part := range w.Parts {
		if l, ok := part.(*syntax.Lit); ok {
			shape.WriteString(l.Value)
		} else {
			shape.WriteByte('q')
		}
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			if i == 0 && strings.HasPrefix(v, "~") {
				info.home = true
			}
			if globShape(v) {
				info.glob = true
			}
			b.WriteString(unescapeUnquoted(v))
		case *syntax.SglQuoted:
			if p.Dollar {
				b.WriteString(decodeANSIC(p.Value))
			} else {
				b.WriteString(p.Value)
			}
		case *syntax.DblQuoted:
			if p.Dollar {
				// $"..." is translated through the message catalogs
				// (TEXTDOMAIN, TEXTDOMAINDIR): its value is not its text.
				info.ok = false
			}
			for j, q := range p.Parts {
				switch q := q.(type) {
				case *syntax.Lit:
					b.WriteString(unescapeDouble(q.Value))
				case *syntax.ParamExp:
					if i == 0 && j == 0 && isHomeParam(q) {
						info.home = true
						b.WriteString("$HOME")
					} else {
						info.ok = false
					}
				default:
					info.ok = false
				}
			}
		case *syntax.ParamExp:
			if i == 0 && isHomeParam(p) {
				info.home = true
				b.WriteString("$HOME")
			} else {
				info.ok = false
			}
		case *syntax.BraceExp, *syntax.ExtGlob:
			info.glob = true
			info.ok = false
		default:
			info.ok = false
		}
	}
	if globShape(shape.String()) {
		info.glob = true
	}
	info.val = b.String()
	if info.home && strings.HasPrefix(info.val, "$HOME") {
		// A $HOME word is only static once HOME is substituted; literal
		// users (program names, options) must treat it as an expansion.
		info.ok = false
	}
	return info
}

// globShape reports unquoted text that bash may rewrite: a glob (*, ?,
// [...]) or a brace expansion ({a,b}, {1..3}).
func globShape(v string) bool {
	if strings.ContainsAny(v, "*?") {
		return true
	}
	if i := strings.Index(v, "["); i >= 0 && strings.Contains(v[i:], "]") {
		return true
	}
	if i := strings.Index(v, "{"); i >= 0 && strings.Contains(v[i:], "}") && (strings.Contains(v[i:], ",") || strings.Contains(v[i:], "..")) {
		return true
	}
	return false
}

func isHomeParam(p *syntax.ParamExp) bool {
	return p.Param != nil && p.Param.Value == "HOME" && p.Exp == nil && p.Repl == nil &&
		p.Slice == nil && p.Index == nil && !p.Excl && !p.Length && p.NestedParam == nil
}

// unescapeUnquoted removes the backslashes of an unquoted literal (`s\udo`
// is `sudo`) and line continuations.
func unescapeUnquoted(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unescapeDouble removes the backslashes that are special inside double
// quotes (before $ ` " \ and newline); others stay.
func unescapeDouble(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// decodeANSIC decodes the body of a bash $'...' string as bash 5.2 does:
// its value ends at the first NUL it decodes (\0, \x00, \x{}, \c@, \400,
// \u0000: bash's strings are C strings, so $'sudo\0x' is sudo), and
// \x{HHH} takes any number of hex digits, keeping the low byte.
func decodeANSIC(s string) string {
	v := decodeANSICAll(s)
	if i := strings.IndexByte(v, 0); i >= 0 {
		v = v[:i]
	}
	return v
}

func decodeANSICAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch ch := s[i]; ch {
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 'e', 'E':
			b.WriteByte(27)
		case 'f':
			b.WriteByte(12)
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte(11)
		case 'c':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i] & 0x1f)
			}
		case 'x', 'u', 'U':
			if ch == 'x' && i+1 < len(s) && s[i+1] == '{' {
				j, n := i+2, uint64(0)
				for ; j < len(s) && isHex(s[j]); j++ {
					d, _ := strconv.ParseUint(s[j:j+1], 16, 8)
					n = n*16 + d
				}
				b.WriteByte(byte(n))
				if j < len(s) && s[j] == '}' {
					j++
				}
				i = j - 1
				continue
			}
			max := map[byte]int{'x': 2, 'u': 4, 'U': 8}[ch]
			j := i + 1
			for j < len(s) && j-i-1 < max && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				b.WriteByte('\\')
				b.WriteByte(ch)
				continue
			}
			n, _ := strconv.ParseUint(s[i+1:j], 16, 32)
			if ch == 'x' {
				b.WriteByte(byte(n))
			} else if utf8.ValidRune(rune(n)) {
				b.WriteRune(rune(n))
			}
			i = j - 1
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j-i < 3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(s[i:j], 8, 32)
			b.WriteByte(byte(n))
			i = j - 1
		default: // \\ \' \" \? and unknown escapes
			if strings.IndexByte(`\'"?`, ch) < 0 {
				b.WriteByte('\\')
			}
			b.WriteByte(ch)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// pathWord returns w's value as a path with a leading ~ or $HOME replaced
// by the HOME the checker follows. ok is false when the word has other
// expansions or HOME is unknown. `~user` is returned as is (it names
// another user's home, outside any workspace).
func (c *checker) pathWord(w *syntax.Word) (string, bool) {
	i := wordValue(w)
	v := i.val
	if i.home {
		switch {
		case strings.HasPrefix(v, "$HOME"):
			if c.st.home == "" {
				return "", false
			}
			return c.st.home + v[len("$HOME"):], !strings.Contains(v[len("$HOME"):], "$HOME") && wordStaticBut(w)
		case v == "~" || strings.HasPrefix(v, "~/"):
			if c.st.home == "" {
				return "", false
			}
			return c.st.home + v[1:], i.ok
		}
	}
	return v, i.ok
}

// wordStaticBut reports whether every part of w other than a leading
// $HOME is static.
func wordStaticBut(w *syntax.Word) bool {
	for i, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		case *syntax.ParamExp:
			if i != 0 || !isHomeParam(p) {
				return false
			}
		case *syntax.DblQuoted:
			for j, q := range p.Parts {
				switch q := q.(type) {
				case *syntax.Lit:
				case *syntax.ParamExp:
					if i != 0 || j != 0 || !isHomeParam(q) {
						return false
					}
				default:
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// wordSource prints w as it was written (for allow patterns and messages).
func wordSource(w *syntax.Word) string {
	var b strings.Builder
	_ = syntax.NewPrinter().Print(&b, w)
	return b.String()
}

// evalPath computes the value of a path word built from what the checker
// knows: literals, $PWD/${PWD} (the working directory, when there is one),
// $HOME, $(pwd), $(dirname X), $(realpath X), and the suffix/prefix
// removals and substrings of those (${PWD%/*}, ${HOME::1}). ok is false for
// anything else.
func (c *checker) evalPath(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, part := range w.Parts {
		v, ok := c.evalPart(part)
		if !ok {
			return "", false
		}
		b.WriteString(v)
	}
	return b.String(), true
}

func (c *checker) evalPart(part syntax.WordPart) (string, bool) {
	switch p := part.(type) {
	case *syntax.Lit:
		if strings.ContainsAny(p.Value, "*?[") {
			return "", false
		}
		return unescapeUnquoted(p.Value), true
	case *syntax.SglQuoted:
		if p.Dollar {
			return decodeANSIC(p.Value), true
		}
		return p.Value, true
	case *syntax.DblQuoted:
		var b strings.Builder
		for _, q := range p.Parts {
			if l, ok := q.(*syntax.Lit); ok {
				b.WriteString(unescapeDouble(l.Value))
				continue
			}
			v, ok := c.evalPart(q)
			if !ok {
				return "", false
			}
			b.WriteString(v)
		}
		return b.String(), true
	case *syntax.ParamExp:
		return c.evalParam(p)
	case *syntax.CmdSubst:
		if len(p.Stmts) != 1 {
			return "", false
		}
		ce, ok := p.Stmts[0].Cmd.(*syntax.CallExpr)
		if !ok || len(ce.Assigns) > 0 || len(p.Stmts[0].Redirs) > 0 || len(ce.Args) == 0 {
			return "", false
		}
		name, ok := litWord(ce.Args[0])
		if !ok {
			return "", false
		}
		var args []string
		for _, a := range ce.Args[1:] {
			v, ok := c.evalPath(a)
			if !ok {
				return "", false
			}
			if strings.HasPrefix(v, "-") {
				continue // -f, -e, -m, --
			}
			args = append(args, v)
		}
		switch {
		case name == "pwd" && len(args) == 0:
			return c.cwd()
		case name == "dirname" && len(args) == 1:
			return path.Dir(args[0]), true
		case (name == "realpath" || name == "readlink") && len(args) == 1:
			d, ok := c.cwd()
			if !ok && !path.IsAbs(args[0]) {
				return "", false
			}
			return c.abs(args[0], d), true
		}
	}
	return "", false
}

// cwd is the one working directory the checker follows, if it knows it.
func (c *checker) cwd() (string, bool) {
	if len(c.st.cwds) != 1 || c.st.cwds[0] == "" {
		return "", false
	}
	return c.st.cwds[0], true
}

func (c *checker) evalParam(p *syntax.ParamExp) (string, bool) {
	if p.Param == nil || p.Excl || p.Length || p.Index != nil || p.Repl != nil || p.NestedParam != nil {
		return "", false
	}
	var v string
	switch p.Param.Value {
	case "PWD":
		d, ok := c.cwd()
		if !ok {
			return "", false
		}
		v = d
	case "HOME":
		if c.st.home == "" {
			return "", false
		}
		v = c.st.home
	default:
		return "", false
	}
	if p.Slice != nil {
		off, ok := sliceInt(p.Slice.Offset, 0)
		if !ok {
			return "", false
		}
		n, ok := sliceInt(p.Slice.Length, len(v))
		if !ok {
			return "", false
		}
		if off < 0 {
			off += len(v)
		}
		off = max(0, min(off, len(v)))
		if n < 0 {
			n = len(v) - off + n
		}
		n = max(0, min(n, len(v)-off))
		return v[off : off+n], true
	}
	if p.Exp == nil {
		return v, true
	}
	pat := ""
	if p.Exp.Word != nil {
		var ok bool
		if pat, ok = patternText(p.Exp.Word); !ok {
			return "", false
		}
	}
	re, err := globRegexp(pat)
	if err != nil {
		return "", false
	}
	switch p.Exp.Op {
	case syntax.RemSmallSuffix, syntax.RemLargeSuffix:
		best := -1
		for k := len(v); k >= 0; k-- {
			if re.MatchString(v[k:]) {
				best = k
				if p.Exp.Op == syntax.RemSmallSuffix {
					break
				}
			}
		}
		if best >= 0 {
			return v[:best], true
		}
		return v, true
	case syntax.RemSmallPrefix, syntax.RemLargePrefix:
		best := -1
		for k := 0; k <= len(v); k++ {
			if re.MatchString(v[:k]) {
				best = k
				if p.Exp.Op == syntax.RemSmallPrefix {
					break
				}
			}
		}
		if best >= 0 {
			return v[best:], true
		}
		return v, true
	case syntax.DefaultUnset, syntax.DefaultUnsetOrNull, syntax.ErrorUnset, syntax.ErrorUnsetOrNull:
		return v, true // PWD and HOME are set
	}
	return "", false
}

// sliceInt is a literal integer offset or length ("" = def).
func sliceInt(n syntax.ArithmExpr, def int) (int, bool) {
	if n == nil {
		return def, true
	}
	w, ok := n.(*syntax.Word)
	if !ok {
		if u, isU := n.(*syntax.UnaryArithm); isU && u.Op == syntax.Minus {
			v, ok := sliceInt(u.X, 0)
			return -v, ok
		}
		if pa, isP := n.(*syntax.ParenArithm); isP {
			return sliceInt(pa.X, def)
		}
		return 0, false
	}
	s, ok := litWord(w)
	if !ok {
		return 0, false
	}
	v, err := strconv.Atoi(strings.TrimSpace(s))
	return v, err == nil
}

// patternText is a static pattern word; quoted parts are literal (marked
// by escaping their glob characters).
func patternText(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			b.WriteString(escapeGlob(p.Value))
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(escapeGlob(unescapeDouble(l.Value)))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

func escapeGlob(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`).Replace(s)
}

// globRegexp compiles a bash pattern (*, ?, \x; a bracket expression
// makes it fail) into an anchored regexp where * also matches /.
func globRegexp(pat string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^(?s:")
	for i := 0; i < len(pat); i++ {
		switch ch := pat[i]; ch {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			return nil, errors.New("bracket expression")
		case '\\':
			if i+1 < len(pat) {
				i++
			}
			b.WriteString(regexp.QuoteMeta(pat[i : i+1]))
		default:
			b.WriteString(regexp.QuoteMeta(string(ch)))
		}
	}
	b.WriteString(")$")
	return regexp.Compile(b.String())
}

// mentionsLocation reports a word that uses $PWD, $HOME, $OLDPWD or
// $(pwd)/$(dirname ...)-style substitutions: a path computed from where
// the command runs.
func mentionsLocation(w *syntax.Word) bool {
	found := false
	syntax.Walk(w, func(n syntax.Node) bool {
		switch v := n.(type) {
		case *syntax.ParamExp:
			if v.Param != nil && (v.Param.Value == "PWD" || v.Param.Value == "HOME" || v.Param.Value == "OLDPWD") {
				found = true
			}
		case *syntax.CallExpr:
			if len(v.Args) > 0 {
				if name, ok := litWord(v.Args[0]); ok {
					switch path.Base(name) {
					case "pwd", "dirname", "realpath", "readlink", "cd":
						found = true
					}
				}
			}
		}
		return !found
	})
	return found
}

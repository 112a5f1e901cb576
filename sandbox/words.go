package sandbox

import (
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
	for i, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			if i == 0 && strings.HasPrefix(v, "~") {
				info.home = true
			}
			if strings.ContainsAny(v, "*?") || (strings.Contains(v, "[") && strings.Contains(v[strings.Index(v, "["):], "]")) || (strings.Contains(v, "{") && (strings.Contains(v, ",") || strings.Contains(v, ".."))) {
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
	info.val = b.String()
	if info.home && strings.HasPrefix(info.val, "$HOME") {
		// A $HOME word is only static once HOME is substituted; literal
		// users (program names, options) must treat it as an expansion.
		info.ok = false
	}
	return info
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

// decodeANSIC decodes the body of a bash $'...' string.
func decodeANSIC(s string) string {
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

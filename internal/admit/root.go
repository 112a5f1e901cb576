package admit

import (
	"fmt"
	"path"
	"strings"
)

// RootMismatch is the one wording of "the client's root directory is not
// the daemon's": the X-Root-Dir refusal of every HTTP face and the SSH
// core's refusal of a client command whose working directory lies outside
// the root (CommandDir) both say it. It starts with the reference daemon's
// words ("Server is configured for R, not C"), which clients may match,
// and names the option to change on either side: the client's rootDir, or
// the daemon's --root.
func RootMismatch(daemonRoot, clientRoot string) string {
	return rootFact(daemonRoot, clientRoot) + ": " + rootHint(daemonRoot, clientRoot)
}

// rootFact is the reference daemon's words; rootHint what to change.
func rootFact(daemonRoot, clientRoot string) string {
	return fmt.Sprintf("Server is configured for %s, not %s", daemonRoot, clientRoot)
}

func rootHint(daemonRoot, clientRoot string) string {
	return fmt.Sprintf("the client's root directory differs from the daemon's; set the client's rootDir to %s, or start the daemon with --root %s",
		daemonRoot, clientRoot)
}

// WithinRoot reports whether dir (absolute) is one of roots or lies under
// it, lexically: the roots are the daemon's root as configured and as its
// links resolve, so a client may spell the root either way.
func WithinRoot(dir string, roots ...string) bool {
	dir = path.Clean(dir)
	for _, r := range roots {
		if r == "" {
			continue
		}
		r = path.Clean(r)
		if dir == r || r == "/" || strings.HasPrefix(dir, r+"/") {
			return true
		}
	}
	return false
}

// CommandDir recognizes the command line an agent-backend client library
// sends over SSH to run a command in its working directory (its rootDir, or
// a scope or directory under it), and returns that directory:
//
//	HOME='<dir>' [K='v' …] cd "<dir>" && <command>      the TypeScript client
//	cd <dir> && HOME=<dir> [K=v …] <command>            the Python client
//	HOME='<dir>' cd '<dir>' && <command>                 this module's client
//	cd '<dir>' && export HOME='<dir>' … && { <command> } this module's client
//
// It is a fingerprint, not a parser: the line must start with plain
// assignments (or unset NAME;) and then cd to a literal absolute
// directory followed by &&, and HOME must be set to that same directory
// before the cd or right after the &&. A command a person types (cd /tmp
// && ls) has no such HOME and is not recognized; neither is a directory
// computed at run time ($VAR, `…`).
func CommandDir(command string) (string, bool) {
	s := strings.TrimLeft(command, " \t")
	home := ""
	for {
		if rest, ok := strings.CutPrefix(s, "unset "); ok {
			i := strings.IndexByte(rest, ';')
			if i < 0 || !validName(strings.TrimSpace(rest[:i])) {
				return "", false
			}
			s = strings.TrimLeft(rest[i+1:], " \t")
			continue
		}
		name, val, rest, ok := assignment(s)
		if !ok {
			break
		}
		if name == "HOME" {
			home = val
		}
		s = rest
	}
	rest, ok := strings.CutPrefix(s, "cd ")
	if !ok {
		return "", false
	}
	dir, rest, ok := word(strings.TrimLeft(rest, " \t"))
	if !ok || !path.IsAbs(dir) {
		return "", false
	}
	rest, ok = strings.CutPrefix(strings.TrimLeft(rest, " \t"), "&&")
	if !ok {
		return "", false
	}
	if home == "" {
		after := strings.TrimLeft(rest, " \t")
		after = strings.TrimPrefix(after, "export ")
		if name, val, _, ok := assignment(after); ok && name == "HOME" {
			home = val
		}
	}
	if home == "" || path.Clean(home) != path.Clean(dir) {
		return "", false
	}
	return path.Clean(dir), true
}

// assignment reads NAME=word and the blanks after it from the start of s.
func assignment(s string) (name, val, rest string, ok bool) {
	eq := strings.IndexByte(s, '=')
	if eq <= 0 || !validName(s[:eq]) {
		return "", "", "", false
	}
	val, rest, ok = word(s[eq+1:])
	if !ok {
		return "", "", "", false
	}
	return s[:eq], val, strings.TrimLeft(rest, " \t"), true
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r != '_' && (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// word reads one shell word with literal content from the start of s:
// bare characters (a backslash escapes the next), '…' and "…" (where only
// \ before $ ` " \ escapes), concatenated. It fails on anything expanded at
// run time ($, `, a glob) and on an unterminated quote.
func word(s string) (string, string, bool) {
	var b strings.Builder
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '&' || c == '|' || c == '<' || c == '>' || c == '(' || c == ')':
			return b.String(), s[i:], i > 0
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return "", "", false
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 2
		case c == '"':
			i++
			for {
				if i >= len(s) {
					return "", "", false
				}
				d := s[i]
				if d == '"' {
					i++
					break
				}
				if d == '$' || d == '`' {
					return "", "", false
				}
				if d == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\", s[i+1]) >= 0 {
					i++
					d = s[i]
				}
				b.WriteByte(d)
				i++
			}
		case c == '\\':
			if i+1 >= len(s) {
				return "", "", false
			}
			b.WriteByte(s[i+1])
			i += 2
		case c == '$' || c == '`' || c == '*' || c == '?' || c == '[' || c == '~' && i == 0:
			return "", "", false
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), "", i > 0
}

package scpd

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// Limits on what one command may make us hold or do.
const (
	// MaxLineBytes bounds a control record (OpenSSH's own sink reads at
	// most 2048 bytes of one).
	MaxLineBytes = 4096
	// MaxDepth bounds directory nesting, received (D records) and sent (a
	// recursive walk, where a symlink loop would otherwise never end).
	MaxDepth = 128
	// MaxGlobMatches bounds the paths one glob expands to.
	MaxGlobMatches = 10000
	// MaxGlobLookups bounds the file system calls (directory listings,
	// stats) one glob makes, all its levels together: MaxGlobMatches
	// bounds each level only, and a pattern of many levels over
	// directories that link to themselves ("*/s/s/s/…" with 10,000
	// directories holding s -> .) made 10,000 lookups a level through
	// links, about 12 s of CPU a command.
	MaxGlobLookups = 50000
	// maxCommandBytes bounds the command line itself.
	maxCommandBytes = 64 << 10
)

// Command is a parsed `scp -t` or `scp -f` server command.
type Command struct {
	Sink      bool // -t: the client sends, we write
	Source    bool // -f: we send, the client writes
	Recursive bool // -r
	Preserve  bool // -p: times (and modes) travel with the files
	TargetDir bool // -d: the -t target must be a directory
	// Paths are the operands: one target for -t, the sources for -f.
	// Each is a client path for fsops, or, for -f, may hold a glob
	// (Patterns says which).
	Paths []string
	// Patterns[i] is Paths[i] as a path.Match pattern when it holds an
	// unquoted *, ? or [ (quoted ones escaped), "" otherwise.
	Patterns []string
}

// ErrNotSCP is ParseCommand's answer for a command that is not an scp
// server command: it goes to the executor as any other command.
var ErrNotSCP = errors.New("not an scp server command")

// ParseCommand parses an exec request's command. A command whose first word
// is "scp" (or a path ending in "/scp") and that has a -t or -f option is
// ours: it parses into a Command or fails with an error that says what is
// wrong with it. Any other command is ErrNotSCP.
func ParseCommand(line string) (Command, error) {
	first := strings.Fields(line)
	if len(first) == 0 || path.Base(first[0]) != "scp" {
		return Command{}, ErrNotSCP
	}
	if len(line) > maxCommandBytes {
		return Command{}, fmt.Errorf("command longer than %d bytes", maxCommandBytes)
	}
	words, err := splitWords(line)
	if err != nil {
		if isServerCommand(first[1:]) {
			return Command{}, err
		}
		return Command{}, ErrNotSCP
	}
	if len(words) == 0 || path.Base(words[0].text) != "scp" || !isServerCommand(texts(words[1:])) {
		return Command{}, ErrNotSCP
	}
	var c Command
	args := words[1:]
	for len(args) > 0 {
		a := args[0].text
		if a == "--" {
			args = args[1:]
			break
		}
		if len(a) < 2 || a[0] != '-' {
			break
		}
		for _, f := range a[1:] {
			switch f {
			case 't':
				c.Sink = true
			case 'f':
				c.Source = true
			case 'r':
				c.Recursive = true
			case 'p':
				c.Preserve = true
			case 'd':
				c.TargetDir = true
			case 'v', 'q':
				// Verbose or quiet: nothing to change on this side.
			default:
				return Command{}, fmt.Errorf("option -%c is not supported (the scp server takes -t, -f, -r, -p, -d and -v)", f)
			}
		}
		args = args[1:]
	}
	switch {
	case c.Sink && c.Source:
		return Command{}, errors.New("-t and -f together")
	case c.Sink && len(args) != 1:
		return Command{}, fmt.Errorf("-t takes one target path, got %d", len(args))
	case c.Source && len(args) == 0:
		return Command{}, errors.New("-f needs at least one path")
	}
	for _, w := range args {
		p, pat := expandTilde(w)
		if c.Sink && pat != "" {
			// A shell would expand it against what exists; a target with
			// a glob in it is almost certainly a mistake. Take it as typed.
			pat = ""
		}
		c.Paths = append(c.Paths, p)
		c.Patterns = append(c.Patterns, pat)
	}
	return c, nil
}

// isServerCommand reports whether args (scp's, after the program name)
// hold a -t or -f option before any operand.
func isServerCommand(args []string) bool {
	for _, a := range args {
		if a == "--" || len(a) < 2 || a[0] != '-' {
			return false
		}
		if strings.ContainsAny(a[1:], "tf") {
			return true
		}
	}
	return false
}

// word is one shell word: its text, and the same as a path.Match pattern
// when an unquoted glob character is in it.
type word struct {
	text    string
	pattern string // "" when no unquoted *, ? or [
	tilde   bool   // began with an unquoted ~
}

func texts(ws []word) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.text
	}
	return out
}

// splitWords splits a command line as a POSIX shell would, for the subset
// an scp client sends: blanks separate words; '...' is literal; "..." is
// literal but for \", \\, \$ and \`; a backslash outside quotes takes the
// next character literally. Characters a shell would act on (expansions,
// operators, redirections) are refused rather than taken literally, since
// the client's user meant the shell to act on them.
func splitWords(line string) ([]word, error) {
	var (
		words []word
		text  strings.Builder
		pat   strings.Builder
		glob  bool
		in    bool // inside a word
		tilde bool
	)
	lit := func(c byte) {
		text.WriteByte(c)
		if c == '*' || c == '?' || c == '[' || c == '\\' {
			pat.WriteByte('\\')
		}
		pat.WriteByte(c)
	}
	end := func() {
		if in {
			w := word{text: text.String(), tilde: tilde}
			if glob {
				w.pattern = pat.String()
			}
			words = append(words, w)
		}
		text.Reset()
		pat.Reset()
		glob, in, tilde = false, false, false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			end()
		case c == '\'':
			in = true
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated ' quote")
			}
			for k := i + 1; k <= i+j; k++ {
				lit(line[k])
			}
			i += j + 1
		case c == '"':
			in = true
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				d := line[i]
				switch {
				case d == '\\' && i+1 < len(line) && strings.IndexByte("\"\\$`", line[i+1]) >= 0:
					i++
					lit(line[i])
				case d == '\\' && i+1 < len(line) && line[i+1] == '\n':
					i++
				case d == '$' || d == '`':
					return nil, fmt.Errorf("%q inside double quotes: the scp server does not run a shell, so it cannot expand it", d)
				default:
					lit(d)
				}
			}
			if i >= len(line) {
				return nil, errors.New("unterminated \" quote")
			}
		case c == '\\':
			if i+1 >= len(line) {
				return nil, errors.New("trailing backslash")
			}
			in = true
			i++
			if line[i] != '\n' {
				lit(line[i])
			}
		case c == '*' || c == '?' || c == '[':
			in = true
			glob = true
			text.WriteByte(c)
			pat.WriteByte(c)
		case c == '~' && !in:
			in, tilde = true, true
			text.WriteByte(c)
			pat.WriteByte(c)
		case c == 0 || strings.IndexByte(";&|<>()$`\n\r{}", c) >= 0 || (c == '#' && !in):
			return nil, fmt.Errorf("%q: the scp server does not run a shell; quote the path", c)
		default:
			in = true
			text.WriteByte(c)
			pat.WriteByte(c)
		}
	}
	end()
	return words, nil
}

// expandTilde applies the shell's ~ rule with the workspace as home: "~"
// and "~/x" name the workspace root and x in it. "~user" is left as typed.
func expandTilde(w word) (p, pattern string) {
	p, pattern = w.text, w.pattern
	if !w.tilde {
		return p, pattern
	}
	if p == "~" {
		return ".", ""
	}
	if strings.HasPrefix(p, "~/") {
		p = "." + p[1:]
		if pattern != "" {
			pattern = "." + pattern[1:]
		}
	}
	return p, pattern
}

// expandGlob returns the workspace paths that pattern matches, sorted per
// directory as a shell does, or nil when it matches nothing (the shell then
// passes the pattern itself, which fails as a missing file). A leading "."
// in a name is matched only by a pattern element that starts with one.
// It stops with an error past MaxGlobLookups file system calls, or when
// ctx ends.
func expandGlob(ctx context.Context, ws fsops.Workspace, pattern string) ([]string, error) {
	lookups := 0
	lookup := func() error {
		if lookups++; lookups > MaxGlobLookups {
			return fmt.Errorf("pattern %q needs more than %d file system lookups; name fewer directories", pattern, MaxGlobLookups)
		}
		return ctx.Err()
	}
	abs := strings.HasPrefix(pattern, "/")
	elems := strings.Split(strings.Trim(pattern, "/"), "/")
	dirs := []string{"."}
	if abs {
		dirs = []string{"/"}
	}
	for i, el := range elems {
		if el == "" {
			continue
		}
		last := i == len(elems)-1
		var next []string
		for _, d := range dirs {
			if err := lookup(); err != nil {
				return nil, err
			}
			if !hasMeta(el) {
				name := unescape(el)
				p := path.Join(d, name)
				if last {
					if ok, _ := ws.Exists(p); ok {
						next = append(next, p)
					}
				} else if info, err := ws.Stat(p); err == nil && info.IsDir() {
					next = append(next, p)
				}
				continue
			}
			ents, err := ws.ReadDir(d)
			if err != nil {
				continue
			}
			for _, e := range ents {
				if strings.HasPrefix(e.Name, ".") && !strings.HasPrefix(el, ".") {
					continue
				}
				ok, err := path.Match(el, e.Name)
				if err != nil {
					return nil, fmt.Errorf("pattern %q: %v", pattern, err)
				}
				if !ok {
					continue
				}
				p := path.Join(d, e.Name)
				if !last {
					if err := lookup(); err != nil {
						return nil, err
					}
					if info, err := ws.Stat(p); err != nil || !info.IsDir() {
						continue
					}
				}
				next = append(next, p)
				if len(next) > MaxGlobMatches {
					return nil, fmt.Errorf("pattern %q matches more than %d paths", pattern, MaxGlobMatches)
				}
			}
		}
		dirs = next
		if len(dirs) == 0 {
			return nil, nil
		}
	}
	return dirs, nil
}

// hasMeta reports whether a pattern element has an unescaped glob
// character.
func hasMeta(el string) bool {
	for i := 0; i < len(el); i++ {
		switch el[i] {
		case '\\':
			i++
		case '*', '?', '[':
			return true
		}
	}
	return false
}

// unescape drops the backslashes of a pattern element that has no glob
// characters left.
func unescape(el string) string {
	if !strings.Contains(el, `\`) {
		return el
	}
	var b strings.Builder
	for i := 0; i < len(el); i++ {
		if el[i] == '\\' && i+1 < len(el) {
			i++
		}
		b.WriteByte(el[i])
	}
	return b.String()
}

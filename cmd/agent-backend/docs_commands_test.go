package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestDocsCommandsUseRealFlags runs the cheap half of "run every command
// block of the docs": every `agent-backend …` command in a fenced shell block
// (```sh, ```bash, ```shell, ```console or unlabelled) or inline code of the
// module's Markdown is parsed, its subcommand path followed (`daemon`, `site serve`,
// …, or none for the top-level stdio form), and each of its --flags must be
// one that `agent-backend <path> --help` of the real binary lists. A stale
// example (a flag renamed or removed, or daemon flags given to the top-level
// form, which serves stdio) fails with the file and line.
func TestDocsCommandsUseRealFlags(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	helps := map[string]helpInfo{}
	help := func(path []string) helpInfo {
		key := strings.Join(path, " ")
		if h, ok := helps[key]; ok {
			return h
		}
		out, errOut, code := run(t, nil, append(append([]string{}, path...), "--help")...)
		if code != 0 {
			t.Fatalf("agent-backend %s --help: exit %d\n%s", key, code, errOut)
		}
		h := parseHelp(out)
		helps[key] = h
		return h
	}
	var files []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	commands := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, c := range shellCommands(string(b)) {
			commands++
			path, flags := c.words[:0:0], []string(nil)
			h := help(nil)
			rest := c.words
			for len(rest) > 0 && h.subcommands[rest[0]] {
				path = append(path, rest[0])
				rest = rest[1:]
				h = help(path)
			}
			for _, w := range rest {
				if strings.HasPrefix(w, "--") && len(w) > 2 {
					name, _, _ := strings.Cut(w[2:], "=")
					flags = append(flags, name)
				}
			}
			for _, fl := range flags {
				if !h.flags[fl] {
					name := strings.Join(append([]string{"agent-backend"}, path...), " ")
					t.Errorf("%s:%d: `%s` has no flag --%s (not in `%s --help`)%s\n\t%s",
						rel, c.line, name, fl, name, h.hint(path), c.text)
				}
			}
		}
	}
	if commands < 10 {
		t.Errorf("found %d agent-backend commands in the docs' shell blocks; the scan is broken", commands)
	}
	t.Logf("%d agent-backend commands checked in %d Markdown files", commands, len(files))
}

// helpInfo is what one --help lists.
type helpInfo struct {
	flags       map[string]bool
	subcommands map[string]bool
}

func (h helpInfo) hint(path []string) string {
	if len(path) == 0 && len(h.subcommands) > 0 {
		return "; the top-level form serves MCP over stdio: did you mean `agent-backend daemon …`?"
	}
	return ""
}

var (
	helpFlag  = regexp.MustCompile(`^\s+(?:-[A-Za-z], )?--([A-Za-z0-9][A-Za-z0-9-]*)`)
	helpAlias = regexp.MustCompile(`\(alias --([A-Za-z0-9][A-Za-z0-9-]*)\)`)
	helpSub   = regexp.MustCompile(`^\s{2}([a-z][a-z0-9-]*)\s{2,}\S`)
)

// parseHelp reads cobra's help: flag lines (`      --port int …`,
// `  -h, --help …`), aliases the usage names (`(alias --rootDir)`), and the
// "Available Commands" section.
func parseHelp(out string) helpInfo {
	h := helpInfo{flags: map[string]bool{}, subcommands: map[string]bool{}}
	inCommands := false
	for _, l := range strings.Split(out, "\n") {
		if m := helpFlag.FindStringSubmatch(l); m != nil {
			h.flags[m[1]] = true
		}
		for _, m := range helpAlias.FindAllStringSubmatch(l, -1) {
			h.flags[m[1]] = true
		}
		switch {
		case strings.HasSuffix(strings.TrimSpace(l), "Commands:"):
			inCommands = true
		case strings.TrimSpace(l) == "":
			inCommands = false
		case inCommands:
			if m := helpSub.FindStringSubmatch(l); m != nil {
				h.subcommands[m[1]] = true
			}
		}
	}
	return h
}

// docCommand is one `agent-backend …` invocation of a shell block: the words
// after the program name, the line it starts on, and its text.
type docCommand struct {
	words []string
	line  int
	text  string
}

// inlineCommand is inline code that starts with the program's name.
var inlineCommand = regexp.MustCompile("`(agent-backend [^`]*)`")

// shellCommands finds the agent-backend invocations of a Markdown text, in
// inline code that starts with the program's name and in shell blocks: continuation lines joined, comments dropped, each command
// of a pipeline or list on its own, the program in command position (after
// environment assignments, sudo, env, exec, nohup or time), by any path.
func shellCommands(md string) []docCommand {
	var out []docCommand
	lines := strings.Split(md, "\n")
	inBlock, shell := false, false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "```") {
			if !inBlock {
				lang := strings.Fields(strings.TrimPrefix(trimmed, "```") + " ")
				shell = len(lang) == 0 || map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}[lang[0]]
			}
			inBlock = !inBlock
			continue
		}
		if !inBlock {
			// Inline code naming a command (`agent-backend daemon --root DIR`).
			for _, m := range inlineCommand.FindAllStringSubmatch(l, -1) {
				for _, seg := range shellSegments(m[1]) {
					if len(seg) > 0 && seg[0] == "agent-backend" {
						out = append(out, docCommand{words: seg[1:], line: i + 1, text: m[1]})
					}
				}
			}
			continue
		}
		if !shell {
			continue
		}
		start := i + 1
		text := trimmed
		for strings.HasSuffix(text, `\`) && i+1 < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i+1]), "```") {
			i++
			text = strings.TrimSuffix(text, `\`) + " " + strings.TrimSpace(lines[i])
		}
		text = strings.TrimPrefix(text, "$ ")
		for _, seg := range shellSegments(text) {
			wrapper := false // after sudo or env, their own options may follow
			for k, w := range seg {
				if w == "agent-backend" || strings.HasSuffix(w, "/agent-backend") {
					out = append(out, docCommand{words: seg[k+1:], line: start, text: text})
					break
				}
				if w == "sudo" || w == "env" {
					wrapper = true
				} else if !isPrefixWord(w) && !(wrapper && strings.HasPrefix(w, "-")) {
					break
				}
			}
		}
	}
	return out
}

// isPrefixWord is a word that may come before the program in command
// position.
func isPrefixWord(w string) bool {
	switch w {
	case "sudo", "env", "exec", "nohup", "time", "command":
		return true
	}
	name, _, ok := strings.Cut(w, "=")
	return ok && name != "" && !strings.HasPrefix(name, "-")
}

// shellSegments splits one shell line into the words of each simple command:
// quotes and $(…) kept inside a word, a comment and redirections dropped,
// and |, ||, &&, ;, & and parentheses ending a command.
func shellSegments(s string) [][]string {
	var segs [][]string
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	end := func() {
		flush()
		if len(words) > 0 {
			segs = append(segs, words)
		}
		words = nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				j = len(s) - i - 1
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			depth, j := 0, i+1
			for ; j < len(s); j++ {
				if s[j] == '(' {
					depth++
				} else if s[j] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			cur.WriteString(s[i:min(j+1, len(s))])
			inWord = true
			i = j
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			end()
			return segs
		case c == '>' || c == '<':
			// A redirection (2>/dev/null, >>log, 2>&1): neither its
			// descriptor nor its target is a word of the command.
			if inWord && strings.Trim(cur.String(), "0123456789") == "" {
				cur.Reset()
				inWord = false
			}
			flush()
			for i+1 < len(s) && (s[i+1] == '>' || s[i+1] == '&' || s[i+1] == ' ') {
				i++
			}
			for i+1 < len(s) && s[i+1] != ' ' && strings.IndexByte("|&;", s[i+1]) < 0 {
				i++
			}
		case strings.IndexByte("|&;()`", c) >= 0:
			end()
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	end()
	return segs
}

// TestShellCommandsParser: the block scanner on the forms the docs use.
func TestShellCommandsParser(t *testing.T) {
	md := "text `agent-backend daemon --inline X` and `go run ./cmd/agent-backend` outside a block\n" +
		"```sh\n" +
		"# agent-backend daemon --commented\n" +
		"AGENTBE_PORT=1 sudo -E agent-backend daemon --root /srv/ws \\\n  --port 3001 --auth-token \"$(cat f | tr -d x)\" 2>/dev/null --bind=::1 | jq . # --not-a-flag\n" +
		"go build -o bin/agent-backend ./cmd/agent-backend && ./bin/agent-backend --backend memory --rootDir X\n" +
		"echo agent-backend daemon --in-echo\n" +
		"```\n" +
		"```json\n{\"command\": \"agent-backend daemon --json\"}\n```\n" +
		"```\n$ agent-backend site serve --dir d\n```\n"
	var got []string
	for _, c := range shellCommands(md) {
		got = append(got, fmt.Sprintf("%d:%s", c.line, strings.Join(c.words, " ")))
	}
	sort.Strings(got)
	want := []string{
		"1:daemon --inline X",
		"4:daemon --root /srv/ws --port 3001 --auth-token $(cat f | tr -d x) --bind=::1",
		"6:--backend memory --rootDir X",
		"13:site serve --dir d",
	}
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("parsed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	h := parseHelp("Usage:\n  x [command]\n\nAvailable Commands:\n  daemon      Serve\n  help        Help\n\nFlags:\n  -h, --help   help\n      --root string   root (alias --rootDir)\n")
	for _, f := range []string{"help", "root", "rootDir"} {
		if !h.flags[f] {
			t.Errorf("parseHelp lost --%s", f)
		}
	}
	if !h.subcommands["daemon"] || !h.subcommands["help"] || len(h.subcommands) != 2 {
		t.Errorf("parseHelp subcommands: %v", h.subcommands)
	}
}

// TestHelpIsInTheDocs is the other half of TestDocsCommandsUseRealFlags:
// every flag `agent-backend daemon --help` of the real binary lists (its
// aliases too) appears in README.md or docs/*.md as --name, and every
// command a --help lists, at any depth (`ext check`, `completion bash`),
// appears there as `agent-backend PATH`, by its name or an alias, with
// alternatives written A|B (`agent-backend ext test|check DIR`); a command
// named names the commands above it (`site serve`, `site`), so a flag
// or command added to the binary cannot be left out of what users read.
func TestHelpIsInTheDocs(t *testing.T) {
	const root = "../.."
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, f := range append(docs, filepath.Join(root, "README.md")) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text.Write(b)
		text.WriteByte('\n')
	}
	all := text.String()

	out, errOut, code := run(t, nil, "daemon", "--help")
	if code != 0 {
		t.Fatalf("daemon --help: exit %d\n%s", code, errOut)
	}
	flags := parseHelp(out).flags
	if len(flags) < 50 {
		t.Fatalf("daemon --help lists %d flags; the parse no longer matches it", len(flags))
	}
	for f := range flags {
		if !regexp.MustCompile(`(^|[^A-Za-z0-9-])--` + regexp.QuoteMeta(f) + `($|[^A-Za-z0-9-])`).MatchString(all) {
			t.Errorf("`agent-backend daemon --help` lists --%s, which neither README.md nor docs/ names", f)
		}
	}

	// The commands the docs name, resolved as the binary does (aliases).
	tree := newRootCommand(strings.NewReader(""), io.Discard, io.Discard)
	tree.InitDefaultHelpCmd()
	tree.InitDefaultCompletionCmd()
	documented := map[string]bool{}
	mention := regexp.MustCompile(`agent-backend((?: [a-z][a-z0-9-]*(?:\|[a-z][a-z0-9-]*)*)+)`)
	for _, m := range mention.FindAllStringSubmatch(all, -1) {
		paths := [][]string{nil}
		for _, w := range strings.Fields(m[1]) {
			var next [][]string
			for _, p := range paths {
				for _, alt := range strings.Split(w, "|") {
					next = append(next, append(slices.Clone(p), alt))
				}
			}
			paths = next
		}
		for _, p := range paths {
			c, _, err := tree.Find(p)
			for ; err == nil && c != nil; c = c.Parent() {
				documented[c.CommandPath()] = true // and the commands above it
			}
		}
	}

	// The commands the binary's --help lists, at every depth.
	n := 0
	var walk func(path []string)
	walk = func(path []string) {
		out, errOut, code := run(t, nil, append(slices.Clone(path), "--help")...)
		if code != 0 {
			t.Fatalf("agent-backend %s --help: exit %d\n%s", strings.Join(path, " "), code, errOut)
		}
		for sub := range parseHelp(out).subcommands {
			p := append(slices.Clone(path), sub)
			n++
			if name := "agent-backend " + strings.Join(p, " "); !documented[name] {
				t.Errorf("`%s` is a command --help lists, which neither README.md nor docs/ names as `%s …`", name, name)
			}
			walk(p)
		}
	}
	walk(nil)
	if n < 8 {
		t.Fatalf("the binary's --help lists %d commands; the parse no longer matches it", n)
	}
}

package policy

import (
	"strings"
	"sync/atomic"

	"mvdan.cc/sh/v3/syntax"
)

// Script is a command line parsed once, in bash's dialect by mvdan.cc/sh:
// the policy judges it (Policy.CheckScript) and the executor's direct
// path reads its syntax tree (Syntax), so that a command is parsed once
// whatever looks at it. A Script is not changed by either and may be used
// from several goroutines.
type Script struct {
	src  string
	file *syntax.File
	err  error
}

// parses counts Parse's parses (ParseCount).
var parses atomic.Uint64

// Parse parses command. A command over MaxCommandBytes is not parsed
// (CheckScript refuses it as too large); a parse error is kept in the
// Script, where CheckScript refuses it as unjudgeable and Syntax returns
// it.
func Parse(command string) *Script {
	s := &Script{src: command}
	if len(command) > MaxCommandBytes {
		s.err = errTooLarge
		return s
	}
	parses.Add(1)
	s.file, s.err = parse(command)
	return s
}

// parse is the one parser configuration of the policy: the command itself
// and every script judged inside it (bash -c, heredocs fed to a shell,
// traps, aliases).
func parse(src string) (*syntax.File, error) {
	return syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
}

// ParseCount reports how many command lines Parse has parsed in this
// process (scripts judged inside a command are not counted): the tests
// hold the executor to one parse per command with it.
func ParseCount() uint64 { return parses.Load() }

// Source is the command line as given to Parse.
func (s *Script) Source() string { return s.src }

// Syntax is the parsed command, or why it could not be parsed. The tree
// is shared: the caller must not change it.
func (s *Script) Syntax() (*syntax.File, error) { return s.file, s.err }

type tooLargeError struct{}

func (tooLargeError) Error() string {
	return "the command is larger than the policy judges"
}

var errTooLarge error = tooLargeError{}

// readsDifferently reports, for src parsed into f, what bash 5.2 reads
// differently from mvdan.cc/sh, or "": the policy would judge a command
// other than the one bash runs.
//
//   - A comment ending in a backslash: bash ends the comment at the
//     newline, mvdan.cc/sh goes on with the next line as part of the
//     command before the comment (echo x # \⏎sudo id runs sudo).
//   - A heredoc body line that starts with the delimiter: bash ends the
//     heredoc at `EOF)` inside $(...), mvdan.cc/sh does not.
//   - An unquoted heredoc whose body, with bash's backslash-newline
//     joining, has a line equal to the delimiter earlier than
//     mvdan.cc/sh sees one (E\⏎OF ends the heredoc in bash).
func readsDifferently(src string, f *syntax.File) string {
	why := ""
	syntax.Walk(f, func(n syntax.Node) bool {
		if why != "" {
			return false
		}
		r, ok := n.(*syntax.Redirect)
		if !ok || (r.Op != syntax.Hdoc && r.Op != syntax.DashHdoc) || r.Word == nil || r.Hdoc == nil {
			return true
		}
		delim, quoted := hdocDelim(src, r.Word)
		start, end := int(r.Hdoc.Pos().Offset()), int(r.Hdoc.End().Offset())
		if delim == "" || start < 0 || end > len(src) || start > end {
			return true
		}
		// The body as mvdan.cc/sh read it, up to its closing line.
		lines := strings.Split(src[start:end], "\n")
		joined := ""
		for _, l := range lines {
			if r.Op == syntax.DashHdoc && joined == "" {
				l = strings.TrimLeft(l, "\t")
			}
			if l != delim && strings.HasPrefix(l, delim) {
				why = "bash may end the heredoc " + delim + " at a line that starts with it"
				return false
			}
			if quoted {
				continue
			}
			// bash joins backslash-newline in an unquoted heredoc before
			// it looks for the delimiter.
			if trailingBackslashes(l)%2 == 1 {
				joined += l[:len(l)-1]
				continue
			}
			if joined != "" && joined+l == delim {
				why = "bash ends the heredoc " + delim + " at a line joined by backslash-newline"
				return false
			}
			joined = ""
		}
		return true
	})
	if why != "" || !strings.Contains(src, "#") || !strings.Contains(src, "\\\n") {
		return why
	}
	kf, err := syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(true)).Parse(strings.NewReader(src), "")
	if err != nil {
		return ""
	}
	bad := func(c syntax.Comment) bool {
		return strings.HasSuffix(strings.TrimRight(c.Text, "\n"), "\\")
	}
	for _, c := range kf.Last {
		if bad(c) {
			why = "a comment ends in a backslash: bash ends it at the newline, the parser the policy uses does not"
		}
	}
	syntax.Walk(kf, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.Comment); ok && bad(*c) {
			why = "a comment ends in a backslash: bash ends it at the newline, the parser the policy uses does not"
		}
		if st, ok := n.(*syntax.Stmt); ok {
			for _, c := range st.Comments {
				if bad(c) {
					why = "a comment ends in a backslash: bash ends it at the newline, the parser the policy uses does not"
				}
			}
		}
		return why == ""
	})
	return why
}

// hdocDelim is a heredoc's delimiter as bash compares it (quotes
// removed) and whether any part of it is quoted (then the body is read
// as is).
func hdocDelim(src string, w *syntax.Word) (string, bool) {
	quoted := false
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.SglQuoted, *syntax.DblQuoted:
			quoted = true
		case *syntax.Lit:
			if strings.Contains(p.Value, "\\") {
				quoted = true
			}
		}
	}
	if v, ok := litWord(w); ok {
		return v, quoted
	}
	s, e := int(w.Pos().Offset()), int(w.End().Offset())
	if s < 0 || e > len(src) || s > e {
		return "", quoted
	}
	return src[s:e], quoted
}

func trailingBackslashes(l string) int {
	n := 0
	for n < len(l) && l[len(l)-1-n] == '\\' {
		n++
	}
	return n
}

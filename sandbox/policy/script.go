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

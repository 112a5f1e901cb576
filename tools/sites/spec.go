package sites

import (
	"fmt"
	"regexp"
	"strings"
)

// Part is one element of a tool spec: a literal argv element, a
// placeholder for exactly one element of any value, or a placeholder whose
// value must match a regular expression.
type Part struct {
	Literal string         // when neither Any nor Regex
	Any     bool           // {}
	Regex   *regexp.Regexp // {regex: "..."}; unanchored, as in the reference
}

// Spec is one argv pattern of a page's `tools` list.
type Spec struct {
	Parts []Part
	// NoExtra is the trailing ";": the command may not have more elements
	// than Parts.
	NoExtra bool
	// Line is where the pattern starts in the page (1-based), for errors.
	Line int
}

func (p Part) String() string {
	switch {
	case p.Any:
		return "{}"
	case p.Regex != nil:
		return fmt.Sprintf("{regex: %q}", p.Regex.String())
	}
	return fmt.Sprintf("%q", p.Literal)
}

func (s Spec) String() string {
	parts := make([]string, 0, len(s.Parts)+1)
	for _, p := range s.Parts {
		parts = append(parts, p.String())
	}
	if s.NoExtra {
		parts = append(parts, `";"`)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Match reports whether argv is allowed by s: every part matches the
// element at its position (a placeholder needs an element to be there), and
// extra trailing elements are allowed unless NoExtra.
func (s Spec) Match(argv []string) bool {
	if len(argv) < len(s.Parts) || len(s.Parts) == 0 {
		return false
	}
	if s.NoExtra && len(argv) != len(s.Parts) {
		return false
	}
	for i, p := range s.Parts {
		switch {
		case p.Any:
		case p.Regex != nil:
			if !p.Regex.MatchString(argv[i]) {
				return false
			}
		default:
			if argv[i] != p.Literal {
				return false
			}
		}
	}
	return true
}

// FirstMatch returns the first spec that allows argv; the reference tries
// them in order and the first match wins.
func FirstMatch(specs []Spec, argv []string) (Spec, bool) {
	for _, s := range specs {
		if s.Match(argv) {
			return s, true
		}
	}
	return Spec{}, false
}

package fsops

import (
	"path"
	"strings"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// globMatch reports whether the slash-separated relative path name matches
// the glob pattern with the semantics of minimatch(name, pattern, {dot: true}),
// which the reference's search_files and directory_tree use:
//   - "*", "?" and "[...]" ("[!...]" or "[^...]" negate) match within one
//     path segment; "\" escapes;
//   - a "**" segment matches any number of segments, including none;
//   - "{a,b}" alternatives expand (nested braces too);
//   - dot files are matched like any other name (dot: true);
//   - there is no basename matching: "*.go" matches "a.go", not "d/a.go";
//   - a leading "!" negates the pattern.
func globMatch(pattern, name string) bool {
	neg := false
	for strings.HasPrefix(pattern, "!") {
		neg = !neg
		pattern = pattern[1:]
	}
	m := false
	for _, p := range expandBraces(pattern) {
		if matchSegments(splitSegs(p), splitSegs(name)) {
			m = true
			break
		}
	}
	return m != neg
}

func splitSegs(s string) []string {
	s = strings.TrimPrefix(s, "./")
	if s == "" {
		return nil
	}
	segs := strings.Split(s, "/")
	// Collapse empty segments from "a//b" and a trailing slash.
	out := segs[:0]
	for _, g := range segs {
		if g != "" {
			out = append(out, g)
		}
	}
	return out
}

// matchSegments matches the path's segments against the pattern's: a "**"
// segment matches any number of segments (a trailing one at least one),
// any other segment one (matchSegment). It is the classic wildcard match,
// "**" as the star: on a mismatch only the last "**" seen takes one more
// segment, which is enough because a later "**" can absorb whatever an
// earlier one could. So it takes at most len(pat)*len(name) steps, where
// trying every split at every "**" took exponential time:
// "**/a/**/a/**/a/**/a/**/a/**/b" against 60 segments of "a" ran for hours.
func matchSegments(pat, name []string) bool {
	// A trailing "**" (consecutive ones collapsed) needs a segment: match it
	// as any one segment followed by "**".
	anyLast := false
	if n := len(pat); n > 0 && pat[n-1] == "**" {
		for n > 1 && pat[n-2] == "**" {
			n--
		}
		pat, anyLast = pat[:n-1], true
	}
	np := len(pat)
	if anyLast {
		np += 2
	}
	seg := func(i int) (star, any bool, s string) {
		switch {
		case i < len(pat):
			return pat[i] == "**", false, pat[i]
		case i == len(pat):
			return false, true, ""
		}
		return true, false, ""
	}
	p, n := 0, 0
	starP, starN := -1, 0
	for n < len(name) {
		if p < np {
			star, any, s := seg(p)
			if star {
				starP, starN = p, n
				p++
				continue
			}
			if any || matchSegment(s, name[n]) {
				p++
				n++
				continue
			}
		}
		if starP < 0 {
			return false
		}
		p = starP + 1
		starN++
		n = starN
	}
	for p < np {
		if star, _, _ := seg(p); !star {
			return false
		}
		p++
	}
	return true
}

// matchSegment matches one segment; a malformed class is compared literally.
func matchSegment(pat, name string) bool {
	if !strings.ContainsAny(pat, `*?[\`) {
		return pat == name
	}
	p := strings.ReplaceAll(pat, "[!", "[^")
	ok, err := path.Match(p, name)
	if err != nil {
		return pat == name
	}
	return ok
}

// MaxGlobBytes is the longest glob pattern accepted, minimatch's own bound
// (MAX_PATTERN_LENGTH, 64 KiB), and maxBraceAlts and maxBraceBytes bound
// what a pattern's braces expand to: "{a,b}" twenty times is a million
// patterns, each matched against every path.
const (
	MaxGlobBytes  = 64 << 10
	maxBraceAlts  = 4096
	maxBraceBytes = 1 << 20
)

// checkGlob refuses a pattern over MaxGlobBytes or whose braces expand past
// maxBraceAlts patterns or maxBraceBytes bytes built on the way (errcode.InvalidArgument),
// before any path is matched.
func checkGlob(op, p, what, pattern string) error {
	if len(pattern) > MaxGlobBytes {
		return errcode.New(errcode.InvalidArgument, op, p, "%s is %d bytes, over the %d-byte limit for a glob pattern", what, len(pattern), MaxGlobBytes)
	}
	if _, ok := expandBracesBounded(pattern); !ok {
		return errcode.New(errcode.InvalidArgument, op, p, "%s's braces expand to more than %d patterns or %d bytes; use fewer {a,b} groups", what, maxBraceAlts, maxBraceBytes)
	}
	return nil
}

// expandBraces expands "{a,b}" alternatives (nested, several groups), as
// minimatch's brace expansion does; a brace group without a comma is
// literal. Past maxBraceAlts patterns or maxBraceBytes bytes it stops and
// returns what it has (callers checked the pattern with checkGlob).
func expandBraces(p string) []string {
	out, _ := expandBracesBounded(p)
	return out
}

// expandBracesBounded is expandBraces and whether the expansion is whole.
func expandBracesBounded(p string) ([]string, bool) {
	alts, bytes := maxBraceAlts, maxBraceBytes
	var out []string
	ok := expandInto(p, &out, &alts, &bytes)
	return out, ok
}

// expandInto appends p's expansions to out while the budgets last.
func expandInto(p string, out *[]string, alts, bytes *int) bool {
	start := -1
	depth := 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '{':
			if depth == 0 {
				start = i
			}
			depth++
		case '}':
			if depth == 0 {
				continue
			}
			depth--
			if depth == 0 {
				as := splitAlts(p[start+1 : i])
				if len(as) < 2 {
					start = -1
					continue
				}
				for _, a := range as {
					// Every string built is charged, the unfinished
					// ones too: a pattern of 10,000 groups would
					// otherwise hold 10,000 copies of itself on its
					// way to its first expansion.
					q := p[:start] + a + p[i+1:]
					if *bytes -= len(q); *bytes < 0 {
						return false
					}
					if !expandInto(q, out, alts, bytes) {
						return false
					}
				}
				return true
			}
		}
	}
	if *alts == 0 {
		return false
	}
	*alts--
	*out = append(*out, p)
	return true
}

func splitAlts(s string) []string {
	var out []string
	depth, last := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[last:i])
				last = i + 1
			}
		}
	}
	return append(out, s[last:])
}

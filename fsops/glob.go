package fsops

import (
	"path"
	"strings"
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

func matchSegments(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			// Collapse consecutive globstars.
			for len(pat) > 1 && pat[1] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 1 {
				return len(name) > 0 // a trailing "**" needs something below
			}
			for i := 0; i <= len(name); i++ {
				if matchSegments(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 || !matchSegment(pat[0], name[0]) {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
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

// expandBraces expands "{a,b}" alternatives (nested, several groups), as
// minimatch's brace expansion does; a brace group without a comma is literal.
func expandBraces(p string) []string {
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
				alts := splitAlts(p[start+1 : i])
				if len(alts) < 2 {
					start = -1
					continue
				}
				var out []string
				for _, a := range alts {
					out = append(out, expandBraces(p[:start]+a+p[i+1:])...)
				}
				return out
			}
		}
	}
	return []string{p}
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

// Package suggest finds the name a user probably meant when they typed one
// that does not exist: a flag, a config-file key, a key of a JSON file the
// daemon reads. It is the one "did you mean" of the daemon, so every such
// message picks the same way.
package suggest

import "strings"

// Closest returns the candidate typed is probably a misspelling of, or ""
// when none is close enough. A candidate matches when it has the same
// letters ignoring case, '_' and '-' (root_dir for rootDir), or when it is
// within one edit (two for names of more than five letters) counting a swap
// of two neighbouring letters as one edit (prot for port). Of several, the
// nearest wins, then the earliest in candidates.
func Closest(typed string, candidates []string) string {
	t := Normalize(typed)
	if t == "" {
		return ""
	}
	limit := 1
	if len(t) > 5 {
		limit = 2
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		d := Distance(t, Normalize(c))
		if d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// Normalize is s lower-cased without '_' and '-': the form in which
// root_dir, rootDir and root-dir are the same name.
func Normalize(s string) string {
	return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
}

// Distance is the optimal string alignment distance between a and b
// (bytes): insertions, deletions, substitutions and swaps of two
// neighbouring bytes, each one edit. Inputs longer than 256 bytes are
// compared by length only, so a hostile name costs no quadratic work.
func Distance(a, b string) int {
	if len(a) > 256 || len(b) > 256 {
		return max(len(a), len(b))
	}
	// Three rows: i-2, i-1, i.
	pp := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], pp[j-2]+1)
			}
		}
		pp, prev, cur = prev, cur, pp
	}
	return prev[len(b)]
}

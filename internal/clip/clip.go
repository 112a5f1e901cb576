// Package clip is the one cut of client-controlled text to a length for a
// message or a log line: s kept whole when it fits, else its first n bytes
// or fewer, ending on a rune boundary so the text stays valid UTF-8, and
// "…" after them. Standard library only, so any package may use it.
//
// TestClipHasOneHome fails on a file that cuts a string and appends a
// marker itself.
//
// It also holds the one list of the values the daemon keeps in clear (its
// tokens) that nothing it writes may show (Secrets, secrets.go), and the
// log handler that redacts those values and cuts each string of a record
// (Handler, log.go).
package clip

import "unicode/utf8"

// Marker is what follows a cut string.
const Marker = "…"

// String is s when it is at most n bytes long; otherwise the longest prefix
// of s of at most n bytes that ends on a rune boundary, followed by Marker.
// A negative n is taken as 0.
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + Marker
}

package fsops

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ShownName is a file name or path as the text tools print it one to a line
// (list_directory, list_directory_with_sizes, search_files, grep's paths):
// quoted as Go's %q would when it holds a control character, a line or
// paragraph separator (U+2028, U+2029) or bytes that are not UTF-8, and as it
// is otherwise. A command in the workspace can make a file named
// "x\n[DIR] secrets", which printed raw is two entries of the listing the
// model reads, or a name whose invalid bytes become U+FFFD on the wire, the
// same text as another file's; quoted, every line is one entry and every
// name its own. The change sets' text (fsops/checkpoint/change.go) shows its
// names with it too; TestShownNameHasOneHome fails on a file that decides
// which names to quote by itself.
func ShownName(s string) string {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || r == '\u2028' || r == '\u2029'
	}) {
		return strconv.Quote(s)
	}
	return s
}

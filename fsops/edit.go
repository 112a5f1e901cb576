package fsops

import (
	"strconv"
	"strings"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// applyEdits is the edit_file semantics of the reference, shared by both
// implementations: CRLF in the file and in every edit is normalised to LF,
// edits apply in order (each sees the result of the previous ones), an oldText
// must occur exactly once unless ReplaceAll, and replacement text is literal.
// It returns the diff of normalised original → result, named p as the caller
// gave it, the result, and whether anything changed. When the diff is too
// large to render (the reference's budget) the diff is the reference's note,
// preceded by "Applied N edit(s) to p" when the file is written. An edit
// whose result would pass max bytes (the maximum read size: what a later
// read or edit of the file accepts) is refused with errcode.TooLarge before
// it is applied, so replaceAll of a short oldText with a long newText, or a
// chain of edits that each double the text, cannot make the daemon build a
// text of any size.
func applyEdits(p, original string, edits []Edit, dryRun bool, max int64) (EditResult, string, bool, error) {
	orig := strings.ReplaceAll(original, "\r\n", "\n")
	mod := orig
	total := 0
	for i, e := range edits {
		old := strings.ReplaceAll(e.OldText, "\r\n", "\n")
		repl := strings.ReplaceAll(e.NewText, "\r\n", "\n")
		if old == "" {
			return EditResult{}, "", false, editErr(p, i, "oldText is empty; give the exact text to replace, with enough context to be unique")
		}
		n := strings.Count(mod, old)
		switch {
		case n == 0:
			return EditResult{}, "", false, editErr(p, i, "could not find exact match for oldText. Check whitespace and line endings, or verify the file state after any preceding edits.")
		case n > 1 && !e.ReplaceAll:
			return EditResult{}, "", false, editErr(p, i, "oldText appears "+strconv.Itoa(n)+" times in the file; pass replaceAll: true to replace every occurrence, or add surrounding context to oldText to make it unique.")
		}
		reps := 1
		if e.ReplaceAll {
			reps = n
		}
		// At most 10 MiB of text and a newText of the body's size: the
		// product stays far inside int64.
		if size := int64(len(mod)) + int64(reps)*(int64(len(repl))-int64(len(old))); size > max {
			return EditResult{}, "", false, errcode.New(errcode.TooLarge, "edit", p,
				"edit %d would make the file %d bytes, over the %d-byte limit for whole-file reads and edits; write the file with write_file, or change it with exec", i+1, size, max)
		}
		if e.ReplaceAll {
			mod = strings.ReplaceAll(mod, old, repl)
			total += n
		} else {
			mod = strings.Replace(mod, old, repl, 1)
			total++
		}
	}
	changed := mod != orig
	d, ok := unifiedDiff(p, orig, mod, 3)
	if !ok {
		d = "--- " + p + "\n+++ " + p + "\n[diff omitted: rendering exceeded the diff budget (15s / " +
			formatCount(diffBudget) + " line edits); file went from " + formatCount(strings.Count(orig, "\n")+1) +
			" to " + formatCount(strings.Count(mod, "\n")+1) + " lines]"
		if !dryRun && changed {
			s := "s"
			if len(edits) == 1 {
				s = ""
			}
			d = "Applied " + strconv.Itoa(len(edits)) + " edit" + s + " to " + p + "\n" + d
		}
	}
	return EditResult{Diff: d, Replacements: total}, mod, changed, nil
}

// editErr names the 1-based index of the failing edit, as the reference does.
func editErr(p string, i int, msg string) error {
	return errcode.New(errcode.EditFailed, "edit", p, "edit %d: %s", i+1, msg)
}

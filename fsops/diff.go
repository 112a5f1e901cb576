package fsops

import (
	"strconv"
	"strings"
)

// The edit diff must be byte-identical to what the reference daemon returns,
// because agents and tests compare it. The reference renders it with the
// `diff` npm package (v9, createTwoFilesPatch, 3 lines of context, file headers
// only), so this file reproduces that package's observable behaviour: its
// variant of Myers' O(ND) algorithm with the same tie-breaking (prefer the
// path furthest along in the old text) and the same pruning of diagonals that
// reached an edge, and its hunk assembly. Different tie-breaking would yield
// equally minimal but differently-shaped diffs.

// diffBudget is the reference's maxEditLength: beyond that many line edits the
// diff is replaced by a one-line note.
const diffBudget = 20000

// lineComp is one run of equal, added or removed lines, in a persistent
// (shared-tail) linked list built backwards.
type lineComp struct {
	count          int
	added, removed bool
	prev           *lineComp
}

type diffPath struct {
	oldPos int
	last   *lineComp
}

// splitTokens splits text into lines that keep their "\n"; a final line
// without one is kept as is, and a trailing "\n" adds no empty line.
func splitTokens(s string) []string {
	if s == "" {
		return nil
	}
	out := make([]string, 0, strings.Count(s, "\n")+1)
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

func addToPath(p *diffPath, added, removed bool, oldInc int) *diffPath {
	last := p.last
	if last != nil && last.added == added && last.removed == removed {
		return &diffPath{oldPos: p.oldPos + oldInc, last: &lineComp{count: last.count + 1, added: added, removed: removed, prev: last.prev}}
	}
	return &diffPath{oldPos: p.oldPos + oldInc, last: &lineComp{count: 1, added: added, removed: removed, prev: last}}
}

func extractCommon(p *diffPath, newT, oldT []string, diag int, work *int64) int {
	oldPos := p.oldPos
	newPos := oldPos - diag
	common := 0
	for newPos+1 < len(newT) && oldPos+1 < len(oldT) && oldT[oldPos+1] == newT[newPos+1] {
		newPos++
		oldPos++
		common++
	}
	*work -= int64(common)
	if common > 0 {
		p.last = &lineComp{count: common, prev: p.last}
	}
	p.oldPos = oldPos
	return newPos
}

// diffWork bounds the steps one diff takes: a path extended to a diagonal
// (an allocation) counts diffStepCost, a line compared along a diagonal one.
// The reference stops at 15 s; the search below 20,000 line edits is
// quadratic in them, and two orderings of the same 50,000 lines took 67 s and
// 9.5 GB of allocations to reach the edit budget, in an edit_file call that
// no deadline stops. The bound is a count, not a clock, so a diff is
// rendered or not whatever the machine's load; past it the diff is the
// budget's note, as past 20,000 line edits.
const (
	diffWork     = 200_000_000
	diffStepCost = 40
)

// diffComponents returns the runs in order, or nil, false when the edit
// script is longer than budget or finding it takes more than diffWork.
func diffComponents(oldT, newT []string, budget int) ([]lineComp, bool) {
	work := int64(diffWork)
	newLen, oldLen := len(newT), len(oldT)
	maxEdit := min(newLen+oldLen, budget)
	if editLowerBound(oldT, newT) > maxEdit {
		// Every line that occurs more often on one side must be inserted or
		// deleted, so the search could only end over budget: skip it.
		return nil, false
	}
	off := maxEdit + 2
	best := make([]*diffPath, 2*off+1)
	best[off] = &diffPath{oldPos: -1}
	newPos := extractCommon(best[off], newT, oldT, 0, &work)
	if best[off].oldPos+1 >= oldLen && newPos+1 >= newLen {
		return flatten(best[off].last), true
	}
	minDiag, maxDiag := -1<<62, 1<<62
	for editLen := 1; editLen <= maxEdit; editLen++ {
		for d := max(minDiag, -editLen); d <= min(maxDiag, editLen); d += 2 {
			removeP, addP := best[off+d-1], best[off+d+1]
			if removeP != nil {
				best[off+d-1] = nil
			}
			canAdd := false
			if addP != nil {
				np := addP.oldPos - d
				canAdd = 0 <= np && np < newLen
			}
			canRemove := removeP != nil && removeP.oldPos+1 < oldLen
			if !canAdd && !canRemove {
				best[off+d] = nil
				continue
			}
			var base *diffPath
			if !canRemove || (canAdd && removeP.oldPos < addP.oldPos) {
				base = addToPath(addP, true, false, 0)
			} else {
				base = addToPath(removeP, false, true, 1)
			}
			if work -= diffStepCost; work < 0 {
				return nil, false
			}
			newPos = extractCommon(base, newT, oldT, d, &work)
			if base.oldPos+1 >= oldLen && newPos+1 >= newLen {
				return flatten(base.last), true
			}
			best[off+d] = base
			if base.oldPos+1 >= oldLen {
				maxDiag = min(maxDiag, d-1)
			}
			if newPos+1 >= newLen {
				minDiag = max(minDiag, d+1)
			}
		}
	}
	return nil, false
}

// editLowerBound is a lower bound of the edit script's length: the lines whose
// counts differ between the two sides must each be added or removed.
func editLowerBound(oldT, newT []string) int {
	counts := make(map[string]int, len(oldT))
	for _, l := range oldT {
		counts[l]++
	}
	for _, l := range newT {
		counts[l]--
	}
	n := 0
	for _, c := range counts {
		n += max(c, -c)
	}
	return n
}

func flatten(last *lineComp) []lineComp {
	n := 0
	for c := last; c != nil; c = c.prev {
		n++
	}
	out := make([]lineComp, n)
	for c := last; c != nil; c = c.prev {
		n--
		out[n] = *c
		out[n].prev = nil
	}
	return out
}

type hunk struct {
	oldStart, oldLines, newStart, newLines int
	lines                                  []string
}

// unifiedDiff renders the patch of old → new with file headers only, as the
// reference does. ok is false when the diff exceeded the budget.
func unifiedDiff(name, oldS, newS string, context int) (string, bool) {
	oldT, newT := splitTokens(oldS), splitTokens(newS)
	comps, ok := diffComponents(oldT, newT, diffBudget)
	if !ok {
		return "", false
	}
	// Give each run its lines; removed runs come from the old text, the rest
	// from the new text (equal runs are identical in both).
	type run struct {
		lines          []string
		added, removed bool
	}
	runs := make([]run, 0, len(comps)+1)
	op, np := 0, 0
	for _, c := range comps {
		switch {
		case c.removed:
			runs = append(runs, run{oldT[op : op+c.count], false, true})
			op += c.count
		case c.added:
			runs = append(runs, run{newT[np : np+c.count], true, false})
			np += c.count
		default:
			runs = append(runs, run{newT[np : np+c.count], false, false})
			np += c.count
			op += c.count
		}
	}
	runs = append(runs, run{}) // sentinel, as the reference appends one

	var hunks []hunk
	oldRangeStart, newRangeStart, oldLine, newLine := 0, 0, 1, 1
	var cur []string
	for i, r := range runs {
		if r.added || r.removed {
			if oldRangeStart == 0 {
				oldRangeStart, newRangeStart = oldLine, newLine
				if i > 0 {
					prev := runs[i-1].lines
					ctx := prev[max(0, len(prev)-context):]
					if context <= 0 {
						ctx = nil
					}
					cur = cur[:0]
					for _, l := range ctx {
						cur = append(cur, " "+l)
					}
					oldRangeStart -= len(ctx)
					newRangeStart -= len(ctx)
				}
			}
			mark := "-"
			if r.added {
				mark = "+"
			}
			for _, l := range r.lines {
				cur = append(cur, mark+l)
			}
			if r.added {
				newLine += len(r.lines)
			} else {
				oldLine += len(r.lines)
			}
			continue
		}
		if oldRangeStart != 0 {
			if len(r.lines) <= context*2 && i < len(runs)-2 {
				for _, l := range r.lines {
					cur = append(cur, " "+l)
				}
			} else {
				n := min(len(r.lines), context)
				for _, l := range r.lines[:n] {
					cur = append(cur, " "+l)
				}
				hunks = append(hunks, hunk{
					oldStart: oldRangeStart, oldLines: oldLine - oldRangeStart + n,
					newStart: newRangeStart, newLines: newLine - newRangeStart + n,
					lines: append([]string(nil), cur...),
				})
				oldRangeStart, newRangeStart = 0, 0
				cur = cur[:0]
			}
		}
		oldLine += len(r.lines)
		newLine += len(r.lines)
	}

	var b strings.Builder
	qn := quoteFileName(name)
	b.WriteString("--- " + qn + "\n+++ " + qn)
	for _, h := range hunks {
		os, ns := h.oldStart, h.newStart
		if h.oldLines == 0 {
			os--
		}
		if h.newLines == 0 {
			ns--
		}
		b.WriteString("\n@@ -" + strconv.Itoa(os) + "," + strconv.Itoa(h.oldLines) + " +" + strconv.Itoa(ns) + "," + strconv.Itoa(h.newLines) + " @@")
		for _, l := range h.lines {
			b.WriteByte('\n')
			if strings.HasSuffix(l, "\n") {
				b.WriteString(l[:len(l)-1])
			} else {
				b.WriteString(l)
				b.WriteString("\n\\ No newline at end of file")
			}
		}
	}
	b.WriteByte('\n')
	return b.String(), true
}

// quoteFileName C-quotes a name with control, non-ASCII, '"' or '\' bytes,
// as Git, GNU diff and the reference's diff package do.
func quoteFileName(s string) string {
	need := false
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			need = true
			break
		}
	}
	if !need {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case 0x07:
			b.WriteString(`\a`)
		case 0x08:
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case 0x0b:
			b.WriteString(`\v`)
		case 0x0c:
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		default:
			if c >= 0x20 && c <= 0x7e {
				b.WriteByte(c)
			} else {
				o := strconv.FormatInt(int64(c), 8)
				b.WriteByte('\\')
				b.WriteString(strings.Repeat("0", 3-len(o)) + o)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// formatCount renders n with en-US thousands separators ("4,512").
func formatCount(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// UnifiedDiff renders old → new as a unified diff with 3 lines of context and
// file headers naming name, the same rendering the edit tool returns. ok is
// false when the edit script is too long to render (beyond diffBudget line
// edits), so callers can say the diff was left out rather than show a partial
// one.
func UnifiedDiff(name, oldS, newS string) (diff string, ok bool) {
	return unifiedDiff(name, oldS, newS, 3)
}

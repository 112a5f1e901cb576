package policy

import (
	"strconv"

	"mvdan.cc/sh/v3/syntax"
)

// maxBraceWords bounds the words one simple command's brace expansions
// may make; more is refused as too complex (bash would make them all).
const maxBraceWords = 256

// braceExpand does bash's brace expansion on words, as the shell does
// before anything else: `{"sudo",x} id` runs sudo, `rm -rf {"/",x}`
// removes /. It returns the words unchanged when none has a brace
// expansion. ok is false when the expansion makes more than
// maxBraceWords words. The words are not changed (the syntax tree is
// shared with the executor): each is copied before syntax.SplitBraces.
func braceExpand(words []*syntax.Word) (out []*syntax.Word, changed, ok bool) {
	made := 0
	for _, w := range words {
		cp := &syntax.Word{Parts: make([]syntax.WordPart, len(w.Parts))}
		for i, p := range w.Parts {
			if l, isLit := p.(*syntax.Lit); isLit {
				l2 := *l
				cp.Parts[i] = &l2
			} else {
				cp.Parts[i] = p
			}
		}
		if !syntax.SplitBraces(cp) || !hasBraceExp(cp) {
			out = append(out, w)
			continue
		}
		changed = true
		exp, fine := expandBraceWord(cp, maxBraceWords-made)
		if !fine {
			return nil, true, false
		}
		made += len(exp)
		out = append(out, exp...)
	}
	return out, changed, true
}

func hasBraceExp(w *syntax.Word) bool {
	for _, p := range w.Parts {
		if _, ok := p.(*syntax.BraceExp); ok {
			return true
		}
	}
	return false
}

// expandBraceWord expands the BraceExp parts of w (left to right, as
// bash does), making at most max words.
func expandBraceWord(w *syntax.Word, max int) ([]*syntax.Word, bool) {
	for i, p := range w.Parts {
		br, isBrace := p.(*syntax.BraceExp)
		if !isBrace {
			continue
		}
		var alts [][]syntax.WordPart
		if br.Sequence {
			seq, fine := braceSequence(br)
			if !fine {
				return nil, false
			}
			for _, s := range seq {
				alts = append(alts, []syntax.WordPart{&syntax.Lit{Value: s}})
			}
		} else {
			for _, e := range br.Elems {
				alts = append(alts, e.Parts)
			}
		}
		var out []*syntax.Word
		for _, alt := range alts {
			parts := append(append(append([]syntax.WordPart(nil), w.Parts[:i]...), alt...), w.Parts[i+1:]...)
			rest, fine := expandBraceWord(&syntax.Word{Parts: parts}, max-len(out))
			if !fine {
				return nil, false
			}
			out = append(out, rest...)
			if len(out) > max {
				return nil, false
			}
		}
		return out, true
	}
	return []*syntax.Word{w}, max >= 1
}

// braceSequence is the values of {a..b} or {a..b..step}: integers or
// single letters.
func braceSequence(br *syntax.BraceExp) ([]string, bool) {
	var ends []string
	for _, e := range br.Elems {
		v, ok := litWord(e)
		if !ok {
			return nil, false
		}
		ends = append(ends, v)
	}
	if len(ends) < 2 || len(ends) > 3 {
		return nil, false
	}
	step := 1
	if len(ends) == 3 {
		n, err := strconv.Atoi(ends[2])
		if err != nil {
			return nil, false
		}
		if step = n; step < 0 {
			step = -step
		}
		if step == 0 {
			step = 1
		}
	}
	from, err1 := strconv.Atoi(ends[0])
	to, err2 := strconv.Atoi(ends[1])
	letters := false
	if err1 != nil || err2 != nil {
		if len(ends[0]) != 1 || len(ends[1]) != 1 {
			return nil, false
		}
		from, to, letters = int(ends[0][0]), int(ends[1][0]), true
	}
	if (to-from)/step > maxBraceWords || (from-to)/step > maxBraceWords {
		return nil, false
	}
	var out []string
	for v := from; ; {
		if letters {
			out = append(out, string(rune(v)))
		} else {
			out = append(out, strconv.Itoa(v))
		}
		if v == to || (from < to && v+step > to) || (from > to && v-step < to) {
			break
		}
		if from < to {
			v += step
		} else {
			v -= step
		}
	}
	return out, true
}

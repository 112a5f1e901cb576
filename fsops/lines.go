package fsops

import (
	"bufio"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// Line paging defaults of read_text_file (reference 0.13.2).
const (
	DefaultLineLimit = 1000
	MaxLineLimit     = 5000
)

// Lines are counted the way the reference counts them, by splitting the text
// on "\n": a file "a\nb\n" has three lines, the last one empty, and an empty
// file has one empty line. A cut line keeps its first MaxLineLength characters
// followed by the reference's inline marker
// "… [line truncated, original N chars]".

func (lr LineRange) check(op, p string) error {
	if lr.Offset < 0 || lr.Limit < 0 || lr.Head < 0 || lr.Tail < 0 {
		return errcode.New(errcode.InvalidArgument, op, p, "offset, limit, head and tail must not be negative")
	}
	return nil
}

// window returns the 1-based first line and the number of lines wanted, for a
// file of total lines (needed only for Tail).
func (lr LineRange) window(total int) (first, n int) {
	switch {
	case lr.Head > 0:
		return 1, min(lr.Head, MaxLineLimit)
	case lr.Tail > 0:
		n = min(lr.Tail, MaxLineLimit)
		return max(1, total-n+1), n
	}
	first = max(lr.Offset, 1)
	n = lr.Limit
	if n == 0 {
		n = DefaultLineLimit
	}
	return first, min(n, MaxLineLimit)
}

// bytesToString views b as a string without copying; b must not change
// afterwards (the read paths allocate b for this purpose only).
func bytesToString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// pageString pages text held in memory. The returned lines are substrings of
// text: no per-line allocation unless a line is cut.
func pageString(text string, lr LineRange) Lines {
	total := strings.Count(text, "\n") + 1
	first, n := lr.window(total)
	out := Lines{First: first, Last: first - 1, Total: total}
	if first > total {
		return out
	}
	// Skip to line first.
	pos := 0
	for i := 1; i < first; i++ {
		pos += strings.IndexByte(text[pos:], '\n') + 1
	}
	cnt := min(n, total-first+1)
	start, end := pos, pos // text[start:end] is the page's lines joined
	out.Lines = make([]string, 0, cnt)
	for i := 0; i < cnt; i++ {
		nl := strings.IndexByte(text[pos:], '\n')
		var line string
		if nl < 0 {
			line = text[pos:]
			pos = len(text)
			end = pos
		} else {
			line = text[pos : pos+nl]
			end = pos + nl
			pos = end + 1
		}
		if cut, ok := cutLine(line); ok {
			line = cut
			out.CutLines++
		}
		out.Lines = append(out.Lines, line)
	}
	out.Last = first + cnt - 1
	out.WholeFile = first == 1 && cnt >= total
	if out.CutLines == 0 {
		out.text, out.joined = text[start:end], true
	}
	return out
}

// cutLine shortens a line longer than MaxLineLength characters.
func cutLine(line string) (string, bool) {
	if len(line) <= MaxLineLength { // bytes >= characters
		return line, false
	}
	chars := utf8.RuneCountInString(line)
	if chars <= MaxLineLength {
		return line, false
	}
	end, k := 0, 0
	for end = range line {
		if k == MaxLineLength {
			break
		}
		k++
	}
	return line[:end] + "… [line truncated, original " + strconv.Itoa(chars) + " chars]", true
}

// pageReader pages a large file without holding it: it keeps only the wanted
// lines (a ring of the last n for Tail) and counts the rest.
func pageReader(r io.Reader, lr LineRange) (Lines, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		lines []string
		total int
		first int
		n     int
		cut   int
		cuts  []bool
	)
	if lr.Tail == 0 {
		first, n = lr.window(0)
	} else {
		_, n = lr.window(0)
	}
	var cur []byte
	for {
		chunk, err := br.ReadSlice('\n')
		cur = append(cur, chunk...)
		if err == bufio.ErrBufferFull {
			if len(cur) > 64<<20 { // keep memory bounded on absurd lines
				cur = cur[:64<<20]
			}
			continue
		}
		if err != nil && err != io.EOF {
			return Lines{}, err
		}
		eof := err == io.EOF
		line := cur
		if !eof {
			line = cur[:len(cur)-1]
		}
		total++
		keep := false
		if lr.Tail > 0 {
			keep = true
		} else if total >= first && total < first+n {
			keep = true
		}
		if keep {
			s, ok := cutLine(string(line))
			lines = append(lines, s)
			cuts = append(cuts, ok)
			if lr.Tail > 0 && len(lines) > n {
				lines, cuts = lines[1:], cuts[1:]
			}
		}
		cur = cur[:0]
		if eof {
			break
		}
	}
	if lr.Tail > 0 {
		first = total - len(lines) + 1
	}
	for _, c := range cuts {
		if c {
			cut++
		}
	}
	out := Lines{Lines: lines, First: first, Last: first + len(lines) - 1, Total: total, CutLines: cut}
	out.WholeFile = first == 1 && len(lines) >= total
	return out, nil
}

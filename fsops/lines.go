package fsops

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
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

// errScanLimit: the reader gave more than MaxScanSize bytes.
var errScanLimit = errors.New("scan limit reached")

// longLineKeep is how much of a line pageReader keeps: enough bytes for
// MaxLineLength characters of any width. The rest is only counted, so a
// line of any length costs this much memory.
const longLineKeep = MaxLineLength * utf8.UTFMax

// ctxCheckBytes: pageReader looks at ctx after this many bytes.
const ctxCheckBytes = 1 << 20

// pageReader pages a large file without holding it: it keeps only the
// wanted lines and counts the rest in whole blocks (bytes.Count), so a file
// of a billion empty lines costs no more than one of a few long ones. Tail
// counts the lines first and then reads the page. It reads at most
// MaxScanSize bytes per pass (errScanLimit past that) and stops with ctx's
// error when ctx is done.
func pageReader(ctx context.Context, r io.ReadSeeker, lr LineRange) (Lines, error) {
	first, n := lr.window(0)
	if lr.Tail > 0 {
		total := 1
		if err := scanBlocks(ctx, r, func(b []byte) { total += bytes.Count(b, newline) }); err != nil {
			return Lines{}, err
		}
		first, n = lr.window(total)
		if _, err := r.Seek(0, io.SeekStart); err != nil {
			return Lines{}, err
		}
	}
	var (
		lines []string
		cut   int
		line  = 1    // the number of the line being read
		cur   []byte // its first longLineKeep bytes, when it is wanted
		rc    runeCounter
	)
	wanted := func() bool { return line >= first && line < first+n }
	finish := func() {
		var s string
		var ok bool
		if rc.bytes <= int64(len(cur)) {
			s, ok = cutLine(string(cur))
		} else {
			// More than longLineKeep bytes: more than MaxLineLength
			// characters, whatever their width.
			s, ok = cutLongLine(cur, rc.count()), true
		}
		lines = append(lines, s)
		if ok {
			cut++
		}
		cur, rc = cur[:0], runeCounter{}
	}
	err := scanBlocks(ctx, r, func(data []byte) {
		for len(data) > 0 {
			if line >= first+n {
				line += bytes.Count(data, newline) // past the page: count only
				return
			}
			if line < first {
				if c := bytes.Count(data, newline); line+c < first {
					line += c // the whole block is before the page
					return
				}
			}
			i := bytes.IndexByte(data, '\n')
			seg := data
			if i >= 0 {
				seg = data[:i]
			}
			if wanted() {
				if room := longLineKeep - len(cur); room > 0 {
					cur = append(cur, seg[:min(room, len(seg))]...)
				}
				rc.add(seg)
			}
			if i < 0 {
				return
			}
			if wanted() {
				finish()
			}
			line++
			data = data[i+1:]
		}
	})
	if err != nil {
		return Lines{}, err
	}
	if wanted() {
		finish() // the last line, after the last newline (maybe empty)
	}
	out := Lines{Lines: lines, First: first, Last: first + len(lines) - 1, Total: line, CutLines: cut}
	out.WholeFile = first == 1 && len(lines) >= line
	return out, nil
}

var newline = []byte{'\n'}

// scanBlocks feeds r to fn in blocks until EOF: at most MaxScanSize bytes
// (errScanLimit past that), looking at ctx every ctxCheckBytes.
func scanBlocks(ctx context.Context, r io.Reader, fn func([]byte)) error {
	bp := scanBufs.Get().(*[]byte)
	defer scanBufs.Put(bp)
	buf := *bp
	var read, check int64
	for {
		k, err := r.Read(buf)
		if k > 0 {
			read += int64(k)
			if read > MaxScanSize {
				return errScanLimit
			}
			if read-check >= ctxCheckBytes {
				check = read
				if cerr := ctx.Err(); cerr != nil {
					return cerr
				}
			}
			fn(buf[:k])
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

var scanBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// cutLongLine is cutLine for a line of chars characters of which only the
// first longLineKeep bytes were kept.
func cutLongLine(prefix []byte, chars int) string {
	line := string(prefix)
	end, k := len(line), 0 // the prefix may hold exactly MaxLineLength characters
	for i := range line {
		if k == MaxLineLength {
			end = i
			break
		}
		k++
	}
	return line[:end] + "… [line truncated, original " + strconv.Itoa(chars) + " chars]"
}

// runeCounter counts the characters of a byte stream fed in pieces exactly
// as utf8.RuneCount counts the whole: a sequence cut between two pieces
// waits (at most utf8.UTFMax-1 bytes) for the next one.
type runeCounter struct {
	n     int
	bytes int64
	carry []byte
}

func (c *runeCounter) add(b []byte) {
	c.bytes += int64(len(b))
	for len(c.carry) > 0 && len(b) > 0 {
		c.carry = append(c.carry, b[0])
		b = b[1:]
		if utf8.FullRune(c.carry) {
			_, w := utf8.DecodeRune(c.carry)
			c.n++
			rest := append([]byte(nil), c.carry[w:]...) // after an invalid byte
			c.carry = c.carry[:0]
			c.addRaw(rest)
		}
	}
	c.addRaw(b)
}

// addRaw counts b, keeping an incomplete final sequence as the carry.
func (c *runeCounter) addRaw(b []byte) {
	tail := len(b)
	for i := len(b) - 1; i >= 0 && i >= len(b)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				tail = i
			}
			break
		}
	}
	c.n += utf8.RuneCount(b[:tail])
	c.carry = append(c.carry, b[tail:]...)
}

func (c *runeCounter) count() int { return c.n + utf8.RuneCount(c.carry) }

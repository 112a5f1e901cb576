package mcpbridge

import (
	"bufio"
	"bytes"
	"io"
	"testing"
)

// FuzzReadLine: read line by line, through a buffer smaller than a line,
// a stream gives the lines splitting it at '\n' gives: each of at most
// limit bytes, newline aside, whole; each longer one as tooLong with its
// start: at most headBytes, and at least headBytes or the limit, whichever
// is smaller (where the request's id is).
func FuzzReadLine(f *testing.F) {
	f.Add([]byte("{\"id\":1}\n{\"id\":2}\n"), uint16(8))
	f.Add([]byte("0123456789abcdef0123456789\nshort\n"), uint16(10))
	f.Add([]byte("exactly10!\n0123456789X"), uint16(9)) // limit 10
	f.Add([]byte("data: {}\r\n\r\n"), uint16(3))
	f.Add(bytes.Repeat([]byte("y"), 3000), uint16(2000))
	f.Fuzz(func(t *testing.T, in []byte, lim uint16) {
		limit := int(lim%4096) + 1
		r := bufio.NewReaderSize(bytes.NewReader(in), 16)
		want := bytes.SplitAfter(in, []byte("\n"))
		if len(want[len(want)-1]) == 0 {
			want = want[:len(want)-1]
		}
		for i := 0; ; i++ {
			line, tooLong, err := readLine(r, limit)
			if err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if i == len(want) {
				if len(line) > 0 || tooLong || err != io.EOF {
					t.Fatalf("after the last line: %q, %v, %v", line, tooLong, err)
				}
				return
			}
			w := want[i]
			if over := len(bytes.TrimSuffix(w, []byte("\n"))) > limit; over != tooLong {
				t.Fatalf("line %d (%d bytes, limit %d): tooLong %v", i, len(w), limit, tooLong)
			}
			if tooLong {
				if len(line) > headBytes || !bytes.HasPrefix(w, line) || len(line) < min(headBytes, limit+1) {
					t.Fatalf("line %d, too long: kept %d bytes (%q) of %d", i, len(line), line, len(w))
				}
			} else if !bytes.Equal(line, w) {
				t.Fatalf("line %d: %q, want %q", i, line, w)
			}
			if err == io.EOF {
				if i != len(want)-1 {
					t.Fatalf("EOF at line %d of %d", i, len(want))
				}
				return
			}
		}
	})
}

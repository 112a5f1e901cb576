package fsops

import (
	"strings"
	"testing"
)

// Text must be exactly the lines joined with "\n", whether it is a substring
// of the file (the fast case) or a fresh join (a line was cut).
func TestLinesText(t *testing.T) {
	long := strings.Repeat("x", MaxLineLength+5)
	cases := []struct {
		name   string
		text   string
		lr     LineRange
		joined bool // Text is a substring, not a join
	}{
		{"empty file", "", LineRange{}, true},
		{"one line, no newline", "a", LineRange{}, true},
		{"trailing newline", "a\nb\n", LineRange{}, true},
		{"only newlines", "\n\n\n", LineRange{}, true},
		{"offset into the middle", "1\n2\n3\n4\n", LineRange{Offset: 2, Limit: 2}, true},
		{"page ends on the last line", "1\n2\n3", LineRange{Offset: 2}, true},
		{"page is the final empty line", "1\n2\n", LineRange{Offset: 3}, true},
		{"offset beyond the end", "1\n2\n", LineRange{Offset: 9}, false},
		{"head", "1\n2\n3\n", LineRange{Head: 2}, true},
		{"tail", "1\n2\n3\n", LineRange{Tail: 2}, true},
		{"crlf kept", "a\r\nb\r\n", LineRange{}, true},
		{"a cut line", "a\n" + long + "\nb", LineRange{}, false},
		{"a cut line outside the page", "a\n" + long + "\nb", LineRange{Limit: 1}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := pageString(c.text, c.lr)
			want := strings.Join(l.Lines, "\n")
			if got := l.Text(); got != want {
				t.Fatalf("Text() = %q, want the joined lines %q", got, want)
			}
			if l.joined != c.joined {
				t.Fatalf("joined = %v, want %v", l.joined, c.joined)
			}
		})
	}
}

// The read paths that do not page from memory (files over the stream
// threshold, the zero value) fall back to joining.
func TestLinesTextWithoutSubstring(t *testing.T) {
	l := Lines{Lines: []string{"a", "", "b"}}
	if got := l.Text(); got != "a\n\nb" {
		t.Fatalf("Text() = %q", got)
	}
	if got := (Lines{}).Text(); got != "" {
		t.Fatalf("zero Lines: Text() = %q", got)
	}
}

func FuzzLinesText(f *testing.F) {
	f.Add("a\nb\n", 0, 0, 0, 0)
	f.Add("", 1, 1, 0, 0)
	f.Add("\n\n", 2, 0, 0, 0)
	f.Add("x\ny", 0, 0, 0, 1)
	f.Add(strings.Repeat("é", MaxLineLength+1)+"\nz", 0, 0, 1, 0)
	f.Fuzz(func(t *testing.T, text string, offset, limit, head, tail int) {
		lr := LineRange{Offset: offset % 50, Limit: limit % 50, Head: head % 50, Tail: tail % 50}
		if lr.check("fuzz", "f") != nil {
			return
		}
		l := pageString(text, lr)
		if got, want := l.Text(), strings.Join(l.Lines, "\n"); got != want {
			t.Fatalf("pageString(%q, %+v).Text() = %q, want %q", text, lr, got, want)
		}
	})
}

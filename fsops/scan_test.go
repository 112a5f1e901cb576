package fsops

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// A sparse file over MaxScanSize is refused before a byte is read: counting
// its lines would read (zeros) for minutes.
func TestReadLinesRefusesHugeSparseFile(t *testing.T) {
	ws, root := newTestWS(t)
	f, err := os.Create(filepath.Join(root, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, lr := range []LineRange{{}, {Head: 1}, {Tail: 1}, {Offset: 5, Limit: 1}} {
		_, err := ws.ReadLines(context.Background(), "sparse", lr)
		if errcode.Of(err) != errcode.TooLarge || !strings.Contains(err.Error(), "grep") {
			t.Fatalf("ReadLines(%+v) of a 64 GiB sparse file: %v; want TOO_LARGE saying what to use instead", lr, err)
		}
	}
}

// One 200 MiB line (a sparse file: all zeros, no newline) is paged with a
// bounded buffer: the line's first characters and its length, not the line.
func TestReadLinesLongLineMemory(t *testing.T) {
	ws, root := newTestWS(t)
	f, err := os.Create(filepath.Join(root, "zeros"))
	if err != nil {
		t.Fatal(err)
	}
	const size = 200 << 20
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ls, err := ws.ReadLines(context.Background(), "zeros", LineRange{})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if ls.Total != 1 || ls.CutLines != 1 || !strings.HasSuffix(ls.Lines[0], "[line truncated, original 209715200 chars]") {
		t.Fatalf("got total %d, cut %d, line ending %q", ls.Total, ls.CutLines, ls.Lines[0][max(0, len(ls.Lines[0])-60):])
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Fatalf("paging one 200 MiB line allocated %d bytes; the line must not be held", alloc)
	}
}

// Many short lines cost a count, not an allocation each: Tail and an offset
// past the end of 32 MiB of empty lines allocate little.
func TestReadLinesManyLinesAllocations(t *testing.T) {
	ws, root := newTestWS(t)
	if err := os.WriteFile(filepath.Join(root, "nl"), []byte(strings.Repeat("\n", 32<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, lr := range []LineRange{{Tail: MaxLineLimit}, {Offset: 1 << 30}, {Offset: 16 << 20, Limit: 10}} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		ls, err := ws.ReadLines(context.Background(), "nl", lr)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if ls.Total != 32<<20+1 {
			t.Fatalf("%+v: total %d lines, want %d", lr, ls.Total, 32<<20+1)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2<<20 {
			t.Fatalf("%+v over 32 Mi empty lines allocated %d bytes", lr, alloc)
		}
	}
}

// A done context stops the scan.
func TestReadLinesHonoursContext(t *testing.T) {
	ws, root := newTestWS(t)
	f, err := os.Create(filepath.Join(root, "zeros"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ws.ReadLines(ctx, "zeros", LineRange{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadLines with a canceled context: %v; want context.Canceled", err)
	}
}

// The streaming pager and the in-memory one give the same page, long lines
// of wide and invalid characters included (the streaming one counts the
// characters past what it keeps).
func TestPageReaderMatchesPageString(t *testing.T) {
	wide := strings.Repeat("é€😀", 3000)
	invalid := strings.Repeat("a\xe2\x82", 5000) + "\xf0\x90"
	exactFit := strings.Repeat("😀", MaxLineLength) + "tail" // the kept bytes hold exactly MaxLineLength characters
	many := strings.Repeat("line\n", 200000)
	texts := []string{"", "a", "a\nb\n", "\n\n\n", wide, wide + "\n" + invalid + "\nend", exactFit, exactFit + "\n" + exactFit,
		strings.Repeat("x", longLineKeep+1) + "\n" + strings.Repeat("y", 70000), many, many + "last"}
	for i, text := range texts {
		for _, lr := range []LineRange{{}, {Head: 1}, {Head: 3}, {Tail: 1}, {Tail: 3}, {Offset: 2, Limit: 1}, {Offset: 150000, Limit: 5}, {Offset: 10000000}} {
			want := pageString(text, lr)
			got, err := pageReader(context.Background(), strings.NewReader(text), lr)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got.Lines, "\n") != strings.Join(want.Lines, "\n") || got.Total != want.Total || got.CutLines != want.CutLines ||
				got.First != want.First || got.Last != want.Last || got.WholeFile != want.WholeFile {
				t.Errorf("text %d, %+v: pageReader %d lines (total %d, cut %d), pageString %d lines (total %d, cut %d)",
					i, lr, len(got.Lines), got.Total, got.CutLines, len(want.Lines), want.Total, want.CutLines)
			}
		}
	}
}

// runeCounter counts a stream fed in any pieces as utf8.RuneCount counts it
// whole.
func FuzzRuneCounter(f *testing.F) {
	for _, s := range []string{"", "abc", "é€😀", "a\xe2\x82b", "\xf0\x90\x80", "\xff\xfe", "\xe2\x82\xac\xe2"} {
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(2))
	}
	f.Fuzz(func(t *testing.T, b []byte, step uint8) {
		n := int(step%7) + 1
		var c runeCounter
		for rest := b; len(rest) > 0; {
			k := min(n, len(rest))
			c.add(rest[:k])
			rest = rest[k:]
		}
		if got, want := c.count(), utf8.RuneCount(b); got != want {
			t.Fatalf("%q in pieces of %d: %d characters, utf8.RuneCount says %d", b, n, got, want)
		}
		if c.bytes != int64(len(b)) {
			t.Fatalf("counted %d bytes of %d", c.bytes, len(b))
		}
	})
}

func newTestWS(t *testing.T) (Workspace, string) {
	t.Helper()
	root := t.TempDir()
	return newDirWS(t, root), root
}

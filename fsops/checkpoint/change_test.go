package checkpoint

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/fsops"
)

func TestDescribeTextBinaryBudget(t *testing.T) {
	budget := DefaultDiffBudget
	c := Change{Path: "a.txt", Kind: KindModified, Type: TypeFile}
	Describe(&c, []byte("one\ntwo\n"), []byte("one\nthree\n"), &budget)
	if !strings.Contains(c.Diff, "-two\n+three\n") || c.OldSize != 8 || c.NewSize != 10 || c.Binary {
		t.Fatalf("text change: %+v", c)
	}
	if budget != DefaultDiffBudget-len(c.Diff) {
		t.Fatalf("budget %d after a %d-byte diff", budget, len(c.Diff))
	}

	b := Change{Path: "b.bin", Kind: KindAdded, Type: TypeFile}
	Describe(&b, nil, []byte{0, 1, 2}, &budget)
	if !b.Binary || b.Diff != "" || b.NewSize != 3 {
		t.Fatalf("binary change: %+v", b)
	}

	big := make([]byte, MaxTextBytes+1)
	for i := range big {
		big[i] = 'x'
	}
	l := Change{Path: "big.txt", Kind: KindModified, Type: TypeFile}
	Describe(&l, []byte("x"), big, &budget)
	if !l.Binary || l.Diff != "" || !strings.Contains(l.Note, "bytes") {
		t.Fatalf("large change: %+v", l)
	}

	small := 10
	var s ChangeSet
	d := Change{Path: "c.txt", Kind: KindModified, Type: TypeFile}
	Describe(&d, []byte("a\n"), []byte("b\n"), &small)
	s.Add(d)
	if d.Diff != "" || !s.Truncated || !strings.Contains(s.Notice, "limit") || s.Modified != 1 {
		t.Fatalf("over budget: %+v %+v", d, s)
	}
	txt := Text(s)
	if !strings.Contains(txt, "M c.txt") || !strings.Contains(txt, s.Notice) {
		t.Fatalf("text: %q", txt)
	}
}

// TestEncodeManifestIsJSON: the hand-written encoder writes what
// json.Marshal writes, odd names included.
func TestEncodeManifestIsJSON(t *testing.T) {
	m := &Manifest{ID: "cp1-abc", Seq: 1, Label: "l", Scope: "/w", Files: 1, Bytes: 3,
		Entries: []Entry{
			{Path: "a.txt", Type: TypeFile, Mode: 0o644, Size: 3, MTime: 12345, CTime: 6789, Dev: 1, Ino: 2, Hash: "ff"},
			{Path: "dir", Type: TypeDir, Mode: 0o755},
			{Path: "dir/l\"q\\<&>\n\tü", Type: TypeSymlink, Target: "../a.txt"},
		},
		Skipped: map[string]string{"p": "a FIFO"}}
	got, err := encodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(m)
	if string(got) != string(want) {
		t.Fatalf("encoded:\n%s\nwant:\n%s", got, want)
	}
	// A delta: its base, depth and deleted paths come through too.
	m.Base, m.Depth, m.Deleted = "cp-base", 3, []string{"gone", "gone/x"}
	got, _ = encodeManifest(m)
	if want, _ := json.Marshal(m); string(got) != string(want) {
		t.Fatalf("delta encoded:\n%s\nwant:\n%s", got, want)
	}
	m.Entries = nil
	got, _ = encodeManifest(m)
	if want, _ := json.Marshal(m); string(got) != strings.Replace(string(want), `"entries":null`, `"entries":[]`, 1) {
		t.Fatalf("no entries: %s", got)
	}
}

// TestTextEscapesControlCharactersInNames holds that a name the agent gives
// a newline cannot forge lines of the text a reviewer reads: the path, a
// symlink's target, a skipped entry and a diff's header are quoted.
func TestTextEscapesControlCharactersInNames(t *testing.T) {
	var cs ChangeSet
	cs.Add(Change{Path: "notes.txt\nD src/main.go", Kind: KindAdded, Type: TypeFile, NewSize: 1})
	cs.Add(Change{Path: "l", Kind: KindAdded, Type: TypeSymlink, NewTarget: "x\nD etc.conf"})
	d := Change{Path: "m.txt\nD lib.go", Kind: KindModified, Type: TypeFile}
	Describe(&d, []byte("one\n"), []byte("two\n"), nil)
	cs.Add(d)
	cs.Skipped = []string{"fifo\nD skipped.go"}
	txt := Text(cs)
	for _, forged := range []string{"\nD src/main.go", "\nD etc.conf", "\nD lib.go", "\nD skipped.go"} {
		if strings.Contains(txt, forged) {
			t.Fatalf("the change set's text holds a line %q made by a name:\n%s", forged[1:], txt)
		}
	}
	for _, quoted := range []string{`A "notes.txt\nD src/main.go"`, `-> "x\nD etc.conf"`, `"m.txt\nD lib.go"`, `"fifo\nD skipped.go"`} {
		if !strings.Contains(txt, quoted) {
			t.Fatalf("the text does not show %s:\n%s", quoted, txt)
		}
	}
	var plain ChangeSet
	plain.Add(Change{Path: "dir/ü.txt", Kind: KindAdded, Type: TypeFile, NewSize: 1})
	if txt := Text(plain); !strings.Contains(txt, "A dir/ü.txt (1 bytes)\n") {
		t.Fatalf("a plain name is not shown as it is:\n%s", txt)
	}
}

// TestTextQuotesNamesAsTheListingsDo: a change set's text shows a name by
// fsops.ShownName, the listings' rule, so a line separator (U+2028) or bytes
// that are not UTF-8 are quoted here as there: raw, the first reads as a
// line break in the model's text, and the second becomes U+FFFD on the wire,
// the same text as another file's name.
func TestTextQuotesNamesAsTheListingsDo(t *testing.T) {
	for _, name := range []string{"a\u2028D src/main.go", "b\u2029x", "c\xff.txt"} {
		var cs ChangeSet
		cs.Add(Change{Path: name, Kind: KindAdded, Type: TypeFile, NewSize: 1})
		want := "A " + fsops.ShownName(name) + " (1 bytes)\n"
		if want == "A "+name+" (1 bytes)\n" {
			t.Fatalf("fsops.ShownName(%q) does not quote it", name)
		}
		if txt := Text(cs); !strings.Contains(txt, want) {
			t.Errorf("the text does not show %q as the listings do (%s):\n%s", name, want, txt)
		}
	}
}

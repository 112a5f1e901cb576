package policy

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/refusals.golden")

// TestRefusalTextsGolden pins the exact text a client sees for every
// command of both corpora, with and without escape checks: the code, the
// rule and the reason, byte for byte (testdata/refusals.golden; regenerate
// with -update after a deliberate change and review the diff).
func TestRefusalTextsGolden(t *testing.T) {
	var b strings.Builder
	for _, name := range []string{"blocked.txt", "allowed.txt"} {
		for _, c := range readCorpus(t, name) {
			fmt.Fprintf(&b, "%s:%d %q\n", name, c.line, c.command)
			for _, escapes := range []bool{true, false} {
				text, ok := RefusalText(mustPolicy(t, escapes).Check(c.command, corpusBoundary))
				if !ok {
					text = "accepted"
				}
				fmt.Fprintf(&b, "\tescapes=%v %s\n", escapes, text)
			}
		}
	}
	const golden = "testdata/refusals.golden"
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) && i < len(wl); i++ {
			if gl[i] != wl[i] {
				t.Fatalf("%s line %d:\n got %s\nwant %s", golden, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s: %d lines, want %d", golden, len(gl), len(wl))
	}
}

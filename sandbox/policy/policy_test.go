package policy

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// corpusBoundary is the workspace the corpus commands are judged against.
const corpusBoundary = "/home/agent/ws"

type corpusLine struct {
	line       int
	command    string
	escapeOnly bool
}

// readCorpus reads testdata/<name>: one command per line, # comments,
// {WS} for the boundary, ⏎ for a newline, "[escape] " for software-only.
func readCorpus(t testing.TB, name string) []corpusLine {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusLine
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		c := corpusLine{line: n}
		if rest, ok := strings.CutPrefix(l, "[escape] "); ok {
			c.escapeOnly, l = true, rest
		}
		l = strings.ReplaceAll(l, "{WS}", corpusBoundary)
		c.command = strings.ReplaceAll(l, "⏎", "\n")
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustPolicy(t testing.TB, escapes bool, allow ...string) *Policy {
	t.Helper()
	p, err := New(allow...)
	if err != nil {
		t.Fatal(err)
	}
	return p.WithEscapeChecks(escapes)
}

func TestPolicyCorpusBlocked(t *testing.T) {
	cases := readCorpus(t, "blocked.txt")
	if len(cases) < 100 {
		t.Fatalf("blocked corpus has %d commands, want at least 100", len(cases))
	}
	software, bwrap := mustPolicy(t, true), mustPolicy(t, false)
	for _, c := range cases {
		err := software.Check(c.command, corpusBoundary)
		var e *errcode.Error
		if !errors.As(err, &e) {
			t.Errorf("blocked.txt:%d %q: accepted in software mode", c.line, c.command)
			continue
		}
		if e.Code != errcode.DangerousOperation && e.Code != errcode.UnsafeCommand {
			t.Errorf("blocked.txt:%d %q: code %s", c.line, c.command, e.Code)
		}
		if e.Command != c.command || e.Msg == "" {
			t.Errorf("blocked.txt:%d: error %+v does not name the command and rule", c.line, e)
		}
		if !c.escapeOnly {
			if err := bwrap.Check(c.command, corpusBoundary); err == nil {
				t.Errorf("blocked.txt:%d %q: accepted without escape checks (bwrap mode)", c.line, c.command)
			}
		}
	}
}

func TestPolicyCorpusAllowed(t *testing.T) {
	cases := readCorpus(t, "allowed.txt")
	if len(cases) < 100 {
		t.Fatalf("allowed corpus has %d commands, want at least 100", len(cases))
	}
	for _, escapes := range []bool{true, false} {
		p := mustPolicy(t, escapes)
		for _, c := range cases {
			if err := p.Check(c.command, corpusBoundary); err != nil {
				t.Errorf("allowed.txt:%d %q (escape checks %v): %v", c.line, c.command, escapes, err)
			}
		}
	}
}

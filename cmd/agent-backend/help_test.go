package main

import (
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/spf13/pflag"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

var (
	// helpHeading is a section's heading: "Serving flags:".
	helpHeading = regexp.MustCompile(`^(\S.*) flags:$`)
	// helpFlagLine is a flag's own line, as pflag starts it: two spaces
	// and a shorthand, or six spaces; then --name, its value's kind, and
	// the usage after at least three spaces (or on the lines below).
	helpFlagLine = regexp.MustCompile(`^(?:  -[A-Za-z], |      )--([A-Za-z0-9-]+)(?: (\S+))?(?:   +(\S.*))?$`)
)

// helpEntry is one flag as --help lists it: its section, the kind shown
// after its name, and its usage with the lines it continues on.
type helpEntry struct {
	section, kind string
	usage         []string
}

// parseSections reads the flag sections of a --help output: the headings
// in order and each flag's entries (a flag listed twice has two).
func parseSections(t *testing.T, out string) (headings []string, entries map[string][]*helpEntry) {
	t.Helper()
	entries = map[string][]*helpEntry{}
	var last *helpEntry
	for _, l := range strings.Split(out, "\n") {
		if m := helpHeading.FindStringSubmatch(l); m != nil {
			headings = append(headings, m[1])
			last = nil
			continue
		}
		if len(headings) == 0 {
			continue // the description, usage and examples
		}
		if m := helpFlagLine.FindStringSubmatch(l); m != nil {
			last = &helpEntry{section: headings[len(headings)-1], kind: m[2]}
			if m[3] != "" {
				last.usage = append(last.usage, m[3])
			}
			entries[m[1]] = append(entries[m[1]], last)
			continue
		}
		switch text := strings.TrimSpace(l); {
		case text == "":
			last = nil
		case last == nil:
			t.Errorf("--help: a line outside any flag: %q", l)
		case strings.HasPrefix(text, "-"):
			t.Errorf("--help: a continued line begins with a flag and reads as one: %q", l)
		default:
			last.usage = append(last.usage, text)
		}
	}
	return headings, entries
}

// daemonFlags are the flags `agent-backend daemon --help` must list (every
// one not hidden, --help included) and those it must not (the hidden).
func daemonFlags(t *testing.T) (visible []*pflag.Flag, hidden []string) {
	t.Helper()
	root := newRootCommand(strings.NewReader(""), io.Discard, io.Discard)
	d, _, err := root.Find([]string{"daemon"})
	if err != nil {
		t.Fatal(err)
	}
	d.InitDefaultHelpFlag()
	d.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			hidden = append(hidden, f.Name)
		} else {
			visible = append(visible, f)
		}
	})
	if len(hidden) == 0 {
		t.Fatal("daemon has no hidden flag: the test of hidden flags tests nothing")
	}
	return visible, hidden
}

// checkSections holds a --help output to the sections: the groups' headings
// in config.Groups() order then "Other"; every visible flag exactly once,
// under its group's heading (--config, --check-config, --help under Other)
// with its whole usage, default and [env …] and nothing more; hidden flags
// absent; the aliases on their flag's lines; no line wider than width.
func checkSections(t *testing.T, out string, width int) {
	t.Helper()
	var want []string
	group := map[string]string{}
	for _, g := range config.Groups() {
		want = append(want, string(g))
		for _, f := range config.GroupFlags(g) {
			group[f] = string(g)
		}
	}
	want = append(want, otherSection)
	headings, entries := parseSections(t, out)
	if !slices.Equal(headings, want) {
		t.Errorf("--help's sections are %q; want %q", headings, want)
	}
	visible, hidden := daemonFlags(t)
	kinds := []string{"", "string", "int", "duration", "size", "list"}
	for _, f := range visible {
		es := entries[f.Name]
		if len(es) != 1 {
			t.Errorf("--%s is listed %d times; want once", f.Name, len(es))
			continue
		}
		e := es[0]
		wantSection := group[f.Name]
		if wantSection == "" {
			wantSection = otherSection
		}
		if e.section != wantSection {
			t.Errorf("--%s is under %q; want %q", f.Name, e.section, wantSection)
		}
		if !slices.Contains(kinds, e.kind) {
			t.Errorf("--%s shows the value kind %q (a `quoted` word in its usage?); want one of %q", f.Name, e.kind, kinds)
		}
		// Wrapping moves words to other lines, and may cut a long one:
		// every character is there, in order.
		_, usage := flagLine(f)
		squash := func(s string) string { return strings.Join(strings.Fields(s), "") }
		if got := squash(strings.Join(e.usage, " ")); got != squash(usage) {
			t.Errorf("--%s: usage %q; want %q", f.Name, strings.Join(e.usage, " "), usage)
		}
	}
	names := map[string]bool{}
	for _, f := range visible {
		names[f.Name] = true
	}
	for name := range entries {
		if !names[name] {
			t.Errorf("--help lists --%s, which is not a visible flag of daemon", name)
		}
	}
	for _, name := range hidden {
		if strings.Contains(out, "--"+name+" ") {
			t.Errorf("--help lists the hidden flag --%s", name)
		}
	}
	for alias, key := range config.FlagAliases() {
		if es := entries[key]; len(es) != 1 || !strings.Contains(strings.Join(es[0].usage, " "), "(alias --"+alias+")") {
			t.Errorf("--%s's lines do not name its alias --%s", key, alias)
		}
	}
	// The flag sections fit; the description and the examples (commands
	// to copy whole) are as they are written.
	sections := out[strings.Index(out, "\n"+want[0]+" flags:\n"):]
	for i, l := range strings.Split(sections, "\n") {
		if len(l) > width {
			t.Errorf("--help: line %d of the flags is %d wide; the limit is %d: %q", i+1, len(l), width, l)
		}
	}
}

// TestDaemonHelpSections: `agent-backend daemon --help` of the real binary,
// written to a pipe, lists the flags in the groups' sections, each once,
// wrapped to 100 columns.
func TestDaemonHelpSections(t *testing.T) {
	out, errOut, code := run(t, nil, "daemon", "--help")
	if code != 0 || errOut != "" {
		t.Fatalf("daemon --help: exit %d, stderr %q", code, errOut)
	}
	checkSections(t, out, helpWidth)
	for _, s := range []string{"Usage:\n  agent-backend daemon --root DIR [flags]\n", "Examples:\n  agent-backend daemon --root /srv/workspace\n", "Settings come from flags"} {
		if !strings.Contains(out, s) {
			t.Errorf("daemon --help lacks %q", s)
		}
	}
	// `agent-backend help daemon` is the same page.
	if again, _, code := run(t, nil, "help", "daemon"); code != 0 || again != out {
		t.Errorf("help daemon: exit %d, and a page other than daemon --help's:\n%s", code, again)
	}
}

// TestDaemonHelpTerminalWidth: on a terminal, --help wraps to its width; a
// narrow one gets each usage below its flag.
func TestDaemonHelpTerminalWidth(t *testing.T) {
	for _, cols := range []int{80, 60, 160} {
		out := helpOnTerminal(t, cols)
		checkSections(t, out, cols)
		widest := 0
		for _, l := range strings.Split(out, "\n") {
			widest = max(widest, len(l))
		}
		if widest <= cols-20 {
			t.Errorf("%d columns: the widest line is %d: the text is not wrapped to the terminal", cols, widest)
		}
		below := regexp.MustCompile(`(?m)^      --root string\n {10}workspace root`).MatchString(out)
		if below != (cols == 60) {
			t.Errorf("%d columns: usage below the flag is %v; want it only where the column beside is narrower than %d", cols, below, minUsageColumn)
		}
	}
}

// helpOnTerminal runs daemon --help on a terminal cols wide.
func helpOnTerminal(t *testing.T, cols int) string {
	t.Helper()
	cmd := exec.Command(binary, "daemon", "--help")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: uint16(cols)})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	var out syncbuf.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&out, tty); close(copied) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("daemon --help on a terminal did not exit")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("daemon --help on a terminal: exit %d", code)
	}
	select { // the pty reads EIO once the process and its terminal are gone
	case <-copied:
	case <-time.After(10 * time.Second):
		tty.Close()
		<-copied
	}
	return strings.ReplaceAll(out.String(), "\r\n", "\n")
}

// TestUsageWordsFit: in every flag's usage, a flag named stays on the
// line of the word before it (wrapWords) at the narrowest column --help
// uses, so no continued line of --help begins with a flag and reads as one.
func TestUsageWordsFit(t *testing.T) {
	visible, _ := daemonFlags(t)
	for _, f := range visible {
		_, usage := flagLine(f)
		for i, l := range wrapWords(usage, minUsageColumn) {
			if i > 0 && strings.HasPrefix(l, "-") {
				t.Errorf("--%s: at %d columns a line begins with %q; reword its usage so that a word stands between flags it names", f.Name, minUsageColumn, l)
			}
		}
	}
}

func TestWrapWords(t *testing.T) {
	tests := []struct {
		text  string
		width int
		want  []string
	}{
		{"a bb ccc", 4, []string{"a bb", "ccc"}},
		{"", 10, []string{""}},
		// A flag stays with the word before it.
		{"needs the flag --tls-key now", 16, []string{"needs the", "flag --tls-key", "now"}},
		{"x (alias --rootDir) [env A]", 17, []string{"x", "(alias --rootDir)", "[env A]"}},
		// ... unless the two do not fit together.
		{"a --very-long-flag-name", 22, []string{"a", "--very-long-flag-name"}},
		// A word longer than the width is cut after , : or /, else at width.
		{`p {"a":[1,2],"b":3}`, 8, []string{"p", `{"a":[1,`, `2],"b":`, `3}`}},
		{"abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
	}
	for _, tt := range tests {
		if got := wrapWords(tt.text, tt.width); !slices.Equal(got, tt.want) {
			t.Errorf("wrapWords(%q, %d) = %q; want %q", tt.text, tt.width, got, tt.want)
		}
	}
}

func TestParseSections(t *testing.T) {
	out := "Long.\n\nUsage:\n  x\n\nServing flags:\n      --root string   the root\n                      (alias --rootDir)\n  -h, --help   help\n\nOther flags:\n      --root string   again\n"
	headings, entries := parseSections(t, out)
	if !slices.Equal(headings, []string{"Serving", "Other"}) {
		t.Errorf("headings %q", headings)
	}
	if len(entries["root"]) != 2 || entries["root"][0].kind != "string" || !slices.Equal(entries["root"][0].usage, []string{"the root", "(alias --rootDir)"}) || entries["root"][1].section != "Other" {
		t.Errorf("root: %+v", entries["root"])
	}
	if len(entries["help"]) != 1 || entries["help"][0].kind != "" || entries["help"][0].section != "Serving" {
		t.Errorf("help: %+v", entries["help"])
	}
}

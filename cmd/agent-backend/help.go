package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/config"
)

// `agent-backend daemon --help` lists its flags in sections, as docker and
// kubectl do: a heading per config.Groups() group (each setting's group is
// its row in config/settings.go), then "Other flags" for the rest (--config,
// --check-config, --help). Each flag is formatted as pflag formats it (type,
// default, "(alias --rootDir)", "[env …]"), hidden flags stay hidden, and the
// text is wrapped to the terminal's width, or to helpWidth columns when the
// help does not go to a terminal. Held by TestDaemonHelpSections.

const (
	// helpWidth is the width of --help written to a pipe or a file.
	helpWidth = 100
	// minHelpWidth is the narrowest terminal width honoured (a usage below
	// its flag then still gets minUsageColumn); a narrower terminal gets
	// text this wide and folds it.
	minHelpWidth = belowIndent + minUsageColumn
	// minUsageColumn is the narrowest usage column beside the flags; with
	// less room the usage goes on the lines below its flag.
	minUsageColumn = 36
	// belowIndent indents a usage printed below its flag.
	belowIndent = 10
	// otherSection is the heading of the flags that are not settings.
	otherSection = "Other"
)

// flagSection is one heading of the help and the flags under it.
type flagSection struct {
	title string
	flags []*pflag.Flag
}

// helpSections sorts the visible flags of fs into the groups' sections, in
// config.Groups() order, each flag in its group's order; every visible flag
// not in a group (--config, --check-config, --help) goes last, under
// "Other". No visible flag is left out and none appears twice.
func helpSections(fs *pflag.FlagSet) []flagSection {
	placed := map[string]bool{}
	var sections []flagSection
	for _, g := range config.Groups() {
		s := flagSection{title: string(g)}
		for _, name := range config.GroupFlags(g) {
			if f := fs.Lookup(name); f != nil && !f.Hidden && !placed[f.Name] {
				s.flags = append(s.flags, f)
				placed[f.Name] = true
			}
		}
		if len(s.flags) > 0 {
			sections = append(sections, s)
		}
	}
	other := flagSection{title: otherSection}
	fs.VisitAll(func(f *pflag.Flag) { // sorted by name
		if !f.Hidden && !placed[f.Name] {
			other.flags = append(other.flags, f)
		}
	})
	if len(other.flags) > 0 {
		sections = append(sections, other)
	}
	return sections
}

// sectionedUsage is the daemon command's usage function: cobra's Usage and
// Examples, then the flags in sections.
func sectionedUsage(c *cobra.Command) error {
	w := c.OutOrStderr()
	fmt.Fprintf(w, "Usage:\n  %s\n", c.UseLine())
	if c.HasExample() {
		fmt.Fprintf(w, "\nExamples:\n%s\n", c.Example)
	}
	writeSections(w, helpSections(c.Flags()), terminalWidth(c.Root().OutOrStdout()))
	return nil
}

// terminalWidth is w's width when w is a terminal (at least minHelpWidth),
// else helpWidth. (cobra renders the usage into a buffer, so the caller
// passes the writer the help finally goes to.)
func terminalWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			return max(int(ws.Col), minHelpWidth)
		}
	}
	return helpWidth
}

// writeSections writes each section's heading and flags, the usage text
// aligned in one column across the sections and wrapped to width.
func writeSections(w io.Writer, sections []flagSection, width int) {
	type line struct{ left, usage string }
	lines := make([][]line, len(sections))
	column := 0
	for i, s := range sections {
		for _, f := range s.flags {
			left, usage := flagLine(f)
			lines[i] = append(lines[i], line{left, usage})
			column = max(column, len(left)+3)
		}
	}
	below := width-column < minUsageColumn
	for i, s := range sections {
		fmt.Fprintf(w, "\n%s flags:\n", s.title)
		for _, l := range lines[i] {
			if below {
				fmt.Fprintln(w, l.left)
				for _, u := range wrapWords(l.usage, width-belowIndent) {
					fmt.Fprintln(w, strings.Repeat(" ", belowIndent)+u)
				}
				continue
			}
			for j, u := range wrapWords(l.usage, width-column) {
				if j == 0 {
					fmt.Fprintf(w, "%-*s%s\n", column, l.left, u)
				} else {
					fmt.Fprintln(w, strings.Repeat(" ", column)+u)
				}
			}
		}
	}
}

// flagLine is f as pflag's own usage lists it, split into the flag part
// ("      --port int") and the usage with its default ("TCP port … (default
// 3001)"), so the sections keep pflag's format to the letter.
func flagLine(f *pflag.Flag) (left, usage string) {
	one := pflag.NewFlagSet("", pflag.ContinueOnError)
	one.AddFlag(f)
	// One flag: pflag writes the flag part, three spaces, the usage.
	text := strings.TrimRight(one.FlagUsagesWrapped(0), "\n")
	start := len("      --")
	if i := strings.Index(text[start:], "   "); i >= 0 {
		return text[:start+i], strings.TrimSpace(text[start+i+3:])
	}
	return text, ""
}

// wrapWords breaks text into lines of at most width bytes at spaces. A word
// that begins with "-" (a flag such as --tls-key, or "(alias --rootDir)"'s
// second half) stays on the line of the word before it, so no continued
// line begins with a flag and reads as a flag of its own, unless the two do
// not fit on one line together. A word longer than width (a JSON example)
// is cut after its last ',', ':' or '/' that fits, or at width.
func wrapWords(text string, width int) []string {
	width = max(width, 1)
	var tokens [][]string // words kept together: the first, then "-" words
	for _, w := range strings.Fields(text) {
		if strings.HasPrefix(w, "-") && len(tokens) > 0 {
			tokens[len(tokens)-1] = append(tokens[len(tokens)-1], w)
		} else {
			tokens = append(tokens, []string{w})
		}
	}
	var lines []string
	cur := ""
	place := func(w string) {
		switch {
		case cur == "":
		case len(cur)+1+len(w) <= width:
			cur += " " + w
			return
		default:
			lines = append(lines, cur)
		}
		for len(w) > width {
			cut := width
			if i := strings.LastIndexAny(w[:width], ",:/"); i >= width/2 {
				cut = i + 1
			}
			lines = append(lines, w[:cut])
			w = w[cut:]
		}
		cur = w
	}
	for _, t := range tokens {
		if joined := strings.Join(t, " "); len(joined) <= width {
			place(joined)
			continue
		}
		for _, w := range t {
			place(w)
		}
	}
	if cur != "" || len(lines) == 0 {
		lines = append(lines, cur)
	}
	return lines
}

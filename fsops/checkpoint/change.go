// Package checkpoint keeps checkpoints of a workspace: content-addressed,
// deduplicated snapshots under the daemon's state directory, taken
// incrementally (after the first, a checkpoint lists only the directories
// an inotify journal saw change, journal.go, and reads only the files whose
// identity changed), pruned oldest first, and restored file by file through
// fsops.Workspace. It also holds the change-set types that checkpoint_diff and
// command transactions both answer with, and a transaction's side of them: its
// overlay's upper layer read as a change set (ReadUpper, upper.go) and applied
// to the workspace through fsops.Workspace after every path's conflict check
// (Upper.Apply, apply.go).
package checkpoint

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// Kinds of a Change.
const (
	KindAdded    = "added"
	KindModified = "modified"
	KindDeleted  = "deleted"
)

// Types of the entry a Change names.
const (
	TypeFile    = "file"
	TypeDir     = "dir"
	TypeSymlink = "symlink"
)

// MaxTextBytes is the largest file whose content is diffed as text; a larger
// one is described by its sizes only (as binary), so a 10 GB sparse file is
// never read into memory to be diffed.
const MaxTextBytes = 1 << 20

// DefaultDiffBudget is the diff text one change set carries by default; past
// it, diffs are left out and the set says so.
const DefaultDiffBudget = 256 << 10

// Change is one path that differs between two states of the workspace.
type Change struct {
	Path    string `json:"path"`
	Kind    string `json:"kind"` // "added", "modified", "deleted"
	Type    string `json:"type"` // "file", "dir", "symlink"
	OldSize int64  `json:"oldSize,omitempty"`
	NewSize int64  `json:"newSize,omitempty"`
	Binary  bool   `json:"binary,omitempty"`
	Diff    string `json:"diff,omitempty"` // unified diff for text files
	// Note says why a diff is absent where one could be expected (the set's
	// diff limit spent, a file too large to diff as text, an edit too long).
	Note string `json:"note,omitempty"`
	// OldTarget and NewTarget are a symlink's targets.
	OldTarget string `json:"oldTarget,omitempty"`
	NewTarget string `json:"newTarget,omitempty"`

	budgetSpent bool
}

// ChangeSet is every change between two states, sorted by path.
type ChangeSet struct {
	Changes   []Change `json:"changes"`
	Added     int      `json:"added"`
	Modified  int      `json:"modified"`
	Deleted   int      `json:"deleted"`
	Truncated bool     `json:"truncated,omitempty"`
	Notice    string   `json:"notice,omitempty"`
	// Skipped lists entries that were not compared because they are not
	// files, directories or symlinks (FIFOs, sockets, devices): never
	// ignored silently.
	Skipped []string `json:"skipped,omitempty"`
}

// Add appends c, counts it by kind and, when its diff was left out for the
// set's budget, marks the set Truncated with a notice naming the limit.
func (s *ChangeSet) Add(c Change) {
	switch c.Kind {
	case KindAdded:
		s.Added++
	case KindModified:
		s.Modified++
	case KindDeleted:
		s.Deleted++
	}
	if c.budgetSpent && !s.Truncated {
		s.Truncated = true
		s.Notice = "diffs cut: the change set's diff limit of " + strconv.Itoa(DefaultDiffBudget) +
			" bytes is spent; later changes list paths and sizes only (checkpoint_diff with paths shows them)"
	}
	c.budgetSpent = false
	s.Changes = append(s.Changes, c)
}

// Sort orders the changes by path, so equal sets render equally.
func (s *ChangeSet) Sort() {
	sort.SliceStable(s.Changes, func(i, j int) bool { return s.Changes[i].Path < s.Changes[j].Path })
	sort.Strings(s.Skipped)
}

// Describe fills c.Diff, c.Binary and the sizes for one changed file from its
// old and new content (nil = absent), spending at most *budget bytes of diff
// text. When the budget cannot hold the diff, the diff is left out, c.Note
// says so, and ChangeSet.Add marks the set Truncated with a notice naming the
// limit. A caller that already knows a side is too large to diff (over
// MaxTextBytes) sets c.Binary and the sizes itself and passes nil content:
// Describe then keeps them and renders nothing.
func Describe(c *Change, old, new []byte, budget *int) {
	if old != nil {
		c.OldSize = int64(len(old))
	}
	if new != nil {
		c.NewSize = int64(len(new))
	}
	if c.Type != "" && c.Type != TypeFile {
		return
	}
	if c.Binary {
		if c.Note == "" && (c.OldSize > MaxTextBytes || c.NewSize > MaxTextBytes) {
			c.Note = "over " + strconv.Itoa(MaxTextBytes) + " bytes: compared by size and hash, not diffed"
		}
		return
	}
	if len(old) > MaxTextBytes || len(new) > MaxTextBytes {
		c.Binary = true
		c.Note = "over " + strconv.Itoa(MaxTextBytes) + " bytes: compared by size and hash, not diffed"
		return
	}
	if isBinary(old) || isBinary(new) {
		c.Binary = true
		return
	}
	if budget != nil && *budget <= 0 {
		c.Note = "diff left out: the change set's diff limit is spent"
		c.budgetSpent = true
		return
	}
	d, ok := fsops.UnifiedDiff(fsops.ShownName(c.Path), string(old), string(new))
	if !ok {
		c.Note = "diff left out: too many line edits to render"
		if budget != nil {
			// Giving up cost a full diff of the pair: charge what was
			// attempted (a quarter of its bytes), so a set of such files
			// runs few of them rather than one per file.
			*budget = max(0, *budget-failedDiffCost(old, new))
		}
		return
	}
	if budget != nil {
		if len(d) > *budget {
			c.Note = "diff left out: the change set's diff limit is spent"
			c.budgetSpent = true
			*budget = 0
			return
		}
		*budget -= len(d)
	}
	c.Diff = d
}

// failedDiffCost is what a diff that gave up spends of a set's budget:
// a quarter of the bytes it compared.
func failedDiffCost(old, new []byte) int { return (len(old) + len(new)) / 4 }

// isBinary reports content a text diff would garble: a NUL byte in its first
// 8000 bytes (git's rule) or invalid UTF-8.
func isBinary(b []byte) bool {
	head := b
	if len(head) > 8000 {
		head = head[:8000]
	}
	return bytes.IndexByte(head, 0) >= 0 || !utf8.Valid(b)
}

// Text renders s for a tool's text result: a summary line, one line per
// change, then the diffs, then the notices.
func Text(s ChangeSet) string {
	var b strings.Builder
	if len(s.Changes) == 0 {
		b.WriteString("no changes\n")
	} else {
		fmt.Fprintf(&b, "%d changes: %d added, %d modified, %d deleted\n", len(s.Changes), s.Added, s.Modified, s.Deleted)
	}
	for _, c := range s.Changes {
		mark := map[string]string{KindAdded: "A", KindModified: "M", KindDeleted: "D"}[c.Kind]
		fmt.Fprintf(&b, "%s %s", mark, fsops.ShownName(c.Path))
		switch {
		case c.Type == TypeDir:
			b.WriteString("/")
		case c.Type == TypeSymlink:
			switch c.Kind {
			case KindAdded:
				fmt.Fprintf(&b, " -> %s", fsops.ShownName(c.NewTarget))
			case KindDeleted:
				fmt.Fprintf(&b, " -> %s", fsops.ShownName(c.OldTarget))
			default:
				fmt.Fprintf(&b, " -> %s (was %s)", fsops.ShownName(c.NewTarget), fsops.ShownName(c.OldTarget))
			}
		case c.Binary:
			fmt.Fprintf(&b, " (binary, %s)", sizes(c))
		case c.Diff == "":
			fmt.Fprintf(&b, " (%s)", sizes(c))
		}
		if c.Note != "" {
			fmt.Fprintf(&b, " [%s]", c.Note)
		}
		b.WriteString("\n")
	}
	for _, c := range s.Changes {
		if c.Diff != "" {
			b.WriteString(c.Diff)
			if !strings.HasSuffix(c.Diff, "\n") {
				b.WriteString("\n")
			}
		}
	}
	if len(s.Skipped) > 0 {
		shown := make([]string, len(s.Skipped))
		for i, p := range s.Skipped {
			shown[i] = fsops.ShownName(p)
		}
		fmt.Fprintf(&b, "skipped (not a file, directory or symlink): %s\n", strings.Join(shown, ", "))
	}
	if s.Notice != "" {
		b.WriteString(s.Notice + "\n")
	}
	return b.String()
}

// shownName is p as Text prints it: quoted as Go's %q would when it holds
// a control character, so that a name with a newline (which the agent may
// make) cannot forge lines of the text a person or model reviews; other
// names print as they are.
func sizes(c Change) string {
	switch c.Kind {
	case KindAdded:
		return strconv.FormatInt(c.NewSize, 10) + " bytes"
	case KindDeleted:
		return strconv.FormatInt(c.OldSize, 10) + " bytes"
	}
	return strconv.FormatInt(c.OldSize, 10) + " → " + strconv.FormatInt(c.NewSize, 10) + " bytes"
}

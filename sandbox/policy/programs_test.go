package policy

import (
	"strings"
	"testing"
)

// TestProgramTableUnambiguous: each program has one rule. Building the
// table panics on a name given twice; here, a name in the table must also not
// be covered by a pattern (mkfs.*, fsck.*, a versioned interpreter) that
// would give it another rule, and every wrapper is in the table.
func TestProgramTableUnambiguous(t *testing.T) {
	table := programs()
	if len(table) < 200 {
		t.Fatalf("the table has %d programs; it was not built", len(table))
	}
	for name := range table {
		if strings.HasPrefix(name, "mkfs.") || strings.HasPrefix(name, "fsck.") {
			t.Errorf("%s is in the table and matches the mkfs.*/fsck.* pattern", name)
		}
		if u := unversioned(name); u != name && langInterpreters[u] {
			t.Errorf("%s is in the table and is a versioned name of the interpreter %s", name, u)
		}
	}
	for name := range wrappers {
		if r, ok := table[name]; !ok || !r.final {
			t.Errorf("wrapper %s: table entry %v, %v; want a final rule", name, r, ok)
		}
	}
	for _, tc := range []struct{ base, like string }{
		{"mkfs.ext4", "mkfs"}, {"fsck.vfat", "mkfs"}, {"python3.12", "python3"}, {"lua5.4", "lua"},
	} {
		if _, ok := ruleFor(tc.base); !ok {
			t.Errorf("ruleFor(%s): no rule, want %s's", tc.base, tc.like)
		}
	}
	if _, ok := ruleFor("ls"); ok {
		t.Errorf("ruleFor(ls): a rule for a program the policy lets run as it is")
	}
}

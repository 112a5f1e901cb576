package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutsideEveryWay: Outside, the one rule for "an operator path inside
// a place another party reads" (the workspace, the daemon's tool site,
// site serve's DIR), refuses every way of naming a place inside: directly,
// climbing back in with "..", through a symlinked parent, with a trailing
// slash, a file not yet created (an audit log), the area itself named
// through a symlink; it accepts the area's sibling whose name shares its
// prefix, and a path in a directory that holds the area (the area inside
// the operator path's directory is fine, the reverse is not).
func TestOutsideEveryWay(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	site := filepath.Join(base, "site")
	mkdir(t, filepath.Join(site, "sub"))
	mkdir(t, filepath.Join(base, "out"))
	mkdir(t, filepath.Join(base, "site2"))
	mkfile(t, filepath.Join(site, "sub", "token"), "x")
	mkfile(t, filepath.Join(base, "out", "token"), "x")
	mkfile(t, filepath.Join(base, "site2", "token"), "x")
	if err := os.Symlink(filepath.Join(site, "sub"), filepath.Join(base, "out", "into")); err != nil {
		t.Fatal(err)
	}
	siteLink := filepath.Join(base, "site-link")
	if err := os.Symlink(site, siteLink); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, area, p string
		refused       bool
	}{
		{"directly", site, filepath.Join(site, "sub", "token"), true},
		{"the area itself", site, site, true},
		{"climbing back in with ..", site, filepath.Join(base, "out") + "/../site/sub/token", true},
		{"through a symlinked parent", site, filepath.Join(base, "out", "into", "token"), true},
		{"a trailing slash", site, filepath.Join(site, "sub") + "/", true},
		{"a file not yet created", site, filepath.Join(site, "audit.log"), true},
		{"in a directory not yet created", site, filepath.Join(site, "new", "deeper", "audit.log"), true},
		{"the area named through a symlink", siteLink, filepath.Join(site, "sub", "token"), true},
		{"a sibling whose name shares the prefix", site, filepath.Join(base, "site2", "token"), false},
		{"outside", site, filepath.Join(base, "out", "token"), false},
		{"a directory that holds the area", site, filepath.Join(base, "token"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Outside("--flag", c.p, "the area", c.area, "keep it out")
			if !c.refused {
				if err != nil {
					t.Fatalf("Outside(%s, %s): %v", c.area, c.p, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "--flag "+c.p) || !strings.Contains(err.Error(), "lies inside the area "+c.area+", keep it out") {
				t.Fatalf("Outside(%s, %s): %v; want a refusal naming the flag, the path and the area", c.area, c.p, err)
			}
		})
	}
}

// TestSiteRuleOnTheMemoryBackend: the memory backend has no workspace on
// disk, but its tool site is a directory all the same: an operator path
// inside it, even one the daemon has yet to create (the audit log), is
// refused.
func TestSiteRuleOnTheMemoryBackend(t *testing.T) {
	base := t.TempDir()
	site := filepath.Join(base, "site")
	mkdir(t, site)
	mkfile(t, filepath.Join(site, "README.md"), "# site\n")
	c := Default()
	c.Root, c.Backend, c.Site = filepath.Join(base, "ws"), "memory", site
	c.SSHHostKey = filepath.Join(base, "host-key")
	c.AuditLog = filepath.Join(site, "logs", "audit.log")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--audit-log "+c.AuditLog+" lies inside the tool site --site "+site) {
		t.Fatalf("memory backend, --audit-log to be created inside --site: %v", err)
	}
}

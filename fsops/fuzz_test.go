package fsops

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzConfinement plants a link with a fuzzed target inside a workspace that
// sits next to an "outside" directory, then resolves, reads, lists, writes and
// removes a fuzzed path. Nothing resolved may lie outside the root, nothing
// read may be outside content, and nothing outside may change. The corpus is
// in testdata/fuzz/FuzzConfinement.
func FuzzConfinement(f *testing.F) {
	for _, seed := range [][2]string{
		{"fz/secret.txt", "../outside"},
		{"fz", "../outside/secret.txt"},
		{"a/../../outside/secret.txt", "data"},
		{"/etc/passwd", "/etc"},
		{"fz/../fz/secret.txt", "./../outside"},
		{"data/../fz/x", "data/../../outside"},
	} {
		f.Add(seed[0], seed[1])
	}
	fx := newEscapeFixture(f)
	before := snapshot(f, fx.outside)
	link := filepath.Join(fx.root, "fz")
	// Identities of everything outside, to recognise a listed outside entry
	// whatever its name.
	outsideIDs := map[dirID]bool{}
	filepath.Walk(fx.outside, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			i := infoFrom(".", fi)
			outsideIDs[dirID{i.dev, i.ino}] = true
		}
		return nil
	})
	f.Fuzz(func(t *testing.T, p, target string) {
		if strings.IndexByte(target, 0) >= 0 || target == "" {
			return
		}
		os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return
		}
		defer os.Remove(link)
		ws := fx.ws
		if abs, err := ws.Resolve(p); err == nil {
			if !within(ws.Root(), abs) {
				t.Fatalf("Resolve(%q) = %q, outside %q", p, abs, ws.Root())
			}
		}
		if b, err := ws.ReadFile(p); err == nil && strings.Contains(string(b), "SECRET") {
			t.Fatalf("ReadFile(%q) via link %q read outside content", p, target)
		}
		if info, err := ws.Stat(p); err == nil && outsideIDs[dirID{info.dev, info.ino}] {
			t.Fatalf("Stat(%q) via link %q stat-ed outside", p, target)
		}
		if ents, err := ws.ReadDir(p); err == nil {
			for _, e := range ents {
				if outsideIDs[dirID{e.dev, e.ino}] {
					t.Fatalf("ReadDir(%q) via link %q listed outside", p, target)
				}
			}
		}
		ws.WriteFile(p, []byte("FUZZ"))
		ws.Touch(p + "/t")
		ws.Mkdir(p+"/m", true)
		ws.Remove(p+"/m", RemoveOptions{Recursive: true})
		if after := snapshot(t, fx.outside); after != before {
			t.Fatalf("outside changed after ops on %q via link %q", p, target)
		}
	})
}

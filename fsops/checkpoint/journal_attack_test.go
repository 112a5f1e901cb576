package checkpoint

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A hard link made inside the tree, written through, and then removed,
// replaced or moved out of the tree before the next checkpoint leaves no
// multiply-linked file for the walk to see, and link(2) raises no event in
// the directory of the file written: the journal ends its generation.
func TestJournalSeesAWriteThroughAVanishedLink(t *testing.T) {
	for _, c := range []struct {
		name   string
		vanish func(f *fixture, link string) error
	}{
		{"removed", func(f *fixture, link string) error { return os.Remove(link) }},
		{"replaced", func(f *fixture, link string) error {
			other := filepath.Join(f.dir, "b/other")
			return os.Rename(other, link)
		}},
		{"moved out of the tree", func(f *fixture, link string) error {
			return os.Rename(link, filepath.Join(filepath.Dir(f.dir), "outside"))
		}},
		{"moved, then removed", func(f *fixture, link string) error {
			moved := filepath.Join(f.dir, "c/h")
			if err := os.Rename(link, moved); err != nil {
				return err
			}
			return os.Remove(moved)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			ref := referenceStore(t, f)
			f.write(t, "a/f", "before\n")
			f.write(t, "b/other", "x")
			f.write(t, "c/y", "y")
			sameAsFullWalk(t, f.st, ref, f.ws, "first")
			sameAsFullWalk(t, f.st, ref, f.ws, "second")
			link := filepath.Join(f.dir, "b/g")
			if err := os.Link(filepath.Join(f.dir, "a/f"), link); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(link, []byte("after, longer\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := c.vanish(f, link); err != nil {
				t.Fatal(err)
			}
			sameAsFullWalk(t, f.st, ref, f.ws, "written through a link since "+c.name)
		})
	}
}

// The journal's care for made names costs nothing on the daemon's own
// writes (a temporary file renamed over the file): a checkpoint after one,
// and after a file written twice across a checkpoint, is still guided.
func TestJournalWritesThroughTheWorkspaceStayGuided(t *testing.T) {
	f := newFixture(t, nil)
	ref := referenceStore(t, f)
	f.write(t, "a/f", "one\n")
	f.write(t, "b/g", "two\n")
	sameAsFullWalk(t, f.st, ref, f.ws, "first")
	for i, what := range []string{"written", "written again", "written a third time"} {
		if err := f.ws.WriteFile("a/f", []byte(what)); err != nil {
			t.Fatal(err)
		}
		g := f.st.guided.Load()
		sameAsFullWalk(t, f.st, ref, f.ws, what)
		if f.st.guided.Load() != g+1 {
			t.Fatalf("checkpoint %d, after a file %s through the workspace, walked in full", i+2, what)
		}
	}
}

// A made name moved whose IN_MOVED_TO is not read by the next mark is
// gone from the tree as far as the journal knows: that mark is of a new
// generation.
func TestJournalMadeNameMovedAway(t *testing.T) {
	j := newJournal()
	if j == nil {
		t.Skip("no inotify instance")
	}
	defer j.close()
	before := j.mark()
	moved := inotifyEvent(1, unix.IN_MOVED_FROM, "g")
	moved[8] = 7 // its cookie
	j.mu.Lock()
	j.paths[1] = "/ws/b"
	j.record(inotifyEvent(1, unix.IN_CREATE, "g"))
	j.record(moved)
	j.mu.Unlock()
	if after := j.mark(); after.gen == before.gen {
		t.Fatal("a made name moved out of the tree left the generation as it was")
	}
}

// A directory removed and another made or moved in at its path is never
// taken from the base, whatever its inode and times: ext4 gives a new
// directory the inode number just freed, and a directory's times are of
// the clock's tick, so the two can match the base's entry; the new one is
// watched by no one, and was the old one empty, its removal names only
// its parent. The test makes them match by giving the base's entry the
// new directory's identity.
func TestJournalListsADirectoryMadeAtAReusedInode(t *testing.T) {
	for _, how := range []string{"made", "moved in"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture(t, nil)
			ref := referenceStore(t, f)
			f.write(t, "a/keep", "k")
			f.write(t, "b/y", "y")
			// Empty: its removal raises no event that names it.
			if err := os.Mkdir(filepath.Join(f.dir, "a/x"), 0o755); err != nil {
				t.Fatal(err)
			}
			sameAsFullWalk(t, f.st, ref, f.ws, "first")
			sameAsFullWalk(t, f.st, ref, f.ws, "second")
			x := filepath.Join(f.dir, "a/x")
			if err := os.RemoveAll(x); err != nil {
				t.Fatal(err)
			}
			made := x
			if how == "moved in" {
				made = filepath.Join(filepath.Dir(f.dir), "elsewhere")
			}
			for _, p := range []string{"sub", ""} {
				if err := os.MkdirAll(filepath.Join(made, p), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range []string{"f", "sub/g"} {
				if err := os.WriteFile(filepath.Join(made, p), []byte("new, longer\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if made != x {
				if err := os.Rename(made, x); err != nil {
					t.Fatal(err)
				}
			}
			prev, err := f.st.newestOf(f.ws.Root())
			if err != nil {
				t.Fatal(err)
			}
			for i := range prev.Entries {
				e := &prev.Entries[i]
				if e.Path != "a/x" && e.Path != "a/x/sub" {
					continue
				}
				var st unix.Stat_t
				if err := unix.Lstat(filepath.Join(f.dir, e.Path), &st); err != nil {
					t.Fatal(err)
				}
				e.Dev, e.Ino = uint64(st.Dev), uint64(st.Ino)
				e.MTime = int64(st.Mtim.Sec)*1e9 + int64(st.Mtim.Nsec)
				e.CTime = int64(st.Ctim.Sec)*1e9 + int64(st.Ctim.Nsec)
			}
			sameAsFullWalk(t, f.st, ref, f.ws, "a directory "+how+" where one was removed")
		})
	}
}

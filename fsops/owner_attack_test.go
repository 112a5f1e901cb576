package fsops

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// This file: the attack review of Options.Owner (owner.go). The attacker
// is the agent, who drives the file tools and, at the same time, commands
// running as the owner (the --run-as user), which may rename, symlink and
// hard-link whatever that user may: rename within directories it can
// write, hard-link files it owns or may read and write
// (fs.protected_hardlinks=1). The tests run as root (the daemon); the
// attacker's moves are made here by the test, each one a move the user
// could make. Its goal: a change of owner landing on something that is
// not the entry the workspace just created.

// ownerScene is a workspace of the agent's (its root owned by the agent,
// as --run-as needs) on the same file system as two root-owned files
// outside it: shadow (0600), which an operator's hard link op/key inside
// the workspace also names (op is the operator's, root-owned, 0755), and
// shared (0666), which the user may hard-link itself.
type ownerScene struct {
	base, ws       string
	shadow, shared string
	agent          Owner
	w              Workspace
}

func newOwnerScene(t *testing.T) *ownerScene {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "giving a file to another user needs root (the tests run as root in CI)")
	}
	s := &ownerScene{base: testenv.SharedTempDir(t), agent: Owner{UID: 65534, GID: 65533}}
	s.ws = filepath.Join(s.base, "ws")
	etc := filepath.Join(s.base, "etc")
	s.shadow = filepath.Join(etc, "shadow")
	s.shared = filepath.Join(etc, "shared")
	must(t, os.Mkdir(s.ws, 0o755))
	must(t, os.Chown(s.ws, s.agent.UID, s.agent.GID))
	must(t, os.Mkdir(etc, 0o755))
	must(t, os.WriteFile(s.shadow, []byte("root:secret\n"), 0o600))
	must(t, os.WriteFile(s.shared, []byte("shared\n"), 0o666))
	must(t, os.Chmod(s.shared, 0o666))
	must(t, os.Mkdir(filepath.Join(s.ws, "op"), 0o755))
	must(t, os.Link(s.shadow, filepath.Join(s.ws, "op", "key")))
	w, err := NewDir(s.ws, Options{Owner: &s.agent})
	must(t, err)
	t.Cleanup(func() { w.Close() })
	s.w = w
	return s
}

// untouched fails the test where an entry outside the workspace, the
// operator's directory or its hard link, or the workspace root changed
// owner.
func (s *ownerScene) untouched(t *testing.T) {
	t.Helper()
	root := Owner{0, 0}
	for full, want := range map[string]Owner{
		s.shadow: root, s.shared: root,
		filepath.Join(s.ws, "op"): root, filepath.Join(s.ws, "op", "key"): root,
		s.ws: s.agent,
	} {
		if got := ownerOf(t, full); got != want {
			t.Errorf("%s is owned by %d:%d, want %d:%d", full, got.UID, got.GID, want.UID, want.GID)
		}
	}
}

func (s *ownerScene) at(rel string) string { return filepath.Join(s.ws, rel) }

// onRace sets ownRace to f for the test's duration.
func onRace(t *testing.T, f func()) {
	ownRace = f
	t.Cleanup(func() { ownRace = nil })
}

// TestOwnerAttackMkdirSwappedForHardLink: between the mkdir and the change
// of owner, a command moves the new directory away and puts a hard link
// to a root-owned file outside the workspace (one it may read and write,
// so protected_hardlinks lets it link) at its name. The outside file stays
// root's, for Mkdir, Mkdir -p and a WriteFile that creates the parents.
func TestOwnerAttackMkdirSwappedForHardLink(t *testing.T) {
	s := newOwnerScene(t)
	for _, tc := range []struct {
		name string
		do   func() error
		at   string // the directory the swap replaces
	}{
		{"mkdir", func() error { return s.w.Mkdir("d", false) }, "d"},
		{"mkdir -p", func() error { return s.w.Mkdir("e/f", true) }, "e"},
		{"write_file", func() error { return s.w.WriteFile("g/h.txt", []byte("x")) }, "g"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := false
			onRace(t, func() {
				if done {
					return
				}
				done = true
				must(t, os.Rename(s.at(tc.at), s.at(tc.at+".away")))
				must(t, os.Link(s.shared, s.at(tc.at)))
			})
			err := tc.do()
			t.Logf("%s with the swap: %v", tc.name, err)
			if !done {
				t.Fatal("the swap never ran")
			}
			s.untouched(t)
			must(t, os.Remove(s.at(tc.at)))
		})
	}
}

// TestOwnerAttackParentSwappedForSymlink: between the mkdir of p/key and
// the change of owner, a command (which owns p) renames p away and makes p
// a symlink to the operator's op, whose key is a hard link of a root-owned
// file outside. A change of owner that resolved p/key again would land on
// op/key, a directory the user cannot write, and so on the outside file.
func TestOwnerAttackParentSwappedForSymlink(t *testing.T) {
	s := newOwnerScene(t)
	must(t, s.w.Mkdir("p", false)) // the agent's
	done := false
	onRace(t, func() {
		if done {
			return
		}
		done = true
		must(t, os.Rename(s.at("p"), s.at("p.away")))
		must(t, os.Symlink("op", s.at("p")))
	})
	err := s.w.Mkdir("p/key", false)
	t.Logf("mkdir p/key with the swap: %v", err)
	if !done {
		t.Fatal("the swap never ran")
	}
	s.untouched(t)
	if got := ownerOf(t, s.at("p.away/key")); err == nil && got != s.agent {
		t.Errorf("the new directory (moved to p.away/key) is owned by %d:%d, want the agent's", got.UID, got.GID)
	}
}

// TestOwnerAttackSymlinkSwappedForHardLink: between the symlink's creation
// and its change of owner, a command replaces it with a hard link to the
// root-owned file outside (rename over it: one step).
func TestOwnerAttackSymlinkSwappedForHardLink(t *testing.T) {
	s := newOwnerScene(t)
	must(t, os.Link(s.shared, s.at("hl")))
	for _, dir := range []string{".", "sub"} {
		t.Run(dir, func(t *testing.T) {
			must(t, s.w.Mkdir(dir, true))
			link := filepath.Join(dir, "ln")
			done := false
			onRace(t, func() {
				if done {
					return
				}
				done = true
				must(t, os.Rename(s.at("hl"), s.at(link)))
			})
			err := s.w.Symlink("op", link)
			t.Logf("symlink with the swap: %v", err)
			if !done {
				t.Fatal("the swap never ran")
			}
			s.untouched(t)
			must(t, os.Rename(s.at(link), s.at("hl")))
		})
	}
}

// attackRounds bounds the race loops: enough for the swap to land inside
// the window many times where the window is open (a run without the fix
// in owner.go fails), a fraction of a second each.
const attackRounds = 1500

// raceLoop runs attacker in a goroutine until daemon has run rounds
// times, and returns how many times attacker said it swapped.
func raceLoop(t *testing.T, rounds int, daemon func(i int), attacker func() bool) int64 {
	t.Helper()
	var stop atomic.Bool
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if attacker() {
				swaps.Add(1)
			}
		}
	}()
	for i := 0; i < rounds; i++ {
		daemon(i)
	}
	stop.Store(true)
	wg.Wait()
	return swaps.Load()
}

// TestOwnerAttackRaceMkdir: the swap of TestOwnerAttackMkdirSwappedForHardLink
// made by a command looping concurrently (no hook): the directory the
// daemon makes is renamed away as soon as it appears and the hard link
// put in its place; the daemon's round puts both back.
func TestOwnerAttackRaceMkdir(t *testing.T) {
	s := newOwnerScene(t)
	must(t, s.w.Mkdir("r", false))
	must(t, os.Link(s.shared, s.at("hl")))
	d, away, hl := s.at("r/d"), s.at("r/away"), s.at("hl")
	swaps := raceLoop(t, attackRounds, func(int) {
		s.w.Mkdir("r/d", false)
		// The round's end: the hard link back, the directories away.
		if fi, err := os.Lstat(d); err == nil && fi.Mode().IsRegular() {
			os.Rename(d, hl)
		}
		os.Remove(d)
		os.Remove(away)
	}, func() bool {
		var st unix.Stat_t
		if unix.Lstat(d, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || unix.Rename(d, away) != nil {
			return false
		}
		return unix.Rename(hl, d) == nil
	})
	t.Logf("%d rounds, %d swaps", attackRounds, swaps)
	s.untouched(t)
}

// TestOwnerAttackRaceParent: TestOwnerAttackParentSwappedForSymlink's swap
// made by a command looping concurrently.
func TestOwnerAttackRaceParent(t *testing.T) {
	s := newOwnerScene(t)
	must(t, s.w.Mkdir("p", false))
	p, away := s.at("p"), s.at("p.away")
	swaps := raceLoop(t, attackRounds, func(int) {
		s.w.Mkdir("p/key", false)
	}, func() bool {
		if unix.Rename(p, away) != nil {
			return false
		}
		unix.Symlink("op", p)
		unix.Unlink(p)
		unix.Rename(away, p)
		unix.Rmdir(filepath.Join(p, "key"))
		return true
	})
	t.Logf("%d rounds, %d swaps", attackRounds, swaps)
	s.untouched(t)
}

// TestOwnerAttackRaceSymlink: TestOwnerAttackSymlinkSwappedForHardLink's
// swap made by a command looping concurrently.
func TestOwnerAttackRaceSymlink(t *testing.T) {
	s := newOwnerScene(t)
	hl, ln := s.at("hl"), s.at("ln")
	must(t, os.Link(s.shared, hl))
	swaps := raceLoop(t, attackRounds, func(int) {
		s.w.Symlink("op", "ln")
		// The round's end: the hard link back, the symlink away.
		if fi, err := os.Lstat(ln); err == nil && fi.Mode().IsRegular() {
			os.Rename(ln, hl)
		}
		os.Remove(ln)
	}, func() bool {
		if fi, err := os.Lstat(ln); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return false
		}
		return unix.Rename(hl, ln) == nil
	})
	t.Logf("%d rounds, %d swaps", attackRounds, swaps)
	s.untouched(t)
}

// TestOwnerAttackExistingNames: a name that exists when a file tool
// creates (a hard link to the outside file, the operator's hard link, a
// dangling symlink, one leading out) keeps its owner, and nothing outside
// is created or changed: only what an O_EXCL open made is given away.
func TestOwnerAttackExistingNames(t *testing.T) {
	s := newOwnerScene(t)
	must(t, os.Link(s.shared, s.at("hl")))
	must(t, os.Symlink("../etc/new", s.at("out")))
	must(t, os.Symlink("made.txt", s.at("dangling")))
	for _, rel := range []string{"hl", "op/key", "out", "dangling"} {
		if f, err := s.w.OpenFile(rel, os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
			f.Close()
		}
		s.w.Touch(rel)
	}
	s.untouched(t)
	if _, err := os.Lstat(filepath.Join(s.base, "etc", "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a create through a link leading out made etc/new: %v", err)
	}
	// The dangling link's target is created by the plain open, the
	// daemon's (root's): no O_EXCL open proved it new.
	if got := ownerOf(t, s.at("made.txt")); got != (Owner{0, 0}) {
		t.Errorf("made.txt, created through a dangling link, is owned by %d:%d", got.UID, got.GID)
	}
}

// TestOwnerAttackKeepOwner: WriteFile and Edit replacing a file keep the
// owner it had, through a new inode: a hard link to a root-owned file
// outside is replaced, not written through, and the outside file keeps its
// content and owner; a setuid file replaced keeps its owner but loses the
// bit (only the permission bits are kept), so neither the agent nor root
// gets a setuid file with the agent's content.
func TestOwnerAttackKeepOwner(t *testing.T) {
	s := newOwnerScene(t)
	must(t, os.Link(s.shared, s.at("hl")))
	must(t, s.w.WriteFile("hl", []byte("agent\n")))
	must(t, s.w.WriteFile("op/key", []byte("agent\n")))
	s.untouched(t)
	for _, f := range []string{s.shadow, s.shared} {
		if b, _ := os.ReadFile(f); string(b) == "agent\n" {
			t.Errorf("%s was written through its link inside the workspace", f)
		}
	}
	for _, o := range []Owner{{0, 0}, s.agent} {
		p := s.at("suid")
		must(t, os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755))
		must(t, os.Chown(p, o.UID, o.GID))
		must(t, os.Chmod(p, 0o4755|fs.ModeSetuid|fs.ModeSetgid))
		if _, err := s.w.Edit("suid", []Edit{{OldText: "sh", NewText: "bash"}}, false); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(p)
		must(t, err)
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("a setuid file of %d replaced by Edit is %v", o.UID, fi.Mode())
		}
		if got := ownerOf(t, p); got != o {
			t.Errorf("the setuid file of %d is owned by %d after Edit", o.UID, got.UID)
		}
		must(t, os.Remove(p))
	}
}

// TestOwnerAttackSetuidCreate: a file asked for with setuid or setgid in
// its mode (no caller of OpenFile asks: SFTP and scp pass 0644 and 0600)
// is refused by os.Root ("unsupported file mode"), and were it made, the
// change of owner through its descriptor would clear both bits: no setuid
// file of the agent's, nor of root's, comes of it.
func TestOwnerAttackSetuidCreate(t *testing.T) {
	s := newOwnerScene(t)
	for _, mode := range []fs.FileMode{0o755 | fs.ModeSetuid, 0o755 | fs.ModeSetgid} {
		if f, err := s.w.OpenFile("s.bin", os.O_WRONLY|os.O_CREATE, mode); err == nil {
			f.Close()
		}
		fi, err := os.Lstat(s.at("s.bin"))
		if err == nil && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("OpenFile(%v) made %v, owned by %v", mode, fi.Mode(), ownerOf(t, s.at("s.bin")))
		}
		os.Remove(s.at("s.bin"))
	}
	// The kernel's part: a change of owner clears setuid and setgid.
	p := s.at("k.bin")
	must(t, os.WriteFile(p, nil, 0o755))
	must(t, os.Chmod(p, 0o755|fs.ModeSetuid|fs.ModeSetgid))
	f, err := os.Open(p)
	must(t, err)
	defer f.Close()
	must(t, f.Chown(s.agent.UID, s.agent.GID))
	if fi, _ := f.Stat(); fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		t.Errorf("fchown left %v", fi.Mode())
	}
}

// TestOwnerAttackWorkspaceRoot: no operation gives the workspace root (here
// root's) away, whatever the name says of it.
func TestOwnerAttackWorkspaceRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "giving a file to another user needs root (the tests run as root in CI)")
	}
	dir := testenv.SharedTempDir(t)
	w, err := NewDir(dir, Options{Owner: &Owner{UID: 65534, GID: 65533}})
	must(t, err)
	defer w.Close()
	for _, p := range []string{".", "/", dir, dir + "/.", "a/..", ""} {
		w.Mkdir(p, true)
		w.Mkdir(p, false)
		w.Touch(p)
		w.WriteFile(p, []byte("x"))
		if f, err := w.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
			f.Close()
		}
		w.Symlink("x", p)
	}
	if got := ownerOf(t, dir); got != (Owner{0, 0}) {
		t.Errorf("the workspace root is owned by %d:%d", got.UID, got.GID)
	}
}

// TestOwnerThroughAbsoluteLink: a directory made through an absolute
// symlink inside the workspace (os.Root refuses it; the fallback of
// dir_links.go rewrites the name) is made in the link's target and given
// to the owner, as one made by its plain name; Stat shows that owner
// (what SFTP's ls -l prints, ssh/sftpd/wire.go's longname: the numeric uid
// and gid).
func TestOwnerThroughAbsoluteLink(t *testing.T) {
	s := newOwnerScene(t)
	must(t, os.Mkdir(s.at("real"), 0o755))
	must(t, os.Symlink(s.at("real"), s.at("abs")))
	must(t, s.w.Mkdir("abs/new/deep", true))
	must(t, s.w.Symlink("../new", "abs/new/ln"))
	for _, rel := range []string{"real/new", "real/new/deep", "real/new/ln"} {
		if got := ownerOf(t, s.at(rel)); got != s.agent {
			t.Errorf("%s is owned by %d:%d, want the agent's", rel, got.UID, got.GID)
		}
		info, err := s.w.Lstat(rel)
		must(t, err)
		if info.UID != uint32(s.agent.UID) || info.GID != uint32(s.agent.GID) {
			t.Errorf("Lstat(%s) shows %d:%d", rel, info.UID, info.GID)
		}
	}
	if got := ownerOf(t, s.at("real")); got != (Owner{0, 0}) {
		t.Errorf("real, which existed, is owned by %d:%d", got.UID, got.GID)
	}
	s.untouched(t)
}

// TestOwnerGroupInSetgidDir: in a setgid directory of a group the user is
// not in, what the workspace creates gets the owner's primary group, not
// the directory's (which a command of the user's would get there): the
// user never comes to own an entry of a group it is not in, and a new
// directory's inherited setgid bit then names the user's own group. No
// file comes out setuid or setgid.
func TestOwnerGroupInSetgidDir(t *testing.T) {
	s := newOwnerScene(t)
	const staff = 4242
	d := s.at("shared")
	must(t, os.Mkdir(d, 0o775))
	must(t, os.Chown(d, 0, staff))
	must(t, os.Chmod(d, 0o775|fs.ModeSetgid))
	must(t, s.w.WriteFile("shared/f.txt", []byte("x")))
	must(t, s.w.Mkdir("shared/sub/deeper", true))
	must(t, s.w.Touch("shared/t"))
	must(t, s.w.Symlink("f.txt", "shared/ln"))
	for _, rel := range []string{"shared/f.txt", "shared/sub", "shared/sub/deeper", "shared/t", "shared/ln"} {
		if got := ownerOf(t, s.at(rel)); got != s.agent {
			t.Errorf("%s is owned by %d:%d, want %d:%d", rel, got.UID, got.GID, s.agent.UID, s.agent.GID)
		}
		fi, err := os.Lstat(s.at(rel))
		must(t, err)
		if !fi.IsDir() && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("%s is %v", rel, fi.Mode())
		}
	}
	s.untouched(t)
}

package fsops

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func newDurable(t *testing.T) (Workspace, string) {
	t.Helper()
	root := t.TempDir()
	ws, err := NewDir(root, Options{Fsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws, root
}

// TestFsyncSyncsEveryChange: with Options.Fsync each operation that changes
// the workspace syncs what it changed (the file's data, the directories
// whose entries changed, the ones it created), and without it nothing is
// synced; the result is the same either way.
func TestFsyncSyncsEveryChange(t *testing.T) {
	ws, root := newDurable(t)
	plain := newDirWS(t, t.TempDir())
	steps := []struct {
		name string
		min  int64 // fsyncs at least
		do   func(ws Workspace) error
	}{
		{"write a new file in new directories", 4, func(ws Workspace) error { return ws.WriteFile("a/b/f.txt", []byte("one")) }}, // file, b, a, root
		{"overwrite", 2, func(ws Workspace) error { return ws.WriteFile("a/b/f.txt", []byte("two")) }},
		{"edit", 2, func(ws Workspace) error {
			_, err := ws.Edit("a/b/f.txt", []Edit{{OldText: "two", NewText: "three"}}, false)
			return err
		}},
		{"mkdir -p", 3, func(ws Workspace) error { return ws.Mkdir("c/d", true) }},
		{"touch", 1, func(ws Workspace) error { return ws.Touch("c/d/t") }},
		{"rename", 2, func(ws Workspace) error { return ws.Rename("c/d/t", "a/t") }},
		{"remove", 1, func(ws Workspace) error { return ws.Remove("a/t", RemoveOptions{}) }},
		{"open, write, close", 2, func(ws Workspace) error {
			f, err := ws.OpenFile("c/sftp.bin", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			if _, err := f.WriteAt([]byte("data"), 0); err != nil {
				return err
			}
			return f.Close()
		}},
	}
	for _, s := range steps {
		before := syncs.Load()
		if err := s.do(ws); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if n := syncs.Load() - before; n < s.min {
			t.Errorf("%s with Fsync: %d fsyncs, want at least %d", s.name, n, s.min)
		}
		before = syncs.Load()
		if err := s.do(plain); err != nil {
			t.Fatalf("%s without Fsync: %v", s.name, err)
		}
		if n := syncs.Load() - before; n != 0 {
			t.Errorf("%s without Fsync: %d fsyncs, want none", s.name, n)
		}
	}
	for p, want := range map[string]string{"a/b/f.txt": "three", "c/sftp.bin": "data"} {
		if b, err := os.ReadFile(filepath.Join(root, p)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	// A read-only open syncs nothing on close.
	before := syncs.Load()
	f, err := ws.OpenFile("c/sftp.bin", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if n := syncs.Load() - before; n != 0 {
		t.Errorf("a read-only open and close made %d fsyncs", n)
	}
}

// The killed writer: a process that rewrites one file with whole versions
// (each 256 KiB of one byte value) until it is killed.
const killedWriterEnv = "AGENTBE_FSOPS_KILLED_WRITER"

func killedWriter() int {
	ws, err := NewDir(os.Getenv(killedWriterEnv), Options{Fsync: os.Getenv("FSYNC") == "1"})
	if err != nil {
		return 1
	}
	for i := 0; ; i++ {
		if err := ws.WriteFile("f", bytes.Repeat([]byte{byte('a' + i%26)}, 256<<10)); err != nil {
			return 1
		}
		fmt.Println(i) // acknowledged
	}
}

// TestKilledWriteLeavesWholeFile kills a process in the middle of
// rewriting a file, at random moments, with Fsync on and off: the file is
// always one whole version, never a mix or a truncated one, and the
// version last acknowledged or the one after it. (What a power cut would
// lose without Fsync, the page cache, survives a killed process; this
// test is about half-written files, not durability.)
func TestKilledWriteLeavesWholeFile(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, fsync := range []string{"0", "1"} {
		for round := range 10 {
			dir := t.TempDir()
			cmd := exec.Command(self)
			cmd.Env = append(os.Environ(), killedWriterEnv+"="+dir, "FSYNC="+fsync)
			var out bytes.Buffer
			cmd.Stdout = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(5+rand.IntN(60)) * time.Millisecond)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			b, err := os.ReadFile(filepath.Join(dir, "f"))
			if os.IsNotExist(err) {
				continue // killed before the first write landed
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != 256<<10 || bytes.Count(b, b[:1]) != len(b) {
				t.Fatalf("fsync=%s round %d: the file is %d bytes, not one whole version", fsync, round, len(b))
			}
			var last int
			acked := false
			for _, l := range bytes.Fields(out.Bytes()) {
				fmt.Sscan(string(l), &last)
				acked = true
			}
			if acked && b[0] != byte('a'+last%26) && b[0] != byte('a'+(last+1)%26) {
				t.Fatalf("fsync=%s round %d: the file holds %q, but version %d (%q) was acknowledged", fsync, round, b[0], last, rune('a'+last%26))
			}
		}
	}
}

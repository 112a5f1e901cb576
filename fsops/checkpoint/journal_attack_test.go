package checkpoint

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

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

// Changes racing a checkpoint (files written, made and removed, links
// made, written through and removed, directories exchanged, moved out and
// back, made and removed while the walk runs) leave the journal able to
// vouch for nothing it did not see: a quiet checkpoint after each racing
// one captures what a full walk does.
func TestJournalUnderChangesRacingTheCheckpoint(t *testing.T) {
	f := newFixture(t, nil)
	ref := referenceStore(t, f)
	dirs := []string{"d0", "d0/s", "d1", "d1/s", "d2", "d3", "d3/s/t"}
	for i, d := range dirs {
		for k := range 3 {
			f.write(t, fmt.Sprintf("%s/f%d", d, k), fmt.Sprintf("%d.%d\n", i, k))
		}
	}
	outside := filepath.Join(filepath.Dir(f.dir), "outside")
	sameAsFullWalk(t, f.st, ref, f.ws, "first")
	for round := range 40 {
		rng := rand.New(rand.NewPCG(uint64(round), 7))
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			p := func(rel string) string { return filepath.Join(f.dir, rel) }
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				d := dirs[rng.IntN(len(dirs))]
				e := dirs[rng.IntN(len(dirs))]
				switch rng.IntN(8) {
				case 0:
					os.WriteFile(p(fmt.Sprintf("%s/f%d", d, rng.IntN(3))), fmt.Appendf(nil, "r%d n%d\n", round, n), 0o644)
				case 1:
					os.WriteFile(p(d+"/tmp"), []byte("t"), 0o644)
					os.Remove(p(d + "/tmp"))
				case 2:
					if os.Link(p(d+"/f0"), p(e+"/ln")) == nil {
						os.WriteFile(p(e+"/ln"), fmt.Appendf(nil, "via link r%d n%d\n", round, n), 0o644)
						os.Remove(p(e + "/ln"))
					}
				case 3:
					unix.Renameat2(unix.AT_FDCWD, p("d1/s"), unix.AT_FDCWD, p("d0/s"), unix.RENAME_EXCHANGE)
				case 4:
					if os.Rename(p("d2"), outside) == nil {
						os.WriteFile(filepath.Join(outside, "f1"), fmt.Appendf(nil, "outside r%d n%d\n", round, n), 0o644)
						os.Rename(outside, p("d2"))
					}
				case 5:
					os.Mkdir(p(d+"/new"), 0o755)
					os.WriteFile(p(d+"/new/g"), []byte("g"), 0o644)
				case 6:
					os.RemoveAll(p(d + "/new"))
				case 7:
					f, err := os.OpenFile(p(d+"/f2"), os.O_RDWR, 0)
					if err == nil {
						f.Truncate(int64(rng.IntN(5)))
						f.Close()
					}
				}
			}
		}()
		// It may fail (a file listed is gone before it is read); what
		// it leaves must not mislead the next.
		_, err := f.st.Create(context.Background(), f.ws, CreateOptions{})
		close(stop)
		<-done
		if err != nil {
			t.Logf("round %d, racing: %v", round, err)
		}
		sameAsFullWalk(t, f.st, ref, f.ws, fmt.Sprintf("round %d, quiet after a racing checkpoint", round))
	}
}

// A queue the journal could not read in time overflows; the change made
// after the kernel dropped events is in no event, and the overflow ends
// the generation: the next checkpoint walks in full.
func TestJournalAfterTheQueueOverflowed(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Skip("no /proc/sys/fs/inotify/max_queued_events")
	}
	var limit int
	fmt.Sscan(string(b), &limit)
	if limit > 1<<16 {
		t.Skipf("max_queued_events is %d: too many files to make", limit)
	}
	f := newFixture(t, nil)
	ref := referenceStore(t, f)
	f.write(t, "flood/x", "x")
	f.write(t, "quiet/f", "before\n")
	sameAsFullWalk(t, f.st, ref, f.ws, "first")
	sameAsFullWalk(t, f.st, ref, f.ws, "second")
	g := f.st.guided.Load()
	f.st.jrnl.mu.Lock() // its reader waits: nothing is read meanwhile
	for i := range limit/2 + 1 {
		fh, err := os.Create(filepath.Join(f.dir, fmt.Sprintf("flood/%d", i)))
		if err != nil {
			f.st.jrnl.mu.Unlock()
			t.Fatal(err)
		}
		fh.Close() // IN_CREATE and IN_CLOSE_WRITE
	}
	err = os.WriteFile(filepath.Join(f.dir, "quiet/f"), []byte("after, longer\n"), 0o644)
	f.st.jrnl.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	sameAsFullWalk(t, f.st, ref, f.ws, "after an overflow")
	if f.st.guided.Load() != g {
		t.Fatal("the checkpoint after an overflow was guided")
	}
}

// A Linux AIO write (io_submit) raises no event of its own, as a write
// through a mapping does not; the close of the file it was made through
// does.
func TestJournalSeesAnAIOWriteOnceClosed(t *testing.T) {
	f := newFixture(t, nil)
	ref := referenceStore(t, f)
	f.write(t, "db/data", "0123456789")
	f.write(t, "other/x", "x")
	sameAsFullWalk(t, f.st, ref, f.ws, "first")
	fh, err := os.OpenFile(filepath.Join(f.dir, "db/data"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ctx uintptr
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
		fh.Close()
		t.Skipf("io_setup: %v", e)
	}
	defer unix.Syscall(unix.SYS_IO_DESTROY, ctx, 0, 0)
	data := []byte("AIO")
	// struct iocb: data, key and rw_flags, opcode
	// (1: pwrite), reqprio, fildes, buf, nbytes, offset, reserved2,
	// flags, resfd.
	var cb [64]byte
	binary.NativeEndian.PutUint16(cb[16:], 1)
	binary.NativeEndian.PutUint32(cb[20:], uint32(fh.Fd()))
	binary.NativeEndian.PutUint64(cb[24:], uint64(uintptr(unsafe.Pointer(&data[0]))))
	binary.NativeEndian.PutUint64(cb[32:], uint64(len(data)))
	cbs := []*[64]byte{&cb}
	if n, _, e := unix.Syscall(unix.SYS_IO_SUBMIT, ctx, 1, uintptr(unsafe.Pointer(&cbs[0]))); e != 0 || n != 1 {
		fh.Close()
		t.Skipf("io_submit: %d, %v", n, e)
	}
	var ev [32]byte
	if n, _, e := unix.Syscall6(unix.SYS_IO_GETEVENTS, ctx, 1, 1, uintptr(unsafe.Pointer(&ev[0])), 0, 0); e != 0 || n != 1 {
		t.Fatalf("io_getevents: %d, %v", n, e)
	}
	runtime.KeepAlive(data)
	fh.Close()
	if b, _ := os.ReadFile(filepath.Join(f.dir, "db/data")); string(b) != "AIO3456789" {
		t.Fatalf("the AIO write left %q", b)
	}
	sameAsFullWalk(t, f.st, ref, f.ws, "after an AIO write, closed")
}

// Every call that changes a file's content or metadata in place raises an
// event in its directory: each is made in a directory nothing else
// changes, and the checkpoint after it must match a full walk's.
func TestJournalSeesWritesOfEveryCall(t *testing.T) {
	f := newFixture(t, nil)
	ref := referenceStore(t, f)
	p := func(rel string) string { return filepath.Join(f.dir, rel) }
	open := func(rel string, flag int) int {
		fd, err := unix.Open(p(rel), flag|unix.O_CLOEXEC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	f.write(t, "src/s", "SOURCE-DATA-0123")
	calls := []struct {
		name string
		do   func(rel string)
	}{
		{"pwrite", func(rel string) { fd := open(rel, unix.O_WRONLY); unix.Pwrite(fd, []byte("PW"), 3); unix.Close(fd) }},
		{"fallocate, punching a hole", func(rel string) {
			fd := open(rel, unix.O_WRONLY)
			if err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 8); err != nil {
				unix.Pwrite(fd, make([]byte, 8), 0) // a file system without holes
			}
			unix.Close(fd)
		}},
		{"fallocate, growing", func(rel string) { fd := open(rel, unix.O_WRONLY); unix.Fallocate(fd, 0, 0, 4096); unix.Close(fd) }},
		{"copy_file_range", func(rel string) {
			in, out := open("src/s", unix.O_RDONLY), open(rel, unix.O_WRONLY)
			off := int64(2)
			unix.CopyFileRange(in, nil, out, &off, 6, 0)
			unix.Close(in)
			unix.Close(out)
		}},
		{"sendfile", func(rel string) {
			in, out := open("src/s", unix.O_RDONLY), open(rel, unix.O_WRONLY)
			unix.Sendfile(out, in, nil, 5)
			unix.Close(in)
			unix.Close(out)
		}},
		{"splice", func(rel string) {
			var pp [2]int
			if err := unix.Pipe2(pp[:], unix.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
			unix.Write(pp[1], []byte("SPLICED"))
			out := open(rel, unix.O_WRONLY)
			off := int64(1)
			unix.Splice(pp[0], nil, out, &off, 7, 0)
			unix.Close(out)
			unix.Close(pp[0])
			unix.Close(pp[1])
		}},
		{"ftruncate", func(rel string) { fd := open(rel, unix.O_WRONLY); unix.Ftruncate(fd, 3); unix.Close(fd) }},
		{"a same-size write, its times set back", func(rel string) {
			var st unix.Stat_t
			unix.Stat(p(rel), &st)
			fd := open(rel, unix.O_WRONLY)
			unix.Pwrite(fd, []byte("Z"), 0)
			unix.Close(fd)
			unix.UtimesNano(p(rel), []unix.Timespec{st.Atim, st.Mtim})
		}},
		{"chmod", func(rel string) { unix.Chmod(p(rel), 0o600) }},
		{"chmod of its directory", func(rel string) { unix.Chmod(filepath.Dir(p(rel)), 0o700) }},
		{"chown", func(rel string) { unix.Chown(p(rel), 1234, 1234) }},
		{"O_TMPFILE linked in", func(rel string) {
			fd, err := unix.Open(filepath.Dir(p(rel)), unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			if err != nil {
				t.Skipf("O_TMPFILE: %v", err)
			}
			unix.Write(fd, []byte("from a temporary file"))
			if err := unix.Linkat(fd, "", unix.AT_FDCWD, p(rel)+".new", unix.AT_EMPTY_PATH); err != nil {
				unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+fmt.Sprint(fd), unix.AT_FDCWD, p(rel)+".new", unix.AT_SYMLINK_FOLLOW)
			}
			unix.Write(fd, []byte(", and written after"))
			unix.Close(fd)
		}},
	}
	for i := range calls {
		f.write(t, fmt.Sprintf("d%02d/f", i), "0123456789abcdef")
	}
	sameAsFullWalk(t, f.st, ref, f.ws, "first")
	for i, c := range calls {
		c.do(fmt.Sprintf("d%02d/f", i))
		g := f.st.guided.Load()
		sameAsFullWalk(t, f.st, ref, f.ws, c.name)
		if f.st.guided.Load() != g+1 {
			t.Fatalf("the checkpoint after %s walked in full: the test tests nothing", c.name)
		}
	}
}

// The journal's reader ends with the store: after Close, no goroutine
// reads a descriptor that may be another file's by then.
func TestJournalReaderEndsAtClose(t *testing.T) {
	readers := func() int {
		buf := make([]byte, 1<<20)
		return strings.Count(string(buf[:runtime.Stack(buf, true)]), "checkpoint.(*journal).run(")
	}
	before := readers()
	f := newFixture(t, nil)
	f.write(t, "a/b", "b")
	f.create(t, "")
	if readers() <= before {
		t.Fatal("no journal reader after a checkpoint")
	}
	f.st.Close()
	for readers() > before {
		runtime.Gosched() // its Read returns once the descriptor is closed
	}
}

// A directory made since the base was watched by no one until a walk
// lists it: a hard link made in it, written through and removed there
// raised no event the journal read, and the file written lies in a
// directory with none. A directory made or moved in makes the next
// checkpoint of its scope a full walk.
func TestJournalSeesAWriteThroughALinkInANewDirectory(t *testing.T) {
	for _, c := range []struct {
		name string
		mk   func(f *fixture) (string, error)
		rm   func(f *fixture, dir string) error
	}{
		{"made, kept", func(f *fixture) (string, error) { d := filepath.Join(f.dir, "b/new"); return d, os.Mkdir(d, 0o755) },
			func(f *fixture, dir string) error { return os.Remove(filepath.Join(dir, "g")) }},
		{"made, removed", func(f *fixture) (string, error) { d := filepath.Join(f.dir, "b/new"); return d, os.Mkdir(d, 0o755) },
			func(f *fixture, dir string) error { return os.RemoveAll(dir) }},
		{"moved in, kept", func(f *fixture) (string, error) {
			d := filepath.Join(filepath.Dir(f.dir), "elsewhere")
			if err := os.Mkdir(d, 0o755); err != nil {
				return "", err
			}
			in := filepath.Join(f.dir, "b/in")
			return in, os.Rename(d, in)
		}, func(f *fixture, dir string) error { return os.Remove(filepath.Join(dir, "g")) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			ref := referenceStore(t, f)
			f.write(t, "a/f", "before\n")
			f.write(t, "b/other", "x")
			sameAsFullWalk(t, f.st, ref, f.ws, "first")
			sameAsFullWalk(t, f.st, ref, f.ws, "second")
			dir, err := c.mk(f)
			if err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(dir, "g")
			if err := os.Link(filepath.Join(f.dir, "a/f"), link); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(link, []byte("after, longer\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := c.rm(f, dir); err != nil {
				t.Fatal(err)
			}
			sameAsFullWalk(t, f.st, ref, f.ws, "written through a link in a new directory, "+c.name)
		})
	}
}

// A full walk watches each directory just before it lists it, and one
// made since the base (here z and below: a full walk) was watched by no
// one before: a hard link made there before the walk reaches it, written
// through and removed, raises no event, and the file written lies in a
// directory the walk listed already, with the identity the previous
// checkpoint recorded (so it is not read again). Here a is listed, and z
// waits until the link was used below it (the walk has at least two
// workers). A full walk watches the whole tree before it begins, so what
// is done in it raises events.
func TestJournalSeesALinkUsedBeforeTheWalkReachedIt(t *testing.T) {
	var f *fixture
	var armed atomic.Bool
	used := make(chan struct{})
	var once sync.Once
	use := func() {
		link := filepath.Join(f.dir, "z/y/q/g")
		if err := os.Link(filepath.Join(f.dir, "a/f"), link); err != nil {
			panic(err)
		}
		if err := os.WriteFile(link, []byte("after, longer\n"), 0o644); err != nil {
			panic(err)
		}
		if err := os.Remove(link); err != nil {
			panic(err)
		}
	}
	f = newFixture(t, func(o *Options) {
		o.listed = func(dir string) {
			if !armed.Load() {
				return
			}
			switch dir {
			case "z":
				<-used // z's subdirectories are not queued yet
			case "a":
				once.Do(func() { use(); close(used) })
			}
		}
	})
	ref := referenceStore(t, f)
	f.write(t, "a/f", "before\n")
	sameAsFullWalk(t, f.st, ref, f.ws, "first")
	f.write(t, "z/y/q/other", "x")
	armed.Store(true)
	if _, err := f.st.Create(context.Background(), f.ws, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	armed.Store(false)
	sameAsFullWalk(t, f.st, ref, f.ws, "after a link used while a full walk ran")
}

// A directory bind-mounted at a second path of the tree is one inode, one
// watch, under two paths: the journal can name only one of them for its
// events, so a walk that watched one directory twice is no base.
func TestJournalBindMountInTheTree(t *testing.T) {
	f := newFixture(t, nil)
	ref := referenceStore(t, f)
	f.write(t, "a/f", "before\n")
	f.write(t, "b/keep", "k")
	f.write(t, "c/keep", "k")
	if err := unix.Mount(filepath.Join(f.dir, "a"), filepath.Join(f.dir, "b"), "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(filepath.Join(f.dir, "b"), unix.MNT_DETACH) })
	sameAsFullWalk(t, f.st, ref, f.ws, "first")
	sameAsFullWalk(t, f.st, ref, f.ws, "second")
	for _, p := range []string{"a/f", "b/f"} {
		if err := os.WriteFile(filepath.Join(f.dir, p), []byte("written through "+p+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		sameAsFullWalk(t, f.st, ref, f.ws, "written through "+p)
	}
}

// A file bind-mounted into the tree from outside is written through its
// outside path: the event names the outside directory, not the one that
// shows it. A directory holding a mount point is listed every time.
func TestJournalFileBindMountedFromOutside(t *testing.T) {
	f := newFixture(t, nil)
	ref := referenceStore(t, f)
	f.write(t, "a/f", "placeholder\n")
	f.write(t, "b/keep", "k")
	outside := filepath.Join(filepath.Dir(f.dir), "outside-file")
	if err := os.WriteFile(outside, []byte("outside, before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(outside, filepath.Join(f.dir, "a/f"), "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(filepath.Join(f.dir, "a/f"), unix.MNT_DETACH) })
	sameAsFullWalk(t, f.st, ref, f.ws, "first")
	sameAsFullWalk(t, f.st, ref, f.ws, "second")
	if err := os.WriteFile(outside, []byte("outside, after: longer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sameAsFullWalk(t, f.st, ref, f.ws, "written through its outside path")
}

func TestMountPointsBelow(t *testing.T) {
	root := t.TempDir()
	table := "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n" +
		"30 22 8:1 /x " + root + "/a/f rw - ext4 /dev/sda1 rw\n" +
		"31 22 0:5 / " + root + "/with\\040space rw - tmpfs tmpfs rw\n" +
		"32 22 0:6 / " + root + "x/not-below rw - tmpfs tmpfs rw\n" +
		"33 22 0:7 / " + root + " rw - tmpfs tmpfs rw\n"
	got, ok := mountPointsBelow([]byte(table), root)
	if !ok || !slices.Equal(got, []string{"a/f", "with space"}) {
		t.Fatalf("mountPointsBelow = %q, %v", got, ok)
	}
}

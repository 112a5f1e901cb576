package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/cpuburst"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"golang.org/x/sys/unix"
)

// The workspace: 10,000 files, 200 MB (20 KB each) in 100
// directories. Against git, in the same workspace on the same disk:
//
//	go test -run '^$' -bench CheckpointVsGit -benchtime 10x ./fsops/checkpoint/
//
// docs/performance.md has the figures.
const (
	benchFiles    = 10000
	benchFileSize = 20 << 10
	benchDirs     = 100
	benchChanged  = 10
)

func benchWorkspace(b *testing.B) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "ws")
	buf := make([]byte, benchFileSize)
	for i := range benchFiles {
		for j := range buf {
			buf[j] = byte('a' + (i+j)%26)
		}
		copy(buf, fmt.Sprintf("file %d\n", i))
		p := filepath.Join(dir, fmt.Sprintf("d%03d", i%benchDirs), fmt.Sprintf("f%05d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	// The setup's 200 MB on disk before anything is timed, so neither
	// side pays for its writeback.
	syscall.Sync()
	return dir
}

// change rewrites the first benchChanged files for round n.
func change(b *testing.B, dir string, n int) {
	b.Helper()
	for i := range benchChanged {
		p := filepath.Join(dir, fmt.Sprintf("d%03d", i%benchDirs), fmt.Sprintf("f%05d.txt", i))
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.WriteAt([]byte(fmt.Sprintf("round %08d\n", n)), 0); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// benchStore opens a store of dir's checkpoints; durable is --fsync's
// (off, the daemon's default).
func benchStore(b *testing.B, dir string, durable, noJournal bool) (*Store, fsops.Workspace) {
	b.Helper()
	ws, err := fsops.NewDir(dir, fsops.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ws.Close() })
	// The walks run as the daemon's do under --max-procs auto
	// (cmd/agent-backend): inside a burst to every CPU this process may
	// use, so -cpu 1 measures the daemon's GOMAXPROCS on 2 cores.
	cpuburst.SetCeiling(runtime.NumCPU())
	b.Cleanup(func() { cpuburst.SetCeiling(0) })
	st, err := Open(Options{Dir: filepath.Join(b.TempDir(), "store"), WorkspaceRoot: dir, MaxCount: 100000, MaxBytes: 1 << 40,
		Burst: cpuburst.Hold, Durable: durable, NoJournal: noJournal})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st, ws
}

// BenchmarkCheckpointVsGitIncremental times, in each round, a checkpoint
// after 10 changed files and `git add -A && git commit` of the same change
// in a copy of the workspace, one after the other, so both sides see the
// same load; it reports each side's milliseconds and their ratio. Both
// run with their defaults, which sync nothing to the disk: git's (no
// fsync at all in `strace -f -c`), and the daemon's without --fsync.
func BenchmarkCheckpointVsGitIncremental(b *testing.B) {
	incrementalVsGit(b, "", false, false)
}

// BenchmarkCheckpointWalkVsGitIncremental is BenchmarkCheckpointVsGit-
// Incremental with the store's journal off (Options.NoJournal): each
// checkpoint walks the whole workspace, as one does where the journal
// cannot vouch (journal.go).
func BenchmarkCheckpointWalkVsGitIncremental(b *testing.B) {
	incrementalVsGit(b, "", false, true)
}

// BenchmarkCheckpointVsDurableGitIncremental is the same with both made
// durable: the store as under --fsync (each checkpoint's blobs and
// manifest fsynced, checkpoints.md, Crash-safe), git with core.fsync=
// committed (the objects a commit writes are fsynced before it returns).
func BenchmarkCheckpointVsDurableGitIncremental(b *testing.B) {
	incrementalVsGit(b, " && git config core.fsync committed", true, false)
}

// incrementalVsGit is the benchmarks above; gitSetup follows the git
// repository's init, durable is the store's, and noJournal turns its
// journal off.
func incrementalVsGit(b *testing.B, gitSetup string, durable, noJournal bool) {
	testenv.Command(b, "git", "git")
	dir := benchWorkspace(b)
	gitDir := benchWorkspace(b)
	st, ws := benchStore(b, dir, durable, noJournal)
	if _, err := st.Create(context.Background(), ws, CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	git(b, gitDir, "git init -q"+gitSetup+" && git add -A && git commit -q -m first")
	syscall.Sync()
	var ours, theirs time.Duration
	b.ResetTimer()
	for n := range b.N {
		change(b, dir, n)
		change(b, gitDir, n)
		t0 := time.Now()
		info, err := st.Create(context.Background(), ws, CreateOptions{})
		t1 := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		if info.Read != benchChanged {
			b.Fatalf("read %d files, want %d", info.Read, benchChanged)
		}
		git(b, gitDir, "git add -A && git commit -q -m next")
		ours += t1.Sub(t0)
		theirs += time.Since(t1)
	}
	report(b, ours, theirs)
}

// BenchmarkCheckpointVsGitFull times a first checkpoint (an empty store)
// and `git add -A` into an empty index of the same workspace, one after
// the other in each round.
func BenchmarkCheckpointVsGitFull(b *testing.B) {
	testenv.Command(b, "git", "git")
	dir := benchWorkspace(b)
	var ours, theirs time.Duration
	b.ResetTimer()
	for range b.N {
		st, ws := benchStore(b, dir, false, false)
		syscall.Sync()
		t0 := time.Now()
		info, err := st.Create(context.Background(), ws, CreateOptions{})
		t1 := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		if info.Read != benchFiles {
			b.Fatalf("read %d files", info.Read)
		}
		git(b, dir, "git init -q")
		syscall.Sync()
		t2 := time.Now()
		git(b, dir, "git add -A")
		ours += t1.Sub(t0)
		theirs += time.Since(t2)
		git(b, dir, "rm -rf .git")
		st.Close()
	}
	report(b, ours, theirs)
}

func report(b *testing.B, ours, theirs time.Duration) {
	b.ReportMetric(float64(ours.Microseconds())/1000/float64(b.N), "checkpoint-ms")
	b.ReportMetric(float64(theirs.Microseconds())/1000/float64(b.N), "git-ms")
	b.ReportMetric(float64(theirs)/float64(ours), "git/checkpoint")
	b.ReportMetric(0, "ns/op")
}

func git(b *testing.B, dir, script string) {
	b.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@example.com", "GIT_COMMITTER_NAME=b",
		"GIT_COMMITTER_EMAIL=b@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		// No background gc or maintenance: it would outlive the round (and the
		// test's directory).
		"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=gc.auto", "GIT_CONFIG_VALUE_0=0", "GIT_CONFIG_KEY_1=maintenance.auto", "GIT_CONFIG_VALUE_1=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s: %v\n%s", script, err, out)
	}
}

// BenchmarkCheckpointIncrementalPruning times a checkpoint after 10 changed
// files of the same workspace in a store full to --checkpoint-max-count (8),
// so each create also prunes the oldest checkpoint: kept as a base when a
// delta is stored on it (a rename), else removed with the kept bases no
// manifest needs any more.
func BenchmarkCheckpointIncrementalPruning(b *testing.B) {
	dir := benchWorkspace(b)
	ws, err := fsops.NewDir(dir, fsops.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ws.Close() })
	st, err := Open(Options{Dir: filepath.Join(b.TempDir(), "store"), WorkspaceRoot: dir, MaxCount: 8, MaxBytes: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	for n := range 8 {
		change(b, dir, -1-n)
		if _, err := st.Create(context.Background(), ws, CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	syscall.Sync()
	var took time.Duration
	b.ResetTimer()
	for n := range b.N {
		change(b, dir, n)
		t0 := time.Now()
		info, err := st.Create(context.Background(), ws, CreateOptions{})
		took += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		if len(info.Pruned) != 1 {
			b.Fatalf("pruned %v, want the oldest", info.Pruned)
		}
	}
	b.ReportMetric(float64(took.Microseconds())/1000/float64(b.N), "checkpoint-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkWalkVsBare times the checkpoint's walk of the workspace
// (entries built and put in path order) and, in the same rounds, a bare
// walk that only lists and stats (getdents into one buffer per goroutine
// and one fstatat per entry, by descriptor, allocating nothing per entry,
// 4 goroutines over the top directory's subdirectories): the floor of any
// walk that finds changes by their lstat. Each half starts after a
// collection (runtime.GC, untimed), so neither pays for the garbage of
// the other.
func BenchmarkWalkVsBare(b *testing.B) {
	dir := benchWorkspace(b)
	st, ws := benchStore(b, dir, false, false)
	var ours, bare time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		runtime.GC()
		b.StartTimer()
		t0 := time.Now()
		w, err := st.walkSized(context.Background(), ws, ".", 1<<20, benchFiles+benchDirs)
		ours += time.Since(t0)
		if err != nil || len(w.entries) != benchFiles+benchDirs {
			b.Fatal(err, len(w.entries))
		}
		w = walked{}
		b.StopTimer()
		runtime.GC()
		b.StartTimer()
		t1 := time.Now()
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		n, err := bareWalk(fd, true)
		bare += time.Since(t1)
		if err != nil || n != benchFiles+benchDirs {
			b.Fatalf("the bare walk saw %d entries: %v", n, err)
		}
	}
	b.ReportMetric(float64(ours.Microseconds())/1000/float64(b.N), "walk-ms")
	b.ReportMetric(float64(bare.Microseconds())/1000/float64(b.N), "bare-ms")
	b.ReportMetric(0, "ns/op")
}

// bareWalk counts the entries below the directory fd (which it closes),
// with 4 goroutines over its subdirectories when par is set.
func bareWalk(fd int, par bool) (int, error) {
	buf := make([]byte, 32<<10)
	n, subs, err := bareList(fd, buf, par)
	if err != nil || !par {
		return n, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var first error
	work := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 32<<10)
			for sub := range work {
				k, _, err := bareList(sub, buf, false)
				mu.Lock()
				n += k
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	for _, sub := range subs {
		work <- sub
	}
	close(work)
	wg.Wait()
	return n, first
}

// bareList counts the entries below the directory fd (which it closes):
// getdents into buf and one fstatat per entry of the NUL-terminated name
// getdents wrote. With top set, it returns the subdirectories of fd
// opened, not walked; else it walks them itself.
func bareList(fd int, buf []byte, top bool) (int, []int, error) {
	defer unix.Close(fd)
	n := 0
	var subs []int
	var st unix.Stat_t
	for {
		k, err := unix.Getdents(fd, buf)
		if err != nil {
			return 0, nil, err
		}
		if k <= 0 {
			break
		}
		for off := 0; off < k; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			name := buf[off+19 : off+reclen]
			off += reclen
			name = name[:bytes.IndexByte(name, 0)+1]
			if name[0] == '.' && (name[1] == 0 || name[1] == '.' && name[2] == 0) {
				continue
			}
			if err := fstatatName(fd, name, &st); err != nil {
				return 0, nil, err
			}
			n++
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				continue
			}
			sub, err := unix.Openat(fd, string(name[:len(name)-1]), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return 0, nil, err
			}
			if top {
				subs = append(subs, sub)
				continue
			}
			m, _, err := bareList(sub, make([]byte, len(buf)), false) // buf is still being read
			if err != nil {
				return 0, nil, err
			}
			n += m
		}
	}
	return n, subs, nil
}

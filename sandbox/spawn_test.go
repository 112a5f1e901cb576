//go:build linux

package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

// setSpawnerCap sets how many threads s may grow to (tests: a cap that
// does not depend on the machine's cores).
func setSpawnerCap(s *spawner, n int) {
	s.p.mu.Lock()
	s.p.max = n
	s.p.mu.Unlock()
}

// threadState is what one spawner thread reported about itself.
type threadState struct {
	tid     int
	seccomp string // the Seccomp field of its status: "2" when filtered
}

// occupy holds one thread of s busy until release is closed (done counts
// the holders), and returns what that thread reports about itself. A start
// made while every thread is held must grow the pool or queue.
func occupy(s *spawner, release <-chan struct{}, done *sync.WaitGroup) threadState {
	ch := make(chan threadState, 1)
	done.Add(1)
	go func() {
		defer done.Done()
		_ = s.p.do(spawnReq{fn: func() error {
			b, _ := os.ReadFile("/proc/thread-self/status")
			ch <- threadState{tid: unix.Gettid(), seccomp: statusField(b, "Seccomp")}
			<-release
			return nil
		}})
	}()
	return <-ch
}

// statusField is the value of field in a /proc status file.
func statusField(status []byte, field string) string {
	for l := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestSpawnerPoolGrowsToItsCap: a spawner starts with one thread, keeps
// one for starts made one after another, adds a thread when a start finds
// every thread busy, never has more than its cap, and queues the starts
// past it until a thread frees.
func TestSpawnerPoolGrowsToItsCap(t *testing.T) {
	s := newSpawnerPool(3)
	defer s.stop()
	for range 20 {
		if err := s.start(exec.Command("/bin/true")); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.threadCount(); n != 1 {
		t.Fatalf("after 20 starts one after another the spawner has %d threads, want 1", n)
	}

	const burst = 5
	release := make(chan struct{})
	running := make(chan int, burst)
	var wg sync.WaitGroup
	var once sync.Once
	free := func() { once.Do(func() { close(release) }); wg.Wait() }
	defer free() // before stop, also when a check fails
	for range burst {
		wg.Go(func() {
			if err := s.p.do(spawnReq{fn: func() error {
				running <- unix.Gettid()
				<-release
				return nil
			}}); err != nil {
				t.Error(err)
			}
		})
	}
	// Three requests hold three threads at once: the pool grew to its cap.
	tids := map[int]bool{}
	for range 3 {
		tids[<-running] = true
	}
	if len(tids) != 3 {
		t.Fatalf("three requests held at once ran on threads %v, want three threads", tids)
	}
	if n := s.threadCount(); n != 3 {
		t.Fatalf("with every thread held the spawner has %d threads, want its cap 3", n)
	}
	// The two over the cap wait for a thread, and run on one of the three.
	free()
	close(running)
	for tid := range running {
		if !tids[tid] {
			t.Errorf("a queued request ran on thread %d, not one of the pool's %v", tid, tids)
		}
	}
	if n := s.threadCount(); n != 3 {
		t.Fatalf("after the burst the spawner has %d threads, want 3", n)
	}
}

// TestSpawnerThreadsEndAtStop: every thread of a stopped spawner ends (so
// whatever it forked and left gets its parent-death signal, and what was
// set up on it, a filter or a mount namespace, goes with it), also one the
// loop was first scheduled on the process's main thread, which Go never
// ends.
func TestSpawnerThreadsEndAtStop(t *testing.T) {
	for round := range 5 {
		s := newSpawnerPool(3)
		release := make(chan struct{})
		var held sync.WaitGroup
		tids := map[int]bool{}
		for range 3 {
			tids[occupy(s, release, &held).tid] = true
		}
		close(release)
		held.Wait()
		s.stop()
		if len(tids) != 3 || tids[os.Getpid()] {
			t.Fatalf("round %d: the spawner's threads %v: want three, none the main thread (%d)", round, tids, os.Getpid())
		}
		deadline := time.Now().Add(10 * time.Second)
		for tid := range tids {
			for {
				if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); errors.Is(err, os.ErrNotExist) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("round %d: spawner thread %d still runs after stop", round, tid)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
}

// TestOneThreadSpawner: the in-place overlay's spawner is one thread (its
// mount namespace), so onThread reaches what every start runs on; on a
// pool, onThread is refused rather than reaching one thread of several.
func TestOneThreadSpawner(t *testing.T) {
	one := newSpawner()
	defer one.stop()
	var tid int
	if err := one.onThread(func() error { tid = unix.Gettid(); return nil }); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var held sync.WaitGroup
	if got := occupy(one, release, &held); got.tid != tid {
		t.Errorf("the one-thread spawner ran on thread %d, then on %d", tid, got.tid)
	}
	close(release)
	held.Wait()
	if n := one.threadCount(); n != 1 {
		t.Errorf("the one-thread spawner has %d threads", n)
	}
	pool := newSpawnerPool(2)
	defer pool.stop()
	if err := pool.onThread(func() error { return nil }); err == nil {
		t.Error("onThread on a pool of several threads was not refused")
	}
}

// TestSeccompOnEverySpawnerThread: in software mode every thread of the
// spawner pool, the first and each one added under load, has the seccomp
// filter before it forks, and commands started from each are refused what
// the filter refuses; no other thread of the daemon is filtered.
func TestSeccompOnEverySpawnerThread(t *testing.T) {
	e, ws := newExec(t, ModeSoftware)
	if !strings.Contains(e.Reason(), "seccomp filter on") {
		t.Fatalf("software mode reason %q does not say the filter is on", e.Reason())
	}
	x := e.(*executor)
	const threads = 3
	setSpawnerCap(x.spawn, threads)
	standIn := startSleeper(t)
	ops := []string{"ptrace:" + standIn, "unshare:", "tiocsti:"}
	release := make(chan struct{})
	var held sync.WaitGroup
	defer func() { close(release); held.Wait() }()
	pool := map[int]bool{}
	for i := range threads {
		// Threads 0..i-1 are held: this command starts on thread i, the
		// one the pool adds for it (or, for i = 0, its first).
		got := runProbes(t, e, ws, ops)
		for _, op := range ops {
			if got[op] != "EPERM" {
				t.Errorf("command from spawner thread %d: %s = %s, want EPERM", i, op, got[op])
			}
		}
		st := occupy(x.spawn, release, &held)
		if st.seccomp != "2" {
			t.Errorf("spawner thread %d (tid %d): Seccomp %q, want 2 (filter)", i, st.tid, st.seccomp)
		}
		pool[st.tid] = true
	}
	if n := x.spawn.threadCount(); n != threads || len(pool) != threads {
		t.Fatalf("the spawner has %d threads, %d seen held, want %d", n, len(pool), threads)
	}
	// The filtered threads of this process are the pool's, and only them
	// (a closed executor's threads end just after its Close: waited for).
	deadline := time.Now().Add(10 * time.Second)
	for {
		wrong := filteredThreadsBut(t, pool)
		if len(wrong) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads %v are filtered and not spawner threads of this executor (%v)", wrong, pool)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for tid := range pool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid))
		if err != nil || statusField(b, "Seccomp") != "2" {
			t.Errorf("spawner thread %d is gone or unfiltered: %v", tid, err)
		}
	}
	if err := probe("unshare", ""); err != nil && !errors.Is(err, unix.EINVAL) {
		t.Errorf("the filter leaked to the daemon's other threads: unshare in the test process: %v", err)
	}
}

// filteredThreadsBut lists the threads of this process under a seccomp
// filter that are not in pool.
func filteredThreadsBut(t *testing.T, pool map[int]bool) []int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var wrong []int
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "status"))
		if err != nil {
			continue // the thread ended
		}
		if statusField(b, "Seccomp") == "2" && !pool[tid] {
			wrong = append(wrong, tid)
		}
	}
	return wrong
}

// TestConcurrentStartsKeepCgroupAndFilter: commands started at once from
// many goroutines, through every thread of the pool, each run in a cgroup
// of their own below the executor's (a v1 thread moved into it for the
// fork; v2 cloned into it), under the seccomp filter and no_new_privs; and
// afterwards no thread of the daemon is left in a command's cgroup.
func TestConcurrentStartsKeepCgroupAndFilter(t *testing.T) {
	// Each kind this host offers runs; a kind it lacks is named in the
	// log, not skipped, and at least one must run.
	ran := 0
	for _, kind := range []cgroupKind{cgroupV1Pids, cgroupV2Pids, cgroupV2} {
		var e Executor
		withCgroupKind(kind, func() { e, _ = newExec(t, ModeSoftware) })
		x := e.(*executor)
		if x.cgroups == nil || x.cgroups.kind != kind {
			t.Logf("%s is not available on this host: not run", kind)
			continue
		}
		ran++
		t.Run(kind.String(), func(t *testing.T) {
			setSpawnerCap(x.spawn, 4)
			ours := "/" + filepath.Base(x.cgroups.dir) + "/c"
			const callers, each = 12, 6
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					for range each {
						res, err := e.Run(context.Background(), Request{Command: "cat /proc/self/status /proc/self/cgroup"})
						if err != nil || res.ExitCode != 0 {
							t.Errorf("Run: %+v %v", res, err)
							return
						}
						out := res.Stdout
						if s := statusField(out, "Seccomp"); s != "2" {
							t.Errorf("a command ran with Seccomp %q, want 2", s)
						}
						if s := statusField(out, "NoNewPrivs"); s != "1" {
							t.Errorf("a command ran with NoNewPrivs %q, want 1", s)
						}
						if line := cgroupLine(out, kind); !strings.Contains(line, ours) {
							t.Errorf("a command ran in cgroup %q, not one of the executor's (%s…)", line, ours)
						}
					}
				})
			}
			wg.Wait()
			// A thread goes back to the daemon's cgroup after its caller
			// heard back, and is free once it has.
			waitSpawnerIdle(t, x.spawn)
			t.Logf("%d commands from %d callers, %d spawner threads", callers*each, callers, x.spawn.threadCount())
			tasks, err := os.ReadDir("/proc/self/task")
			if err != nil {
				t.Fatal(err)
			}
			for _, task := range tasks {
				b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "cgroup"))
				if err != nil {
					continue
				}
				if line := cgroupLine(b, kind); strings.Contains(line, ours) {
					t.Errorf("thread %s of the daemon was left in a command's cgroup: %s", task.Name(), line)
				}
			}
		})
	}
	if ran == 0 {
		t.Fatal("no cgroup kind is available on this host: nothing was tested")
	}
}

// waitSpawnerIdle waits until every thread of sp is free (it has done
// all it does for the starts it took).
func waitSpawnerIdle(t *testing.T, sp *spawner) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		sp.p.mu.Lock()
		idle := sp.p.free == sp.p.threads
		sp.p.mu.Unlock()
		if idle {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the spawner's threads are still busy after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// cgroupLine is the line of a /proc cgroup file for kind's hierarchy.
func cgroupLine(b []byte, kind cgroupKind) string {
	for l := range strings.SplitSeq(string(b), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if kind == cgroupV1Pids && hasOption(parts[1], "pids") || kind != cgroupV1Pids && parts[0] == "0" && parts[1] == "" {
			return l
		}
	}
	return ""
}

func init() { testRoles["pool-daemon"] = poolDaemonRole }

// poolDaemonRole is a daemon whose spawner has two threads: it starts one
// `sleep` from each (the second while the first thread is held), prints
// their pids and the thread count, and waits to be killed.
func poolDaemonRole() int {
	e, err := New(Config{Mode: ModeSoftware, WorkspaceRoot: os.Getenv("WS")})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	x := e.(*executor)
	setSpawnerCap(x.spawn, 2)
	start := func() bool {
		var out syncbuf.Buffer
		if _, err := e.Start(context.Background(), Request{Command: "echo $$; exec sleep 60"}, Stdio{Stdout: &out}); err != nil {
			fmt.Println("error:", err)
			return false
		}
		for !strings.Contains(out.String(), "\n") {
			time.Sleep(5 * time.Millisecond)
		}
		fmt.Printf("pid=%s", out.String())
		return true
	}
	if !start() {
		return 1
	}
	release := make(chan struct{})
	var held sync.WaitGroup
	occupy(x.spawn, release, &held)
	if !start() {
		return 1
	}
	close(release)
	held.Wait()
	fmt.Printf("threads=%d\n", x.spawn.threadCount())
	time.Sleep(time.Minute) // killed by the test before
	return 0
}

// TestSpawnerThreadsChildrenDieWithTheDaemon: the commands forked from
// each thread of the pool, the first and one added under load, get the
// parent-death signal when the daemon dies (SIGKILL: no Close runs), as
// each thread lives as long as the daemon and no longer.
func TestSpawnerThreadsChildrenDieWithTheDaemon(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), testRoleEnv+"=pool-daemon", "WS="+workspace(t))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	var pids []int
	threads := ""
	sc := bufio.NewScanner(stdout)
	for threads == "" && sc.Scan() {
		l := sc.Text()
		if v, ok := strings.CutPrefix(l, "pid="); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("daemon printed %q", l)
			}
			pids = append(pids, pid)
		} else if v, ok := strings.CutPrefix(l, "threads="); ok {
			threads = v
		} else {
			t.Fatalf("daemon printed %q (stderr %q)", l, stderr.String())
		}
	}
	if len(pids) != 2 || threads != "2" {
		t.Fatalf("daemon started %v from %s threads, want two commands from 2 threads (stderr %q)", pids, threads, stderr.String())
	}
	for _, pid := range pids {
		if !pidRunning(pid) {
			t.Fatalf("command %d is not running while the daemon runs", pid)
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	killed = true
	for _, pid := range pids {
		deadline := time.Now().Add(10 * time.Second)
		for pidRunning(pid) {
			if time.Now().After(deadline) {
				_ = unix.Kill(pid, unix.SIGKILL)
				t.Fatalf("command %d outlived its daemon: no parent-death signal from its spawner thread", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// pidRunning reports whether pid runs (a zombie does not; one that is this
// process's child, as an orphan adopted by a subreaper test process is,
// is reaped).
func pidRunning(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	if b[i+2] == 'Z' {
		_, _ = unix.Wait4(pid, nil, unix.WNOHANG, nil)
		return false
	}
	return true
}

//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func init() {
	testRoles["hopper"] = hopperRole
	testRoles["forker"] = forkerRole
}

// hopperRole is a process that keeps escaping: each generation leaves its
// session (setsid), appends its pid to $HOPPER_FILE, starts the next
// generation in a new session and exits at once, so no process lives long
// and none has a parent in the command's tree for more than a moment. It
// stops by itself at $HOPPER_DEADLINE (unix seconds), so a failed test
// does not leave it running for ever.
func hopperRole() int {
	_, _ = unix.Setsid()
	deadline, _ := strconv.ParseInt(os.Getenv("HOPPER_DEADLINE"), 10, 64)
	if time.Now().Unix() > deadline {
		return 0
	}
	f, err := os.OpenFile(os.Getenv("HOPPER_FILE"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return 1
	}
	fmt.Fprintf(f, "%d\n", os.Getpid())
	f.Close()
	time.Sleep(10 * time.Millisecond) // be a heartbeat, not a CPU hog
	self, err := os.Executable()
	if err != nil {
		return 1
	}
	null, _ := os.Open(os.DevNull)
	if _, err := os.StartProcess(self, []string{self}, &os.ProcAttr{Env: os.Environ(),
		Files: []*os.File{null, null, null}, Sys: &syscall.SysProcAttr{Setsid: true}}); err != nil {
		return 1
	}
	return 0
}

// forkerRole starts $FORKER_N children that sleep, reports how many
// started, and kills them.
func forkerRole() int {
	n, _ := strconv.Atoi(os.Getenv("FORKER_N"))
	var kids []*os.Process
	for range n {
		p, err := os.StartProcess("/bin/sleep", []string{"sleep", "30"}, &os.ProcAttr{})
		if err != nil {
			break
		}
		kids = append(kids, p)
	}
	fmt.Printf("started=%d\n", len(kids))
	for _, p := range kids {
		_ = p.Kill()
		_, _ = p.Wait()
	}
	return 0
}

// copySelf copies the test binary into dir (bwrap binds only the
// workspace; the policy judges programs there like any other) as name.
func copySelf(t *testing.T, dir, name string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// withCgroupKind makes the executors built in fn try only kind (cgroupNone:
// the default order).
func withCgroupKind(kind cgroupKind, fn func()) {
	cgroupForce = kind
	defer func() { cgroupForce = cgroupNone }()
	fn()
}

// heartbeats returns the pids the hopper wrote so far.
func heartbeats(path string) []int {
	b, _ := os.ReadFile(path)
	var out []int
	for f := range strings.FieldsSeq(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// TestHopperCannotOutliveItsCommand: a command whose process setsids and
// forks-and-exits in a loop must be gone when the command ends, by itself
// or by its timeout: the heartbeat file stops growing.
func TestHopperCannotOutliveItsCommand(t *testing.T) {
	kinds := []struct {
		name string
		kind cgroupKind
	}{
		{"default", cgroupNone},
		{"cgroup-v1-pids", cgroupV1Pids},
		{"cgroup-v2", cgroupV2},
		{"subreaper", cgroupOff},
	}
	for _, k := range kinds {
		for _, mode := range []Mode{ModeSoftware, ModeLandlock, ModeNone} {
			for _, ending := range []string{"exits", "timeout"} {
				t.Run(k.name+"/"+string(mode)+"/"+ending, func(t *testing.T) {
					var e Executor
					var ws string
					withCgroupKind(k.kind, func() { e, ws = newExec(t, mode) })
					if k.kind == cgroupOff {
						if x := e.(*executor); x.cgroups != nil || !x.reaper {
							t.Fatalf("cgroups %v, subreaper %v: the fallback is not in use", x.cgroups, x.reaper)
						}
					} else if k.kind != cgroupNone {
						if got := e.(*executor).cgroups; got == nil || got.kind != k.kind {
							t.Skipf("%s is not available here", k.kind)
						}
					}
					hopper := copySelf(t, ws, "hopper")
					hb := filepath.Join(ws, "heartbeat")
					// Whatever happens, end every generation that wrote its
					// pid, until no new one appears.
					t.Cleanup(func() {
						for quiet := 0; quiet < 5; {
							before := len(heartbeats(hb))
							for _, p := range heartbeats(hb) {
								_ = syscall.Kill(p, syscall.SIGKILL)
							}
							time.Sleep(50 * time.Millisecond)
							if len(heartbeats(hb)) == before {
								quiet++
							} else {
								quiet = 0
							}
						}
					})
					req := Request{Command: hopper, Env: map[string]string{testRoleEnv: "hopper",
						"HOPPER_FILE": hb, "HOPPER_DEADLINE": strconv.FormatInt(time.Now().Add(30*time.Second).Unix(), 10)}}
					// Let it hop for a while before the command ends: long
					// enough for a few generations of a -race test binary on
					// a loaded machine (landlock adds the trampoline's start).
					if ending == "timeout" {
						req.Command = hopper + "; sleep 60"
						req.Timeout = 2500 * time.Millisecond
					}
					if ending == "exits" {
						req.Command = hopper + "; sleep 2.5"
					}
					res := run(t, e, req)
					if ending == "timeout" && !res.TimedOut {
						t.Fatalf("the command did not time out: %+v", res)
					}
					if n := len(heartbeats(hb)); n < 3 {
						t.Fatalf("the hopper hopped only %d times before its command ended; the test proves nothing", n)
					}
					time.Sleep(200 * time.Millisecond) // a generation being exec'ed may still write once
					before := heartbeats(hb)
					time.Sleep(time.Second)
					if after := heartbeats(hb); len(after) != len(before) {
						t.Fatalf("the hopper outlived its command: %d more generations in the second after Run returned (last pids %v)",
							len(after)-len(before), after[len(before):])
					}
				})
			}
		}
	}
}

// TestMaxProcesses: a command cannot have more processes at once than
// MaxProcesses, also as root (which RLIMIT_NPROC does not bind), and the
// bound keeps the direct fast path.
func TestMaxProcesses(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeNone, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, ws := newExec(t, mode, func(c *Config) { c.MaxProcesses = 20 })
			x := e.(*executor)
			if x.cgroups == nil || x.cgroups.maxProc != 20 {
				t.Skipf("no pids cgroup here (%+v); the bound falls back to RLIMIT_NPROC", x.cgroups)
			}
			if x.ulimit != "" {
				t.Fatalf("the process bound went through the shell (%q): the direct path is off", x.ulimit)
			}
			forker := copySelf(t, ws, "forker")
			res := run(t, e, Request{Command: forker, Env: map[string]string{testRoleEnv: "forker", "FORKER_N": "50"}})
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(string(res.Stdout), "started=")))
			if err != nil {
				t.Fatalf("forker said %q %q", res.Stdout, res.Stderr)
			}
			if n >= 20 || n < 5 {
				t.Fatalf("%d of 50 children started under a bound of 20 processes", n)
			}

			// The default bound is far above what this needs.
			e, ws = newExec(t, mode)
			forker = copySelf(t, ws, "forker")
			res = run(t, e, Request{Command: forker, Env: map[string]string{testRoleEnv: "forker", "FORKER_N": "50"}})
			if got := strings.TrimSpace(string(res.Stdout)); got != "started=50" {
				t.Fatalf("with the default bound: %q %q", got, res.Stderr)
			}
		})
	}
}

// TestCgroupReuse: commands run one after another in every kind of cgroup
// (spare cgroups are reused where that is safe), also after a command
// whose leftovers were killed, and each runs to its normal end.
func TestCgroupReuse(t *testing.T) {
	for _, k := range []struct {
		name string
		kind cgroupKind
	}{{"cgroup-v1-pids", cgroupV1Pids}, {"cgroup-v2", cgroupV2}, {"subreaper", cgroupOff}} {
		t.Run(k.name, func(t *testing.T) {
			var e Executor
			withCgroupKind(k.kind, func() { e, _ = newExec(t, ModeSoftware) })
			if x := e.(*executor); k.kind != cgroupOff && (x.cgroups == nil || x.cgroups.kind != k.kind) {
				t.Skipf("%s is not available here", k.kind)
			}
			for i := range 30 {
				cmd := "echo ok"
				if i%10 == 3 {
					cmd = "sleep 30 & echo ok" // killed when the command ends
				}
				res := run(t, e, Request{Command: cmd})
				if res.ExitCode != 0 || string(res.Stdout) != "ok\n" {
					t.Fatalf("command %d (%s): exit %d signal %q stdout %q", i, cmd, res.ExitCode, res.Signal, res.Stdout)
				}
				if i%10 == 4 {
					time.Sleep(50 * time.Millisecond) // let the previous cgroup be emptied and kept
				}
			}
		})
	}
}

// TestSpareCgroupsAreEmptyAndReset: the cgroups an executor keeps for the
// next commands hold no process and have their bound written back, after
// commands that ended normally and one whose leftovers were killed (which
// under v1 sets pids.max to 0); under v2 they are new directories, never
// one a command ran in, with their descriptor open for CLONE_INTO_CGROUP.
func TestSpareCgroupsAreEmptyAndReset(t *testing.T) {
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
			used := map[string]bool{}
			for i, cmd := range []string{"sleep 30 & cat /proc/self/cgroup", "cat /proc/self/cgroup", "cat /proc/self/cgroup"} {
				res := run(t, e, Request{Command: cmd})
				line := cgroupLine(res.Stdout, kind)
				if res.ExitCode != 0 || line == "" {
					t.Fatalf("command %d: exit %d, cgroup line %q", i, res.ExitCode, line)
				}
				used[filepath.Base(line[strings.LastIndex(line, ":")+1:])] = true
			}
			x.cgroups.cleanup.Wait() // the drops of the commands above
			var spares []*cgroup
			for len(x.cgroups.spare) > 0 {
				spares = append(spares, <-x.cgroups.spare)
			}
			// A v1 cgroup is kept only if its kill finds it empty, and the
			// spawner thread that forked into it may not have left yet on
			// a loaded machine: more commands, until one is kept.
			for i := 0; len(spares) == 0 && kind == cgroupV1Pids && i < 50; i++ {
				if res := run(t, e, Request{Command: "true"}); res.ExitCode != 0 {
					t.Fatalf("true: %+v", res)
				}
				x.cgroups.cleanup.Wait()
				for len(x.cgroups.spare) > 0 {
					spares = append(spares, <-x.cgroups.spare)
				}
			}
			if len(spares) == 0 {
				t.Fatal("no spare cgroup after the commands")
			}
			for _, c := range spares {
				if pids, err := c.procs(); err != nil || len(pids) != 0 {
					t.Errorf("spare %s holds %v (%v)", c.dir, pids, err)
				}
				if x.cgroups.maxProc > 0 || kind == cgroupV1Pids {
					want := "max"
					if x.cgroups.maxProc > 0 {
						want = strconv.FormatInt(x.cgroups.maxProc, 10)
					}
					if b, err := os.ReadFile(filepath.Join(c.dir, "pids.max")); err != nil || strings.TrimSpace(string(b)) != want {
						t.Errorf("spare %s: pids.max %q (%v), want %s", c.dir, b, err, want)
					}
				}
				if kind != cgroupV1Pids {
					if used[filepath.Base(c.dir)] {
						t.Errorf("spare %s is the cgroup of a command that ran", c.dir)
					}
					if c.fd < 0 {
						t.Errorf("spare %s has no open descriptor", c.dir)
					}
				}
				x.cgroups.spare <- c
			}
			t.Logf("%d spares, commands ran in %v", len(spares), used)
		})
	}
	if ran == 0 {
		t.Fatal("no cgroup kind is available on this host: nothing was tested")
	}
}

// TestProcessBoundWithoutCgroup: without a pids cgroup, the default bound
// is dropped (it must never cost the direct path), and an explicit one
// becomes RLIMIT_NPROC through the shell for a non-root user only (root
// is exempt from it, so the shell would only cost time).
func TestProcessBoundWithoutCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run commands as another user (CI runs as root)")
	}
	other := throwawayUser(t, "agbp")
	for _, tc := range []struct {
		name   string
		max    int64
		runAs  string
		ulimit string
	}{
		{"default", 0, other, ""},
		{"explicit, non-root", 50, other, "ulimit -u 50"},
		{"explicit, root", 50, "", ""},
		{"no bound", -1, other, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e Executor
			withCgroupKind(cgroupOff, func() {
				e, _ = newExec(t, ModeSoftware, func(c *Config) { c.MaxProcesses, c.RunAs = tc.max, tc.runAs })
			})
			x := e.(*executor)
			if x.cgroups != nil {
				t.Fatal("cgroups in use although turned off")
			}
			if !strings.Contains(x.ulimit, tc.ulimit) || (tc.ulimit == "" && x.ulimit != "") {
				t.Fatalf("shell prefix %q, want %q", x.ulimit, tc.ulimit)
			}
		})
	}
}

// TestLateKillSparesNextCommand: a command's kill that comes late (its
// timeout or cancel firing as it ends) must not reach the next command,
// which may run in the same cgroup directory, reused.
func TestLateKillSparesNextCommand(t *testing.T) {
	var e Executor
	withCgroupKind(cgroupV1Pids, func() { e, _ = newExec(t, ModeSoftware) })
	x := e.(*executor)
	if x.cgroups == nil || x.cgroups.kind != cgroupV1Pids {
		t.Skip("no cgroup v1 pids hierarchy here")
	}
	// Empty the spares, then end one command's cgroup so it becomes the
	// only spare.
	for len(x.cgroups.spare) > 0 {
		c := <-x.cgroups.spare
		os.Remove(c.dir)
	}
	old, err := x.cgroups.create()
	if err != nil {
		t.Fatal(err)
	}
	old.drop()
	x.cgroups.cleanup.Wait()
	if len(x.cgroups.spare) != 1 {
		t.Fatalf("%d spares after one drop", len(x.cgroups.spare))
	}
	p, err := e.Start(context.Background(), Request{Command: "sleep 30"}, Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait()
	defer p.Signal("KILL")
	pc := p.(*process).c
	if pc.cg.dir != old.dir {
		t.Fatalf("the command runs in %s, not in the reused %s", pc.cg.dir, old.dir)
	}
	old.kill() // the late kill
	time.Sleep(100 * time.Millisecond)
	if pid := pc.cmd.Process.Pid; syscall.Kill(pid, 0) != nil || zombie(pid) {
		t.Fatal("the next command was killed by the previous one's late kill")
	}
	if b, _ := os.ReadFile(filepath.Join(old.dir, "pids.max")); strings.TrimSpace(string(b)) != strconv.Itoa(DefaultMaxProcesses) {
		t.Fatalf("pids.max of the reused cgroup is %q", b)
	}
}

// TestStaleCgroupsRemoved: what a daemon killed with SIGKILL left (its
// cgroup and the spare command cgroups in it) is removed by the next one.
func TestStaleCgroupsRemoved(t *testing.T) {
	var e Executor
	withCgroupKind(cgroupV1Pids, func() { e, _ = newExec(t, ModeSoftware) })
	x := e.(*executor)
	if x.cgroups == nil {
		t.Skip("no cgroup v1 pids hierarchy here")
	}
	// A pid that does not exist: a process that has been waited for.
	gone := exec.Command("/bin/true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(x.cgroups.home, fmt.Sprintf("agentbe-%d-1", gone.Process.Pid))
	live := filepath.Join(x.cgroups.home, fmt.Sprintf("agentbe-%d-99", os.Getpid()))
	for _, d := range []string{stale, filepath.Join(stale, "c1"), live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	defer os.Remove(live)
	defer os.Remove(filepath.Join(stale, "c1"))
	defer os.Remove(stale)
	withCgroupKind(cgroupV1Pids, func() { newExec(t, ModeSoftware) })
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the dead daemon's cgroup is still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live process's cgroup was removed: %v", err)
	}
}

// TestNestedStaleCgroupsRemoved: a dead daemon whose command was itself a
// daemon (killed with it) left that daemon's cgroups inside its command's
// cgroup; the next daemon removes the whole tree, and keeps what a live
// daemon nested the same way holds (its spare cgroups are empty, and in
// use) and what it did not make.
func TestNestedStaleCgroupsRemoved(t *testing.T) {
	var e Executor
	withCgroupKind(cgroupV1Pids, func() { e, _ = newExec(t, ModeSoftware) })
	x := e.(*executor)
	if x.cgroups == nil {
		t.Skip("no cgroup v1 pids hierarchy here")
	}
	deadPid := func() int {
		gone := exec.Command("/bin/true")
		if err := gone.Run(); err != nil {
			t.Fatal(err)
		}
		return gone.Process.Pid
	}
	home := x.cgroups.home
	dead1, dead2, dead3 := deadPid(), deadPid(), deadPid()
	// A dead daemon, its command a dead daemon, its command a dead daemon.
	gone := filepath.Join(home, fmt.Sprintf("agentbe-%d-2", dead1))
	goneTree := []string{gone, gone + "/c1", gone + "/c3",
		gone + fmt.Sprintf("/c1/agentbe-%d-1", dead2), gone + fmt.Sprintf("/c1/agentbe-%d-1/c1", dead2),
		gone + fmt.Sprintf("/c1/agentbe-%d-1/c1/agentbe-%d-4", dead2, dead3), gone + fmt.Sprintf("/c1/agentbe-%d-1/c1/agentbe-%d-4/c9", dead2, dead3)}
	// A dead daemon whose command is a live daemon (this process's pid
	// stands for it) holding a spare cgroup.
	kept := filepath.Join(home, fmt.Sprintf("agentbe-%d-7", dead3))
	keptTree := []string{kept, kept + "/c1", kept + fmt.Sprintf("/c1/agentbe-%d-99", os.Getpid()), kept + fmt.Sprintf("/c1/agentbe-%d-99/c2", os.Getpid())}
	// A dead daemon with a cgroup it did not make inside.
	foreign := filepath.Join(home, fmt.Sprintf("agentbe-%d-8", dead2))
	foreignTree := []string{foreign, foreign + "/c1", foreign + "/c1/made-by-a-command"}
	all := slices.Concat(goneTree, keptTree, foreignTree)
	for _, d := range all {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, d := range slices.Backward(all) {
			_ = os.Remove(d)
		}
	})
	withCgroupKind(cgroupV1Pids, func() { newExec(t, ModeSoftware) })
	for _, d := range goneTree {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s: a dead daemon's cgroup is still there: %v", d, err)
		}
	}
	for _, d := range slices.Concat(keptTree, foreignTree) {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: removed, though a live daemon holds it or the daemon did not make it: %v", d, err)
		}
	}
}

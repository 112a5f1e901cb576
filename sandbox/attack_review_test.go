//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// inheritedFDs are this test process's own descriptors from 3 up that
// are not close-on-exec: what its launcher left open. The daemon marks
// those close-on-exec first thing (daemon/fds.go); a test binary does
// not, so they are not the executor's to account for.
func inheritedFDs() map[string]bool {
	got := map[string]bool{}
	for fd := 3; fd < 1024; fd++ {
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && fl&unix.FD_CLOEXEC == 0 {
			got[strconv.Itoa(fd)] = true
		}
	}
	return got
}

// TestAttackDescriptorsEveryMode: a command of any mode holds stdin,
// stdout and stderr and nothing else of the daemon's, with the three
// kinds of stdin and output exec has (none, a reader, merged streams):
// not bwrap's fd 3 (the boundary's directory), not the landlock
// trampoline's ruleset, filter or environment (3, 4, 5), not the helper's
// descriptor, not the pipes of other commands.
func TestAttackDescriptorsEveryMode(t *testing.T) {
	inherited := inheritedFDs()
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			e, ws := newExec(t, mode)
			bin := copySelf(t, ws, "prober")
			defer os.Remove(bin)
			for _, req := range []Request{
				{},
				{Stdin: strings.NewReader("input")},
				{MergeStderr: true},
			} {
				req.Command, req.Boundary = "./prober", ws
				req.Env = map[string]string{testRoleEnv: "prober", "PROBE_OPS": "fds:"}
				res := run(t, e, req)
				line := strings.TrimSpace(string(res.Stdout))
				v, ok := strings.CutPrefix(line, "fds:=")
				if res.ExitCode != 0 || !ok {
					t.Fatalf("prober: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
				}
				if v == "ok" {
					continue
				}
				for _, fd := range strings.Split(strings.TrimPrefix(v, "error:fds:"), ",") {
					n, target, _ := strings.Cut(fd, "=")
					// The prober's own Go runtime keeps its cgroup's CPU
					// limit files open (where /sys is visible) to follow
					// the limit: the prober's, not the daemon's.
					if strings.HasPrefix(target, "/sys/fs/cgroup/") && strings.Contains(target, "/cpu.") {
						continue
					}
					if !inherited[n] {
						t.Errorf("%s (stdin %v, merged %v): the command holds descriptor %s: %s", mode, req.Stdin != nil, req.MergeStderr, fd, v)
					}
				}
			}
		})
	}
}

// listenAbstract listens on an abstract unix socket of this test's
// network namespace and answers every connection; it returns the name
// (without the leading NUL).
func listenAbstract(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("agentbe-attack-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	l, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return name
}

// TestAttackLandlockHostThroughProc: a landlock command reaches nothing
// of the host through the daemon's /proc entries (its root, cwd,
// descriptors and executable: /proc/<pid>/root/<file> is the host's file
// by another name; the numbers in /proc/<pid>/fd can be listed by a
// command of the daemon's user, what they lead to cannot), nor writes the shared temporary directories
// /dev/shm and /var/tmp, nor connects to an abstract unix socket the
// daemon listens on, nor reaches another scope's private TMPDIR or the
// directory that holds the scopes' ones. Mode none runs the same probes
// as the control.
func TestAttackLandlockHostThroughProc(t *testing.T) {
	if LandlockABI() < 6 {
		t.Skipf("this kernel's Landlock ABI is %d; the test needs 6 (scoped abstract sockets)", LandlockABI())
	}
	e, ws := newExec(t, ModeLandlock)
	none, _ := newExec(t, ModeNone, func(c *Config) { c.WorkspaceRoot = ws })
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := "/proc/" + strconv.Itoa(os.Getpid())
	shm := fmt.Sprintf("/dev/shm/agentbe-attack-%d", os.Getpid())
	vartmp := fmt.Sprintf("/var/tmp/agentbe-attack-%d", os.Getpid())
	t.Cleanup(func() { os.Remove(shm); os.Remove(vartmp) })
	abstract := listenAbstract(t)
	ops := []string{
		"read:" + d + "/root" + token, "readdir:" + d + "/cwd", "readlink:" + d + "/fd/0", "readlink:" + d + "/exe",
		"readdir:" + d + "/root/", "write:" + shm, "write:" + vartmp, "connect-abstract:" + abstract,
	}
	for op, r := range runProbes(t, none, ws, ops) {
		if r != "ok" {
			t.Fatalf("control (mode none): %s = %s; the probe cannot tell the sandbox's refusals apart", op, r)
		}
	}
	os.Remove(shm)
	os.Remove(vartmp)
	got := runProbes(t, e, ws, ops)
	for _, op := range ops {
		want := "EACCES"
		if strings.HasPrefix(op, "connect-abstract:") {
			want = "EPERM" // the seccomp filter below ABI 9, Landlock's scope from 6
		}
		if got[op] != want {
			t.Errorf("landlock: %s = %s, want %s", op, got[op], want)
		}
	}

	// Another scope's private TMPDIR, where its commands leave their
	// temporary files: neither read nor written nor listed from this one.
	a, b := filepath.Join(ws, "a"), filepath.Join(ws, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	res := run(t, e, Request{Command: `echo s3cret > "$TMPDIR/f" && printf %s "$TMPDIR"`, Boundary: b})
	tmpB := string(res.Stdout)
	if res.ExitCode != 0 || tmpB == "" {
		t.Fatalf("scope b's TMPDIR: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	tmpOps := []string{"read:" + tmpB + "/f", "write:" + tmpB + "/g", "readdir:" + tmpB, "readdir:" + filepath.Dir(tmpB)}
	for op, r := range runProbes(t, e, a, tmpOps) {
		if r != "EACCES" {
			t.Errorf("landlock, scope a: %s = %s, want EACCES", op, r)
		}
	}
}

// TestAttackBwrapHostilePathNames: directory names that look like bwrap's
// options (--chdir, a newline then --bind, a lone -) are bwrap's values,
// never its options: the command runs in exactly that directory (as its
// boundary and as its cwd) and sees no more of the host.
func TestAttackBwrapHostilePathNames(t *testing.T) {
	e, ws := newExec(t, ModeBwrap)
	for _, name := range []string{"--chdir", "a\n--bind", "-", "--", "--ro-bind"} {
		dir := filepath.Join(ws, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, req := range []Request{{Boundary: dir, Dir: dir}, {Boundary: ws, Dir: dir}} {
			req.Command = `pwd; [ -e /root ] || [ -e /home ] && echo host; true`
			res := run(t, e, req)
			if res.ExitCode != 0 || string(res.Stdout) != dir+"\n" {
				t.Errorf("directory %q (boundary %q): exit %d stdout %q stderr %q", dir, req.Boundary, res.ExitCode, res.Stdout, res.Stderr)
			}
		}
	}
}

// TestGapsNameWhatIsReachable: what an attack reaches and the mode does
// not stop is in Gaps (the start-up log's gaps, /health's isolationGaps).
// A bwrap command with the network shares the host's network namespace,
// and with it every abstract unix socket (the names belong to the
// namespace, not to a path a mount could hide). Where the kernel scopes
// abstract sockets (Landlock ABI 6) and bwrap is not setuid, the threads
// bwrap is forked from are in a domain that scopes them: the host's
// socket is refused (EPERM), two processes of one command still talk over
// one of their own, and Gaps names only what the commands of one spawner
// thread share. Elsewhere the host's socket is reached, and Gaps says so
// and why. Without the network it is out of reach (ECONNREFUSED). A
// landlock command reads the command line of every process on the host
// in /proc (other scopes' commands included), though not their
// environment.
func TestGapsNameWhatIsReachable(t *testing.T) {
	abstract := listenAbstract(t)
	t.Run("bwrap", func(t *testing.T) {
		needBwrap(t)
		path, err := exec.LookPath("bwrap")
		if err != nil {
			t.Fatal(err)
		}
		scoped := LandlockABI() >= landlockScopeABI && bwrapGainsPrivileges(path) == ""
		for _, noNet := range []bool{false, true} {
			e, ws := newExec(t, ModeBwrap, func(c *Config) { c.NoNetwork = noNet })
			op := "connect-abstract:" + abstract
			got := runProbes(t, e, ws, []string{op})[op]
			gaps := strings.Join(e.Gaps(), "\n")
			hostNamed := strings.Contains(gaps, "every abstract unix socket of the host")
			switch {
			case noNet && (got != "ECONNREFUSED" || strings.Contains(gaps, "abstract unix socket")):
				t.Errorf("without the network: the host's abstract socket: %s (want ECONNREFUSED); Gaps %q", got, e.Gaps())
			case noNet:
			case scoped && (got != "EPERM" || hostNamed || !strings.Contains(gaps, "same spawner thread") ||
				!strings.Contains(e.Reason(), "abstract unix sockets scoped by Landlock")):
				t.Errorf("with the network, Landlock ABI %d: the host's abstract socket: %s (want EPERM, the Landlock scope); Gaps %q; Reason %q", LandlockABI(), got, e.Gaps(), e.Reason())
			case !scoped && (got != "ok" || !hostNamed || !strings.Contains(gaps, "not scoped: ")):
				t.Errorf("with the network, unscoped (Landlock ABI %d, %s): the host's abstract socket: %s; Gaps %q", LandlockABI(), bwrapGainsPrivileges(path), got, e.Gaps())
			}
			// Two processes of one command: a server that listens on an
			// abstract socket of its own and a child it forks that
			// connects to it, in the domain they share.
			res := run(t, e, Request{Command: `python3 -c '
import os, socket
name = "\0agentbe-own-%d" % os.getpid()
s = socket.socket(socket.AF_UNIX)
s.bind(name)
s.listen(1)
pid = os.fork()
if pid == 0:
    c = socket.socket(socket.AF_UNIX)
    c.connect(name)
    c.sendall(b"hello")
    os._exit(0)
conn, _ = s.accept()
print(conn.recv(5).decode())
os.waitpid(pid, 0)
'`})
			if res.ExitCode != 0 || string(res.Stdout) != "hello\n" {
				t.Errorf("network %v: two processes of one command over their own abstract socket: exit %d stdout %q stderr %q", !noNet, res.ExitCode, res.Stdout, res.Stderr)
			}
			if noNet || !scoped {
				continue
			}
			// A transaction's bwrap, forked from the in-place overlay's
			// thread of its own (a root daemon) or through the
			// trampoline from the executor's threads, is scoped too.
			for _, tramp := range []bool{false, true} {
				was := OverlayByTrampoline(tramp)
				copySelf(t, ws, "prober")
				res, err := e.Run(context.Background(), Request{Command: "./prober", Overlay: &Overlay{Dir: txDir(t), MaxBytes: 1 << 20, MaxFiles: 100},
					Env: map[string]string{testRoleEnv: "prober", "PROBE_OPS": op}})
				OverlayByTrampoline(was)
				if err != nil {
					t.Fatalf("transaction (trampoline %v): %v", tramp, err)
				}
				res.Upper.Close()
				if want := op + "=EPERM\n"; res.ExitCode != 0 || string(res.Stdout) != want {
					t.Errorf("transaction (trampoline %v): the host's abstract socket: exit %d stdout %q (want %q) stderr %q", tramp, res.ExitCode, res.Stdout, want, res.Stderr)
				}
			}
		}
	})
	t.Run("landlock", func(t *testing.T) {
		if LandlockABI() < 1 {
			t.Skip("no Landlock on this kernel")
		}
		e, ws := newExec(t, ModeLandlock)
		other := startSleeper(t)
		got := runProbes(t, e, ws, []string{"read:/proc/" + other + "/cmdline", "read:/proc/" + other + "/environ"})
		if got["read:/proc/"+other+"/cmdline"] != "ok" || got["read:/proc/"+other+"/environ"] != "EACCES" {
			t.Errorf("another process's command line and environment: %v", got)
		}
		if !strings.Contains(strings.Join(e.Gaps(), "\n"), "command line") {
			t.Errorf("a landlock command reads other processes' command lines; Gaps do not say so: %q", e.Gaps())
		}
	})
}

// TestAttackKernelSettings: a command (root without capabilities, for a
// root daemon without --run-as) cannot open for writing the kernel's
// settings that a root-owned file's owner bits would let it change
// without any capability: /proc/sys (core_pattern, whose pipe would run a
// workspace program as root on the next crash), /proc/sysrq-trigger, and
// the cgroup file system. bwrap remounts /proc/sys and sysrq-trigger
// read-only in its fresh /proc and has no /sys; landlock grants /proc
// for reading only and no /sys. Nothing is written: the probe opens and
// closes. Mode none (root: every open succeeds) is the control.
func TestAttackKernelSettings(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the owner bits of these files are root's: the attack is a root command's")
	}
	cg := "/sys/fs/cgroup/cgroup.procs"
	if _, err := os.Stat(cg); err != nil {
		cg = "/sys/fs/cgroup/pids/cgroup.procs"
	}
	// Only what the control opens here is tried (a container may lack
	// sysrq-trigger, or mount /proc/sys read-only itself).
	var ops []string
	none, nws := newExec(t, ModeNone)
	for op, r := range runProbes(t, none, nws, []string{"openw:/proc/sys/kernel/core_pattern", "openw:/proc/sysrq-trigger", "openw:" + cg}) {
		if r == "ok" {
			ops = append(ops, op)
		} else {
			t.Logf("control (mode none): %s = %s: not tried", op, r)
		}
	}
	if len(ops) == 0 {
		t.Skip("root cannot open any of them for writing here, so the modes' refusals cannot be told apart")
	}
	for _, mode := range []Mode{ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == ModeLandlock && LandlockABI() < 1 {
				t.Skip("no Landlock on this kernel")
			}
			e, ws := newExec(t, mode)
			for op, r := range runProbes(t, e, ws, ops) {
				if r == "ok" {
					t.Errorf("%s: %s = ok: a command could change the kernel's settings", mode, op)
				}
			}
		})
	}
}

// TestAbstractScopeOnSpawnerThreadsOnly: in bwrap mode with the network
// the Landlock domain that scopes abstract unix sockets (and the
// no_new_privs it needs) is on the spawner's thread only: the process's
// main thread and a thread of the test's own stay without no_new_privs,
// and from there the test's goroutines still connect to an abstract
// socket of the host. A bwrap that is setuid is left unscoped.
func TestAbstractScopeOnSpawnerThreadsOnly(t *testing.T) {
	if LandlockABI() < landlockScopeABI {
		t.Skipf("this kernel's Landlock ABI is %d; scoping needs %d", LandlockABI(), landlockScopeABI)
	}
	abstract := listenAbstract(t)
	ex, _ := newExec(t, ModeBwrap)
	e := ex.(*executor)
	if !e.abstractScoped {
		t.Skipf("the spawner is not scoped here: %s", e.abstractScopeOff)
	}
	nnp := func(tid int) string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "NoNewPrivs:"); ok {
				return strings.TrimSpace(v)
			}
		}
		t.Fatalf("no NoNewPrivs in the status of task %d", tid)
		return ""
	}
	var spawnTid int
	if err := e.spawn.p.do(spawnReq{fn: func() error { spawnTid = unix.Gettid(); return nil }}); err != nil {
		t.Fatal(err)
	}
	if got := nnp(spawnTid); got != "1" {
		t.Errorf("the spawner's thread %d: NoNewPrivs %s, want 1", spawnTid, got)
	}
	if got := nnp(os.Getpid()); got != "0" {
		t.Errorf("the main thread: NoNewPrivs %s, want 0", got)
	}
	done := make(chan error, 8)
	for range 8 {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if got := nnp(unix.Gettid()); got != "0" {
				done <- fmt.Errorf("thread %d: NoNewPrivs %s", unix.Gettid(), got)
				return
			}
			c, err := net.Dial("unix", "@"+abstract)
			if err == nil {
				c.Close()
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Errorf("a thread of the test's own: %v", err)
		}
	}

	// The check that keeps a setuid bwrap out of the domain.
	bin := filepath.Join(t.TempDir(), "bwrap")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if why := bwrapGainsPrivileges(bin); why != "" {
		t.Errorf("a plain 0755 file: %s", why)
	}
	if err := unix.Chmod(bin, 0o4755); err != nil {
		t.Fatal(err)
	}
	if why := bwrapGainsPrivileges(bin); !strings.Contains(why, "setuid") {
		t.Errorf("a setuid file: %q", why)
	}
}

//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
)

func init() { testRoles["prober"] = proberRole }

// proberRole tries each operation of $PROBE_OPS (space-separated
// op:arg) and prints op:arg=ok or op:arg=<errno name>, one a line: what
// the sandbox let a command do, from inside it.
func proberRole() int {
	for _, op := range strings.Fields(os.Getenv("PROBE_OPS")) {
		name, arg, _ := strings.Cut(op, ":")
		fmt.Printf("%s=%s\n", op, result(probe(name, arg)))
	}
	return 0
}

func result(err error) string {
	if err == nil {
		return "ok"
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return "error:" + err.Error()
}

func probe(name, arg string) error {
	pid, _ := strconv.Atoi(arg)
	switch name {
	case "read":
		_, err := os.ReadFile(arg)
		return err
	case "write":
		return os.WriteFile(arg, []byte("x"), 0o600)
	case "ptrace":
		if err := unix.PtraceAttach(pid); err != nil {
			return err
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WALL, nil)
		return unix.PtraceDetach(pid)
	case "mem":
		f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
		if err == nil {
			f.Close()
		}
		return err
	case "signal":
		return unix.Kill(pid, 0)
	case "prlimit-set":
		// Another process's limits, set to what they are (a lower
		// RLIMIT_CPU or RLIMIT_NOFILE would kill or starve it).
		var cur unix.Rlimit
		if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &cur); err != nil {
			return err
		}
		return unix.Prlimit(pid, unix.RLIMIT_NOFILE, &cur, nil)
	case "renice":
		// Its priority, the same value again (nothing changes where
		// it is allowed).
		prio, err := unix.Getpriority(unix.PRIO_PROCESS, pid)
		if err != nil {
			return err
		}
		return unix.Setpriority(unix.PRIO_PROCESS, pid, 20-prio)
	case "renice-user":
		// Every process of the command's uid: the daemon's, when it
		// is root, and other scopes' commands.
		return unix.Setpriority(unix.PRIO_USER, 0, 0)
	case "ioprio":
		// ioprio_set(IOPRIO_WHO_PROCESS, pid, best effort level 4).
		_, _, errno := unix.Syscall(unix.SYS_IOPRIO_SET, 1, uintptr(pid), 2<<13|4)
		if errno != 0 {
			return errno
		}
		return nil
	case "affinity":
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(pid, &set); err != nil {
			return err
		}
		return unix.SchedSetaffinity(pid, &set)
	case "sched":
		// sched_setscheduler(pid, SCHED_OTHER, {0}): its own policy again.
		param := [1]int32{0}
		_, _, errno := unix.Syscall(unix.SYS_SCHED_SETSCHEDULER, uintptr(pid), 0, uintptr(unsafe.Pointer(&param[0])))
		if errno != 0 {
			return errno
		}
		return nil
	case "unshare":
		return unix.Unshare(unix.CLONE_NEWUSER)
	case "clone3":
		// clone3 asking for a new user namespace; a child that is
		// created exits at once.
		args := struct{ flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls uint64 }{
			flags: unix.CLONE_NEWUSER, exitSignal: uint64(unix.SIGCHLD)}
		r, _, errno := unix.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args), 0)
		if errno != 0 {
			return errno
		}
		if r == 0 {
			unix.RawSyscall(unix.SYS_EXIT, 0, 0, 0)
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(int(r), &ws, 0, nil)
		return nil
	case "mknod":
		// A character device (/dev/null's numbers) in the boundary.
		return unix.Mknod(arg, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3)))
	case "setuid":
		return unix.Chmod(arg, 0o4755) // os.Chmod would drop the bit (os.ModeSetuid is its own)
	case "chown":
		return os.Chown(arg, 12345, 12345)
	case "mknod-setuid":
		// A regular file made setuid as it is made, without chmod.
		return unix.Mknod(arg, unix.S_IFREG|0o4755, 0)
	case "open-setuid", "open-setgid", "open-tmpfile-setuid":
		// The same through open(2)'s mode: a file created with the bit.
		mode, flags := uint32(0o4755), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY
		if name == "open-setgid" {
			mode = 0o2755
		}
		if name == "open-tmpfile-setuid" {
			flags = unix.O_TMPFILE | unix.O_WRONLY
		}
		fd, err := unix.Open(arg, flags|unix.O_CLOEXEC, mode)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	case "creat-setuid":
		path, err := unix.BytePtrFromString(arg)
		if err != nil {
			return err
		}
		fd, _, errno := unix.Syscall(unix.SYS_CREAT, uintptr(unsafe.Pointer(path)), 0o4755, 0)
		if errno != 0 {
			return errno
		}
		return unix.Close(int(fd))
	case "openat2-setuid":
		// openat2's mode is in a struct a filter cannot read.
		fd, err := unix.Openat2(unix.AT_FDCWD, arg, &unix.OpenHow{Flags: unix.O_CREAT | unix.O_WRONLY | unix.O_CLOEXEC, Mode: 0o4755})
		if err != nil {
			return err
		}
		return unix.Close(fd)
	case "open-plain":
		// What a build does all day: a file created 0755, and one opened
		// without O_CREAT whatever the mode argument holds.
		fd, err := unix.Open(arg, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o755)
		if err != nil {
			return err
		}
		unix.Close(fd)
		fd, err = unix.Open(arg, unix.O_RDONLY|unix.O_CLOEXEC, 0o4755)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	case "environ":
		_, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		return err
	case "caps":
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "CapEff:") || strings.HasPrefix(l, "CapBnd:") {
				if strings.Trim(strings.TrimSpace(l[7:]), "0") != "" {
					return fmt.Errorf("%s", l)
				}
			}
		}
		return nil
	case "tiocsti-stdin":
		// On the command's own stdin (a pipe here): the kernel would say
		// ENOTTY; the filter says EPERM before it looks.
		c := byte('x')
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, 0, uintptr(unix.TIOCSTI), uintptr(unsafe.Pointer(&c)))
		if errno != 0 {
			return errno
		}
		return nil
	case "tiocsti", "tiocsti-high":
		// A pseudo-terminal of its own: the injection is tried on its
		// replica end.
		ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
		if err != nil {
			return fmt.Errorf("ptmx: %w", err)
		}
		defer ptm.Close()
		if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
			return fmt.Errorf("unlockpt: %w", err)
		}
		n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
		if err != nil {
			return fmt.Errorf("ptsname: %w", err)
		}
		pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
		if err != nil {
			return fmt.Errorf("pts: %w", err)
		}
		defer pts.Close()
		req := uint64(unix.TIOCSTI)
		if name == "tiocsti-high" {
			req |= 0xFFFFFFFF << 32 // the kernel reads 32 bits: the same request
		}
		c := byte('x')
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, pts.Fd(), uintptr(req), uintptr(unsafe.Pointer(&c)))
		if errno != 0 {
			return errno
		}
		return nil
	case "connect-unix":
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Connect(fd, &unix.SockaddrUnix{Name: arg})
	case "connect-abstract":
		// An abstract unix socket: a name in the network namespace, no
		// file, so no path rule applies to it.
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Connect(fd, &unix.SockaddrUnix{Name: "@" + arg})
	case "fds":
		// The descriptors this process holds, but the one it lists them
		// with, as "fds:3=/dev/null,10=pipe:[1]" (none: "ok"). Raw system calls: os.Open
		// would add descriptors of the runtime's poller.
		dfd, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		var extra []string
		buf := make([]byte, 8192)
		for {
			n, err := unix.Getdents(dfd, buf)
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
			_, _, names := unix.ParseDirent(buf[:n], -1, nil)
			for _, name := range names {
				if fd, _ := strconv.Atoi(name); fd > 2 && fd != dfd {
					target, _ := os.Readlink("/proc/self/fd/" + name)
					extra = append(extra, name+"="+target)
				}
			}
		}
		if len(extra) > 0 {
			return fmt.Errorf("fds:%s", strings.Join(extra, ","))
		}
		return nil
	case "openw":
		// Opened for writing and closed without a byte written: what a
		// write would be allowed, without changing the file (a sysctl).
		fd, err := unix.Open(arg, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	case "readdir":
		_, err := os.ReadDir(arg)
		return err
	case "readlink":
		_, err := os.Readlink(arg)
		return err
	case "socket-inet":
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	case "socket-unix-high":
		// AF_UNIX with the upper 32 bits of the argument set: the kernel
		// reads an int, so it is the same family to it.
		fd, _, errno := unix.RawSyscall(unix.SYS_SOCKET, uintptr(unix.AF_UNIX|1<<32), unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if errno != 0 {
			return errno
		}
		unix.Close(int(fd))
		return nil
	case "socketpair":
		// A pair of connected sockets of type arg; a byte crosses it.
		typ := map[string]int{"stream": unix.SOCK_STREAM, "seqpacket": unix.SOCK_SEQPACKET, "dgram": unix.SOCK_DGRAM}[arg]
		fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fds[0])
		defer unix.Close(fds[1])
		if _, err := unix.Write(fds[0], []byte("x")); err != nil {
			return err
		}
		b := make([]byte, 1)
		if n, err := unix.Read(fds[1], b); err != nil || n != 1 || b[0] != 'x' {
			return fmt.Errorf("read %d %q: %v", n, b, err)
		}
		return nil
	case "sendto-unix":
		// A datagram to a named socket from one end of a socketpair, the
		// one unix socket a command can make without socket(2).
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fds[0])
		defer unix.Close(fds[1])
		return unix.Sendto(fds[0], []byte("x"), 0, &unix.SockaddrUnix{Name: arg})
	case "io_uring":
		// io_uring makes and connects sockets (IORING_OP_SOCKET,
		// IORING_OP_CONNECT) without the system calls a filter sees.
		var params [120]byte // struct io_uring_params
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
		if errno != 0 {
			return errno
		}
		unix.Close(int(fd))
		return nil
	}
	return fmt.Errorf("unknown probe %q", name)
}

// runProbes runs the prober (a copy of the test binary inside the
// boundary, where every mode may run it) with ops and returns op → result.
func runProbes(t *testing.T, e Executor, boundary string, ops []string) map[string]string {
	t.Helper()
	bin := copySelf(t, boundary, "prober")
	res, err := e.Run(context.Background(), Request{Command: "./prober", Boundary: boundary,
		Env: map[string]string{testRoleEnv: "prober", "PROBE_OPS": strings.Join(ops, " ")}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("prober: %v exit %d stdout %q stderr %q", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	os.Remove(bin)
	got := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(res.Stdout)))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			got[k] = v
		}
	}
	for _, op := range ops {
		if _, ok := got[op]; !ok {
			t.Fatalf("prober printed no result for %s: %q %q", op, res.Stdout, res.Stderr)
		}
	}
	return got
}

// TestLandlockConfines is the landlock mode's attack test: a command in a
// scope writes its scope and its private TMPDIR and reads the system, but
// cannot write the host's /tmp or /etc, read another scope or a token
// file outside the workspace, ptrace the daemon or open its memory,
// signal it, make a user namespace (unshare or clone3) or push input into
// a terminal (TIOCSTI, also with the request's upper bits set). Mode none
// runs the same probes as the control: each refusal is the sandbox's,
// not this machine's.
func TestLandlockConfines(t *testing.T) {
	if LandlockABI() < 6 {
		t.Skipf("this kernel's Landlock ABI is %d; the test needs 6 (scoped signals)", LandlockABI())
	}
	e, ws := newExec(t, ModeLandlock)
	none, _ := newExec(t, ModeNone, func(c *Config) { c.WorkspaceRoot = ws })
	scopeA, scopeB := filepath.Join(ws, "a"), filepath.Join(ws, "b")
	for _, d := range []string{scopeA, scopeB} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(scopeB, "secret")
	token := filepath.Join(t.TempDir(), "token")
	for _, f := range []string{secret, token} {
		if err := os.WriteFile(f, []byte("s3cret"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hostTmp := t.TempDir()
	etcFile := "/etc/agentbe-landlock-test-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { os.Remove(etcFile) })
	daemon := strconv.Itoa(os.Getpid())

	root := os.Geteuid() == 0
	ops := func(target string) []string {
		o := []string{
			"write:" + filepath.Join(scopeA, "mine"), "read:/etc/passwd", "read:/usr/bin/env",
			"write:" + filepath.Join(hostTmp, "x"), "write:" + etcFile,
			"read:" + secret, "read:" + token,
			"ptrace:" + target, "mem:" + target, "signal:" + target,
			"prlimit-set:" + target, "renice:" + target, "ioprio:" + target, "affinity:" + target, "sched:" + target,
			"prlimit-set:0", "renice:0", "ioprio:0", "affinity:0", "sched:0", "renice-user:",
			"unshare:", "clone3:", "tiocsti:", "tiocsti-high:", "tiocsti-stdin:",
		}
		if root {
			// What only root could do without dropping its capabilities:
			// make a device node, give a file away, read another
			// process's environment (CAP_SYS_PTRACE).
			o = append(o, "mknod:"+filepath.Join(scopeA, "dev"), "setuid:"+filepath.Join(scopeA, "mine"), "chown:"+filepath.Join(scopeA, "mine"), "environ:"+target)
		}
		return o
	}
	// The control: mode none may do all of it (to a stand-in for the
	// daemon, which a successful ptrace would stop).
	standIn := startSleeper(t)
	ctl := runProbes(t, none, scopeA, ops(standIn))
	os.Remove(filepath.Join(scopeA, "dev"))
	os.Remove(filepath.Join(scopeA, "mine"))
	for op, r := range ctl {
		// A multithreaded process (the prober) gets EINVAL from
		// unshare(CLONE_NEWUSER): the kernel's own answer, after the
		// filter's EPERM would have come.
		if r != "ok" && (op != "unshare:" || r != "EINVAL") && (op != "tiocsti-stdin:" || r != "ENOTTY") {
			t.Fatalf("control (mode none): %s = %s; the probe cannot tell the sandbox's refusals apart", op, r)
		}
	}
	os.Remove(etcFile)

	got := runProbes(t, e, scopeA, ops(daemon))
	want := map[string]string{
		"write:" + filepath.Join(scopeA, "mine"): "ok", "read:/etc/passwd": "ok", "read:/usr/bin/env": "ok",
		"write:" + filepath.Join(hostTmp, "x"): "EACCES", "write:" + etcFile: "EACCES",
		"read:" + secret: "EACCES", "read:" + token: "EACCES",
		"ptrace:" + daemon: "EPERM", "mem:" + daemon: "EACCES", "signal:" + daemon: "EPERM",
		// Another process's limits and scheduling: the daemon's, where
		// the command has the daemon's uid (root without --run-as), and
		// another scope's command of the same uid. Its own (pid 0) stay.
		"prlimit-set:" + daemon: "EPERM", "renice:" + daemon: "EPERM", "ioprio:" + daemon: "EPERM",
		"affinity:" + daemon: "EPERM", "sched:" + daemon: "EPERM",
		"prlimit-set:0": "ok", "renice:0": "ok", "ioprio:0": "ok", "affinity:0": "ok", "sched:0": "ok", "renice-user:": "EPERM",
		// No pseudo-terminal can be opened (the host's devpts holds the
		// other sessions'), and TIOCSTI is refused on what the command has.
		"unshare:": "EPERM", "clone3:": "ENOSYS", "tiocsti:": "EACCES", "tiocsti-high:": "EACCES", "tiocsti-stdin:": "EPERM",
	}
	if root && !strings.Contains(e.Reason(), "set --run-as") {
		t.Errorf("a root daemon's landlock mode without --run-as does not warn: %s", e.Reason())
	}
	if caps := runProbes(t, e, scopeA, []string{"caps:"}); caps["caps:"] != "ok" {
		t.Errorf("a landlock command has capabilities: %s", caps["caps:"])
	}
	if root {
		want["mknod:"+filepath.Join(scopeA, "dev")] = "EPERM"
		want["chown:"+filepath.Join(scopeA, "mine")] = "EPERM"
		want["setuid:"+filepath.Join(scopeA, "mine")] = "EPERM"
		want["environ:"+daemon] = "EACCES"
	}
	for op, w := range want {
		if got[op] != w {
			t.Errorf("landlock: %s = %s, want %s", op, got[op], w)
		}
	}
	if _, err := os.Stat(etcFile); err == nil {
		t.Errorf("a landlock command wrote %s", etcFile)
	}

	// An environment value with a NUL cannot smuggle a second variable
	// (LD_PRELOAD) past the trampoline: nothing runs.
	res, err := e.Run(context.Background(), Request{Command: "echo ran", Boundary: scopeA,
		Env: map[string]string{"A": "x\x00LD_PRELOAD=/nonexistent.so"}})
	if err == nil && (res.ExitCode == 0 || strings.Contains(string(res.Stdout), "ran")) {
		t.Errorf("a NUL in an environment value: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}

	// Its TMPDIR is its own: written there, and another scope's is
	// another directory.
	tmpOf := func(boundary string) string {
		res, err := e.Run(context.Background(), Request{Command: `echo x > "$TMPDIR/f" && printf %s "$TMPDIR"`, Boundary: boundary})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("TMPDIR in %s: %v %d %q", boundary, err, res.ExitCode, res.Stderr)
		}
		return string(res.Stdout)
	}
	if a, b := tmpOf(scopeA), tmpOf(scopeB); a == b || a == "" || strings.HasPrefix(a, ws) {
		t.Errorf("TMPDIR of scope a %q, of scope b %q: want two private directories outside the workspace", a, b)
	}
}

// TestSoftwareModeSeccomp: software mode's commands inherit the deny list
// from the thread they are forked from.
func TestSoftwareModeSeccomp(t *testing.T) {
	e, ws := newExec(t, ModeSoftware)
	if !strings.Contains(e.Reason(), "seccomp filter on") {
		t.Fatalf("software mode reason %q does not say the filter is on", e.Reason())
	}
	standIn := startSleeper(t)
	got := runProbes(t, e, ws, []string{"ptrace:" + standIn, "unshare:", "tiocsti:", "tiocsti-high:", "tiocsti-stdin:", "read:/etc/passwd",
		"prlimit-set:" + standIn, "prlimit-set:0", "renice-user:"})
	want := map[string]string{"ptrace:" + standIn: "EPERM", "unshare:": "EPERM", "tiocsti:": "EPERM", "tiocsti-high:": "EPERM", "tiocsti-stdin:": "EPERM", "read:/etc/passwd": "ok",
		"prlimit-set:" + standIn: "EPERM", "prlimit-set:0": "ok", "renice-user:": "EPERM"}
	for op, w := range want {
		if got[op] != w {
			t.Errorf("software: %s = %s, want %s", op, got[op], w)
		}
	}
	// The daemon's own threads are not filtered: this test process can
	// still make a user namespace.
	if err := probe("unshare", ""); err != nil && !errors.Is(err, unix.EINVAL) {
		t.Errorf("the filter leaked to the daemon's other threads: unshare in the test process: %v", err)
	}
}

// startSleeper starts a process the test owns, a target for probes that
// would disturb the test process itself.
func startSleeper(t *testing.T) string {
	t.Helper()
	p, err := os.StartProcess("/bin/sleep", []string{"sleep", "60"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill(); _, _ = p.Wait() })
	return strconv.Itoa(p.Pid)
}

func init() { testRoles["autopick"] = autopickRole }

// autopickRole builds an executor in auto mode on $WS and prints its mode,
// then the exit code of a command that writes the workspace and of one
// that writes $HOSTTMP.
func autopickRole() int {
	e, err := New(Config{Mode: ModeAuto, WorkspaceRoot: os.Getenv("WS")})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer e.Close()
	fmt.Printf("mode=%s\nreason=%s\n", e.Mode(), e.Reason())
	for i, cmd := range []string{"echo ok > inside", `echo x > "$HOSTTMP/outside"`} {
		res, err := e.Run(context.Background(), Request{Command: cmd, Env: map[string]string{"HOSTTMP": os.Getenv("HOSTTMP")}})
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Printf("exit%d=%d\n", i, res.ExitCode)
	}
	return 0
}

// TestAutoPicksLandlockWithoutUserNamespaces runs New(auto) where user
// namespaces are blocked (inside a bwrap started with --disable-userns, as
// in a container under a seccomp profile that refuses them): bwrap cannot
// work there, auto says why and chooses landlock, and a command writes the
// workspace but not the host's /tmp.
func TestAutoPicksLandlockWithoutUserNamespaces(t *testing.T) {
	needBwrap(t)
	if LandlockABI() < 1 {
		t.Skip("this kernel has no Landlock")
	}
	bwrap, _ := exec.LookPath("bwrap")
	if out, _ := exec.Command(bwrap, "--help").CombinedOutput(); !strings.Contains(string(out), "--disable-userns") {
		t.Skip("this bwrap has no --disable-userns")
	}
	ws, hostTmp := workspace(t), t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bwrap, "--unshare-user", "--disable-userns", "--assert-userns-disabled", "--dev-bind", "/", "/", "--", self)
	cmd.Env = append(os.Environ(), testRoleEnv+"=autopick", "WS="+ws, "HOSTTMP="+hostTmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("autopick under bwrap --disable-userns: %v\n%s", err, out)
	}
	s := string(out)
	t.Logf("inside bwrap --disable-userns:\n%s", s)
	if !strings.Contains(s, "mode=landlock\n") || !strings.Contains(s, "bwrap unusable") || !strings.Contains(s, "landlock ABI") {
		t.Fatalf("auto without user namespaces:\n%s", s)
	}
	if !strings.Contains(s, "exit0=0\n") || strings.Contains(s, "exit1=0\n") {
		t.Fatalf("want the workspace written and the host's /tmp refused:\n%s", s)
	}
	if _, err := os.Stat(filepath.Join(hostTmp, "outside")); err == nil {
		t.Fatal("the command wrote the host's /tmp")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "inside")); err != nil || string(b) != "ok\n" {
		t.Fatalf("the command did not write its workspace: %q %v", b, err)
	}
}

// withoutTrampoline is the role of a program whose main does not call
// sandboxexec.Main (TestMain skips it there).
const withoutTrampoline = "without-trampoline"

func init() {
	testRoles[withoutTrampoline] = func() int {
		_, err := New(Config{Mode: ModeLandlock, WorkspaceRoot: os.Getenv("WS")})
		fmt.Printf("landlock=%v\n", err)
		e, err := New(Config{Mode: ModeAuto, WorkspaceRoot: os.Getenv("WS")})
		if err != nil {
			fmt.Printf("auto=%v\n", err)
			return 1
		}
		defer e.Close()
		fmt.Printf("auto=%s %s\n", e.Mode(), e.Reason())
		return 0
	}
}

// TestLandlockNeedsTrampoline: in a program whose main does not call
// sandboxexec.Main, /proc/self/exe is not the trampoline, so the landlock
// mode is refused (auto passes it over) rather than start that program
// with the trampoline's arguments.
func TestLandlockNeedsTrampoline(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), testRoleEnv+"="+withoutTrampoline, "WS="+workspace(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "isolation mode landlock cannot work: this program is not the trampoline") {
		t.Errorf("landlock without the trampoline:\n%s", s)
	}
	if strings.Contains(s, "auto=landlock") {
		t.Errorf("auto chose landlock without the trampoline:\n%s", s)
	}
}

// TestSeccompFilterAssembles: the deny list assembles, in every variant,
// for the architectures the releases are built for, system calls one of
// them lacks (mknod on arm64) skipped rather than failing.
func TestSeccompFilterAssembles(t *testing.T) {
	for _, a := range []string{"amd64", "arm64"} {
		for _, clone3 := range []bool{false, true} {
			for _, noUnix := range []bool{false, true} {
				prog, err := filterForArch(a, filterOpts{blockClone3: clone3, noUnixSockets: noUnix})
				if err != nil || len(prog) < 20 {
					t.Errorf("%s (clone3 %v, no unix sockets %v): %d instructions, %v", a, clone3, noUnix, len(prog), err)
				}
			}
		}
	}
}

// TestLandlockRefusals: what landlock mode cannot do is refused with why,
// and nothing runs: no network rules on a kernel older than ABI 4 when the
// network is to be taken away; an environment value with a NUL.
func TestLandlockRefusals(t *testing.T) {
	saved := landlockABI
	landlockABI = func() int { return 3 }
	_, err := New(Config{Mode: ModeLandlock, WorkspaceRoot: workspace(t), NoNetwork: true})
	landlockABI = saved
	if !errcode.Is(err, errcode.InvalidConfiguration) || !strings.Contains(err.Error(), "Landlock ABI 3 has no network rules (4 does)") {
		t.Errorf("landlock without network rules and no network: %v", err)
	}
	e, ws := newExec(t, ModeLandlock)
	res, err := e.Run(context.Background(), Request{Command: "touch ran", Env: map[string]string{"A": "x\x00B=y"}})
	if _, serr := os.Stat(filepath.Join(ws, "ran")); serr == nil || (err == nil && res.ExitCode == 0) {
		t.Errorf("a NUL in an environment value: %+v %v; the command ran", res, err)
	}
	if err == nil && !strings.Contains(string(res.Stderr), "NUL") {
		t.Errorf("the refusal does not say why: %q", res.Stderr)
	}
}

// TestLandlockIPCNamespace: SysV IPC, which Landlock does not govern, is
// each landlock command's own where the daemon may make an IPC namespace:
// a shared memory segment and a message queue one command makes (scope
// a) are not listed, attached or removed by another (scope b), and do not
// outlive the command on the host. Without CAP_SYS_ADMIN, Gaps names it.
func TestLandlockIPCNamespace(t *testing.T) {
	if LandlockABI() < 1 {
		t.Skip("this kernel has no Landlock")
	}
	e, ws := newExec(t, ModeLandlock)
	if !hasCapSysAdmin() {
		if !strings.Contains(strings.Join(e.Gaps(), "\n"), "SysV IPC") {
			t.Errorf("without CAP_SYS_ADMIN, Gaps does not name SysV IPC: %q", e.Gaps())
		}
		t.Skip("the daemon has no CAP_SYS_ADMIN, so commands share the host's IPC namespace (named in Gaps)")
	}
	for _, d := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := func(scope, cmd string) string {
		res, err := e.Run(context.Background(), Request{Command: cmd, Boundary: filepath.Join(ws, scope)})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return string(res.Stdout) + string(res.Stderr)
	}
	out := run("a", "ipcmk -M 4096 -p 0600 && ipcmk -Q -p 0600 && ipcs -m | grep -c '^0x'")
	if !strings.Contains(out, "Shared memory id:") || !strings.HasSuffix(strings.TrimSpace(out), "1") {
		t.Fatalf("scope a could not make its segment in its own namespace: %q", out)
	}
	id := strings.TrimSpace(strings.TrimPrefix(strings.Split(out, "\n")[0], "Shared memory id:"))
	if got := run("b", "ipcs -m | grep -c '^0x'; ipcs -q | grep -c '^0x'; ipcrm -m "+id+" 2>&1"); !strings.HasPrefix(got, "0\n0\n") || strings.Contains(got, "\n\n") {
		t.Errorf("scope b sees scope a's objects: %q", got)
	}
	host, _ := os.ReadFile("/proc/sysvipc/shm")
	for _, l := range strings.Split(string(host), "\n")[1:] {
		if f := strings.Fields(l); len(f) > 1 && f[1] == id && strings.Contains(l, " 4096 ") {
			t.Errorf("scope a's segment %s outlived the command on the host: %q", id, l)
		}
	}
}

//go:build linux

package sandbox

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
	"github.com/agentbe/agentbe-daemon/sandbox/policy"
	"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"
)

// listenUnix serves a named unix socket at path until the test ends:
// network "unix" accepts connections and closes them, "unixgram" takes
// datagrams.
func listenUnix(t *testing.T, network, path string) {
	t.Helper()
	if network == "unixgram" {
		pc, err := net.ListenPacket(network, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
		return
	}
	ln, err := net.Listen(network, path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
}

// TestLandlockUnixSockets is the attack test of pathname unix sockets in
// landlock mode. A root daemon's commands are root (without capabilities),
// and the sockets that hand out the host (docker, containerd, systemd's
// private socket, the D-Bus system bus) are root's: a command must not
// reach one outside its grants, here a stream socket and a datagram
// socket in a 0700 directory of the test's. Below Landlock ABI 9 nothing
// governs connect(2) on a unix socket, so the trampoline's seccomp filter
// refuses socket(AF_UNIX, …) (and the same family spelled with the upper
// bits of the argument set), a datagram socketpair (sendto by path), and
// io_uring (which makes and connects sockets without socket(2)); the cost
// is that a socket in the workspace is refused too. From ABI 9 Landlock
// itself allows connect only beneath the workspace and TMPDIR. Stream
// and seqpacket socketpairs work in both, and so does an AF_INET socket.
// Mode none runs the same probes as the control.
func TestLandlockUnixSockets(t *testing.T) {
	abi := LandlockABI()
	if abi < 1 {
		t.Skip("this kernel has no Landlock")
	}
	e, ws := newExec(t, ModeLandlock)
	none, _ := newExec(t, ModeNone, func(c *Config) { c.WorkspaceRoot = ws })
	private := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	host, hostLog, mine := filepath.Join(private, "host.sock"), filepath.Join(private, "log.sock"), filepath.Join(ws, "mine.sock")
	listenUnix(t, "unix", host)
	listenUnix(t, "unixgram", hostLog)
	listenUnix(t, "unix", mine)

	ops := []string{"connect-unix:" + host, "sendto-unix:" + hostLog, "connect-unix:" + mine,
		"socketpair:stream", "socketpair:seqpacket", "socket-inet:", "socket-unix-high:", "io_uring:"}
	for op, r := range runProbes(t, none, ws, ops) {
		if r != "ok" {
			t.Fatalf("control (mode none): %s = %s; the probe cannot tell the sandbox's refusals apart", op, r)
		}
	}

	got := runProbes(t, e, ws, ops)
	refused := func(r string) bool { return r == "EPERM" || r == "EACCES" }
	for _, op := range []string{"connect-unix:" + host, "sendto-unix:" + hostLog} {
		if !refused(got[op]) {
			t.Errorf("landlock ABI %d: %s = %s; a command reached a unix socket outside its grants", abi, op, got[op])
		}
	}
	for _, op := range []string{"socketpair:stream", "socketpair:seqpacket", "socket-inet:"} {
		if got[op] != "ok" {
			t.Errorf("landlock ABI %d: %s = %s, want ok", abi, op, got[op])
		}
	}
	if got["io_uring:"] != "EPERM" {
		t.Errorf("landlock ABI %d: io_uring_setup = %s, want EPERM", abi, got["io_uring:"])
	}
	if abi < 9 {
		// The cost: no unix socket by path at all, the workspace's too.
		for _, op := range []string{"connect-unix:" + mine, "socket-unix-high:"} {
			if got[op] != "EPERM" {
				t.Errorf("landlock ABI %d: %s = %s, want EPERM (socket(AF_UNIX) refused)", abi, op, got[op])
			}
		}
	} else if got["connect-unix:"+mine] != "ok" {
		t.Errorf("landlock ABI %d: a socket in the workspace: %s, want ok", abi, got["connect-unix:"+mine])
	}
}

// TestLandlockWithoutWritableTMPDIR: landlock mode does not depend on the
// daemon's TMPDIR being writable (a pod's readOnlyRootFilesystem without
// a /tmp volume): where $TMPDIR is missing, a file, or inside the
// workspace (where the agent would see the other scopes' temporary
// directories), the private temporary directories go to the next of
// /tmp, /var/tmp and /dev/shm that takes them, the move is logged at warn,
// and commands get a TMPDIR of their own outside the workspace.
func TestLandlockWithoutWritableTMPDIR(t *testing.T) {
	if LandlockABI() < 1 {
		t.Skip("this kernel has no Landlock")
	}
	ws := workspace(t)
	inside := filepath.Join(ws, "tmp")
	if err := os.Mkdir(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, tmpdir string }{
		{"missing", filepath.Join(t.TempDir(), "missing")},
		{"a file", "/etc/passwd"},
		{"inside the workspace", inside},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TMPDIR", tc.tmpdir)
			var logs syncbuf.Buffer
			e, err := New(Config{Mode: ModeLandlock, WorkspaceRoot: ws, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatalf("landlock with TMPDIR=%s: %v", tc.tmpdir, err)
			}
			defer e.Close()
			res, err := e.Run(context.Background(), Request{Command: `echo x > "$TMPDIR/f" && cat "$TMPDIR/f" && printf %s "$TMPDIR"`})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("a command writing its TMPDIR: %v exit %d %q", err, res.ExitCode, res.Stderr)
			}
			tmp := strings.TrimPrefix(string(res.Stdout), "x\n")
			if tmp == "" || policy.Within(ws, tmp) || policy.Within(tc.tmpdir, tmp) {
				t.Errorf("TMPDIR %q; want a private directory outside the workspace and outside %s", tmp, tc.tmpdir)
			}
			if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, tc.tmpdir) {
				t.Errorf("the move of the temporary directories was not logged at warn naming %s:\n%s", tc.tmpdir, l)
			}
		})
	}
	if entries, err := os.ReadDir(inside); err != nil || len(entries) != 0 {
		t.Errorf("something was made in the workspace's tmp: %v %v", entries, err)
	}
}

// seccompVerdict runs prog as the kernel would on one system call of the
// architecture archID, number nr, with args, and returns the filter's
// action. The arguments are laid out as on a little-endian machine
// (amd64, arm64: an argument's low 32 bits first); each 32-bit word of
// struct seccomp_data is written big-endian because the BPF VM loads
// words big-endian where the kernel loads them in the machine's order.
func seccompVerdict(t *testing.T, prog []sandboxexec.Filter, archID, nr uint32, args ...uint64) uint32 {
	t.Helper()
	raw := make([]bpf.RawInstruction, len(prog))
	for i, f := range prog {
		raw[i] = bpf.RawInstruction{Op: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}
	}
	ins, all := bpf.Disassemble(raw)
	if !all {
		t.Fatal("the filter does not disassemble")
	}
	vm, err := bpf.NewVM(ins)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 64) // nr, arch, instruction_pointer, args[6]
	binary.BigEndian.PutUint32(data[0:], nr)
	binary.BigEndian.PutUint32(data[4:], archID)
	for i, a := range args {
		binary.BigEndian.PutUint32(data[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(data[20+8*i:], uint32(a>>32))
	}
	v, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(v)
}

// TestTrampolineFilterVariants runs the trampoline's two filters, as
// assembled for this machine (the library assembles only the running
// architecture's numbers), on the calls an attacker would
// try for a unix socket: the variant for Landlock below ABI 9 refuses
// socket(AF_UNIX) (the family's upper bits set too) and datagram
// socketpairs and leaves AF_INET and stream or seqpacket socketpairs
// alone; the variant for ABI 9 refuses none of them (Landlock does). Both
// refuse io_uring, whose IORING_OP_SOCKET and IORING_OP_CONNECT no filter
// sees. Neither release architecture has socketcall(2), the i386
// multiplexer; a call through the i386 ABI kills the process, and on
// amd64 the x32 ABI's calls fail with ENOSYS.
func TestTrampolineFilterVariants(t *testing.T) {
	const (
		allow = uint32(unix.SECCOMP_RET_ALLOW)
		eperm = uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EPERM)
	)
	for _, a := range []string{"amd64", "arm64"} {
		info, err := arch.GetInfo(a)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := info.SyscallNames["socketcall"]; ok {
			t.Errorf("%s has socketcall: the socket rules must judge it too", a)
		}
	}
	{
		a := runtime.GOARCH
		info, err := arch.GetInfo(a)
		if err != nil {
			t.Skipf("no seccomp tables for %s: %v", a, err)
		}
		nr := func(name string) uint32 {
			n, ok := info.SyscallNames[name]
			if !ok {
				t.Fatalf("%s has no %s", a, name)
			}
			return uint32(n)
		}
		for _, noUnix := range []bool{true, false} {
			prog, err := filterForArch(a, filterOpts{blockClone3: true, noUnixSockets: noUnix})
			if err != nil {
				t.Fatal(err)
			}
			unixWant := allow
			if noUnix {
				unixWant = eperm
			}
			for _, c := range []struct {
				name string
				call string
				args []uint64
				want uint32
			}{
				{"socket(AF_UNIX)", "socket", []uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC}, unixWant},
				{"socket(AF_UNIX, SOCK_DGRAM)", "socket", []uint64{unix.AF_UNIX, unix.SOCK_DGRAM}, unixWant},
				{"socket(AF_UNIX | 1<<32)", "socket", []uint64{unix.AF_UNIX | 1<<32, unix.SOCK_STREAM}, unixWant},
				{"socket(AF_INET)", "socket", []uint64{unix.AF_INET, unix.SOCK_STREAM}, allow},
				{"socket(AF_INET6)", "socket", []uint64{unix.AF_INET6, unix.SOCK_DGRAM}, allow},
				{"socketpair(SOCK_STREAM)", "socketpair", []uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC}, allow},
				{"socketpair(SOCK_SEQPACKET)", "socketpair", []uint64{unix.AF_UNIX, unix.SOCK_SEQPACKET | unix.SOCK_NONBLOCK}, allow},
				{"socketpair(SOCK_DGRAM)", "socketpair", []uint64{unix.AF_UNIX, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC}, unixWant},
				{"connect", "connect", []uint64{3}, allow},
				{"io_uring_setup", "io_uring_setup", []uint64{1}, eperm},
				{"io_uring_enter", "io_uring_enter", []uint64{3}, eperm},
				{"io_uring_register", "io_uring_register", []uint64{3}, eperm},
			} {
				if got := seccompVerdict(t, prog, uint32(info.ID), nr(c.call), c.args...); got != c.want {
					t.Errorf("%s, no unix sockets %v: %s = %#x, want %#x", a, noUnix, c.name, got, c.want)
				}
			}
			if got := seccompVerdict(t, prog, uint32(arch.I386.ID), 359, unix.AF_UNIX); got != uint32(unix.SECCOMP_RET_KILL_PROCESS) {
				t.Errorf("%s: a call through the i386 ABI = %#x, want the process killed", a, got)
			}
			if a == "amd64" {
				x32 := nr("socket") | uint32(arch.X32.SeccompMask)
				if got := seccompVerdict(t, prog, uint32(info.ID), x32, unix.AF_UNIX); got != uint32(unix.SECCOMP_RET_ERRNO)|uint32(unix.ENOSYS) {
					t.Errorf("amd64: socket through the x32 ABI = %#x, want ENOSYS", got)
				}
			}
		}
	}
}

// TestLandlockResolveUnixGrants: from Landlock ABI 9 the domain handles
// LANDLOCK_ACCESS_FS_RESOLVE_UNIX (and ABI 8 does not), and of the fixed
// grants only the WritablePaths carry it (the boundary and its TMPDIR get
// llAll, which has it): not the system directories, /etc, /proc, the
// device nodes or the ReadOnlyPaths, where the host's sockets are.
func TestLandlockResolveUnixGrants(t *testing.T) {
	if LandlockABI() < 1 {
		t.Skip("this kernel has no Landlock")
	}
	if landlockHandledFS[landlockResolveUnixABI]&unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX == 0 ||
		landlockHandledFS[landlockResolveUnixABI-1]&unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX != 0 {
		t.Fatalf("the handled rights of ABI %d and %d disagree with landlockResolveUnixABI", landlockResolveUnixABI-1, landlockResolveUnixABI)
	}
	if llAll&unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX == 0 {
		t.Fatal("llAll (the boundary's and TMPDIR's grant) lacks RESOLVE_UNIX")
	}
	ro, rw := t.TempDir(), t.TempDir()
	e, _ := newExec(t, ModeLandlock, func(c *Config) { c.ReadOnlyPaths, c.WritablePaths = []string{ro}, []string{rw} })
	l := e.(*executor).iso.(*landlockIsolation)
	seen := false
	for _, r := range l.rules {
		has := r.access&unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX != 0
		if r.f.Name() == rw {
			seen = true
			if !has {
				t.Errorf("the writable path %s lacks RESOLVE_UNIX", rw)
			}
		} else if has {
			t.Errorf("the grant of %s has RESOLVE_UNIX: from ABI 9 a command could connect to the sockets there", r.f.Name())
		}
	}
	if !seen {
		t.Fatalf("no grant for the writable path %s", rw)
	}
}

// TestLandlockUnixVariantFollowsABI: the filter a landlock executor hands
// its commands follows the ABI it was built for (landlockABI, which the
// test lowers to 5): the variant without unix sockets, said in Reason and
// Gaps, with the signals ABI 5 does not scope; the real ABI's executor,
// built after it, gets its own variant, not the first one's.
func TestLandlockUnixVariantFollowsABI(t *testing.T) {
	abi := LandlockABI()
	if abi < 5 {
		t.Skipf("this kernel's Landlock ABI is %d; the test simulates 5", abi)
	}
	saved := landlockABI
	landlockABI = func() int { return 5 }
	e5, _ := newExec(t, ModeLandlock)
	landlockABI = saved
	e, _ := newExec(t, ModeLandlock)

	noUnix, err := filterMemfd(true)
	if err != nil {
		t.Fatal(err)
	}
	withUnix, err := filterMemfd(false)
	if err != nil {
		t.Fatal(err)
	}
	if got := e5.(*executor).iso.(*landlockIsolation).filter; got != noUnix {
		t.Errorf("ABI 5: the filter is %v, want the variant without unix sockets", got.Name())
	}
	if !strings.Contains(e5.Reason(), "unix sockets refused by seccomp (Landlock ABI 5") {
		t.Errorf("ABI 5: Reason does not say unix sockets are refused: %s", e5.Reason())
	}
	gaps := strings.Join(e5.Gaps(), "\n")
	for _, w := range []string{"unix sockets: refused", "signals:", "chmod"} {
		if !strings.Contains(gaps, w) {
			t.Errorf("ABI 5: Gaps lack %q: %q", w, e5.Gaps())
		}
	}
	want := withUnix
	if abi < landlockResolveUnixABI {
		want = noUnix
	}
	if got := e.(*executor).iso.(*landlockIsolation).filter; got != want {
		t.Errorf("ABI %d: the filter is the other variant", abi)
	}
	if abi >= 6 && strings.Contains(strings.Join(e.Gaps(), "\n"), "signals:") {
		t.Errorf("ABI %d scopes signals, yet Gaps say it does not: %q", abi, e.Gaps())
	}
}

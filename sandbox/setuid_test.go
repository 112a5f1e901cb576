//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestSetuidFilesRefused: a command of a filtered mode (landlock,
// software, and bwrap, which mounts the workspace nosuid inside its
// sandbox but not where the host's users run it) cannot leave a setuid or
// setgid file in the workspace for the host's users, neither by chmod nor
// by making the file with the bit: mknod of a regular file, open or
// openat with O_CREAT or O_TMPFILE, creat, and openat2 and io_uring,
// whose modes the filter cannot read (ENOSYS for openat2, as for clone3;
// EPERM for io_uring). A file created 0755 and an open without
// O_CREAT, whatever its mode argument, still work. Mode none runs the same
// probes as the control: each would leave such a file there.
func TestSetuidFilesRefused(t *testing.T) {
	ops := func(dir string) []string {
		return []string{
			"mknod-setuid:" + filepath.Join(dir, "mknod"),
			"open-setuid:" + filepath.Join(dir, "open"),
			"open-setgid:" + filepath.Join(dir, "opengid"),
			"open-tmpfile-setuid:" + dir,
			"creat-setuid:" + filepath.Join(dir, "creat"),
			"openat2-setuid:" + filepath.Join(dir, "openat2"),
			"open-plain:" + filepath.Join(dir, "plain"),
			"setuid:" + filepath.Join(dir, "plain"),
			// io_uring's IORING_OP_OPENAT would create a file with a mode
			// no rule sees: refused outright.
			"io_uring:",
		}
	}
	setuidFiles := func(dir string) []string {
		var found []string
		ents, _ := os.ReadDir(dir)
		for _, de := range ents {
			if fi, err := os.Lstat(filepath.Join(dir, de.Name())); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
				found = append(found, de.Name())
			}
		}
		return found
	}

	none, ws := newExec(t, ModeNone)
	ctlDir := filepath.Join(ws, "control")
	if err := os.Mkdir(ctlDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for op, r := range runProbes(t, none, ws, ops(ctlDir)) {
		if r != "ok" {
			t.Fatalf("control (mode none): %s = %s; the probe cannot tell the filter's refusals apart", op, r)
		}
	}
	if got := setuidFiles(ctlDir); len(got) != 6 {
		t.Fatalf("control (mode none) left setuid or setgid files %v, want the 6 named ones (the O_TMPFILE one has no name)", got)
	}

	var runAs string
	if os.Geteuid() == 0 {
		runAs = throwawayUser(t, "agsu")
	}
	for _, tc := range []struct {
		mode  Mode
		runAs bool
	}{{ModeLandlock, false}, {ModeSoftware, false}, {ModeBwrap, false}, {ModeLandlock, true}, {ModeSoftware, true}, {ModeBwrap, true}} {
		mode := tc.mode
		name := string(mode)
		if tc.runAs {
			name += "/run-as"
		}
		t.Run(name, func(t *testing.T) {
			if mode == ModeLandlock && LandlockABI() < 1 {
				t.Skip("no Landlock on this kernel")
			}
			if tc.runAs && runAs == "" {
				t.Skip("--run-as needs a root daemon; this test runs as another user")
			}
			var e Executor
			var ws string
			if tc.runAs {
				// A workspace the run-as user reaches and writes.
				ws = testenv.SharedTempDir(t)
				if err := os.Chmod(ws, 0o777); err != nil {
					t.Fatal(err)
				}
				e, _ = newExec(t, mode, func(c *Config) { c.WorkspaceRoot, c.RunAs = ws, runAs })
			} else {
				e, ws = newExec(t, mode)
			}
			dir := filepath.Join(ws, "d")
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777); err != nil { // whatever the umask
				t.Fatal(err)
			}
			got := runProbes(t, e, ws, ops(dir))
			want := map[string]string{"openat2-setuid:" + filepath.Join(dir, "openat2"): "ENOSYS", "open-plain:" + filepath.Join(dir, "plain"): "ok"}
			for _, op := range ops(dir) {
				w, ok := want[op]
				if !ok {
					w = "EPERM"
				}
				if got[op] != w {
					t.Errorf("%s: %s = %s, want %s", mode, op, got[op], w)
				}
			}
			if found := setuidFiles(dir); len(found) != 0 {
				t.Errorf("%s: a command left setuid or setgid files in the workspace: %v", mode, found)
			}
		})
	}
}

// TestSetuidRulesInEveryFilter runs every variant of the filter (the
// software mode's spawner, the trampoline's two, bwrap's) in a BPF
// interpreter on the ways to a setuid or setgid file, with the argument's
// upper 32 bits set too, and on the calls a build makes all day that look
// like them. bwrap's variant holds nothing else: ptrace, unshare and
// mount stay bwrap's namespaces' to contain.
func TestSetuidRulesInEveryFilter(t *testing.T) {
	const (
		allow = uint32(unix.SECCOMP_RET_ALLOW)
		eperm = uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EPERM)
		nosys = uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.ENOSYS)
		suid  = unix.S_ISUID | 0o755
		sgid  = unix.S_ISGID | 0o755
	)
	info, err := arch.GetInfo(runtime.GOARCH)
	if err != nil {
		t.Skipf("no seccomp tables for %s: %v", runtime.GOARCH, err)
	}
	variants := map[string]filterOpts{
		"spawner": {}, "trampoline": {blockClone3: true}, "trampoline without unix sockets": {blockClone3: true, noUnixSockets: true},
		"bwrap": {setuidOnly: true},
	}
	fdcwd := int32(unix.AT_FDCWD)
	at := uint64(uint32(fdcwd))
	for name, o := range variants {
		prog, err := filterFor(o)
		if err != nil {
			t.Fatal(err)
		}
		type call struct {
			what string
			nr   string
			args []uint64
			want uint32
		}
		calls := []call{
			{"chmod 4755", "fchmodat", []uint64{at, 0, suid}, eperm},
			{"chmod 2755, upper bits set", "fchmodat", []uint64{at, 0, sgid | 1<<40}, eperm},
			{"fchmod 4755", "fchmod", []uint64{3, suid}, eperm},
			{"fchmodat2 4755", "fchmodat2", []uint64{at, 0, suid, 0}, eperm},
			{"mknodat S_IFREG|4755", "mknodat", []uint64{at, 0, unix.S_IFREG | suid, 0}, eperm},
			{"openat O_CREAT 4755", "openat", []uint64{at, 0, unix.O_CREAT | unix.O_WRONLY, suid}, eperm},
			{"openat O_CREAT 2755", "openat", []uint64{at, 0, unix.O_CREAT | unix.O_WRONLY | unix.O_CLOEXEC, sgid}, eperm},
			{"openat O_TMPFILE 4755", "openat", []uint64{at, 0, unix.O_TMPFILE | unix.O_WRONLY, suid}, eperm},
			{"openat2", "openat2", []uint64{at, 0, 0, 24}, nosys},
			{"io_uring_setup (IORING_OP_OPENAT takes a mode)", "io_uring_setup", []uint64{1, 0}, eperm},
			{"io_uring_enter", "io_uring_enter", []uint64{3, 1, 0, 0}, eperm},
			{"chmod 755", "fchmodat", []uint64{at, 0, 0o755}, allow},
			{"chmod 1777 (sticky)", "fchmodat", []uint64{at, 0, unix.S_ISVTX | 0o777}, allow},
			{"mknodat FIFO", "mknodat", []uint64{at, 0, unix.S_IFIFO | 0o644, 0}, allow},
			{"openat O_CREAT 755", "openat", []uint64{at, 0, unix.O_CREAT | unix.O_WRONLY, 0o755}, allow},
			{"openat without O_CREAT, mode 4755", "openat", []uint64{at, 0, unix.O_RDONLY, suid}, allow},
			{"openat O_DIRECTORY, mode 4755", "openat", []uint64{at, 0, unix.O_RDONLY | unix.O_DIRECTORY, suid}, allow},
		}
		if _, ok := info.SyscallNames["creat"]; ok {
			calls = append(calls, call{"creat 4755", "creat", []uint64{0, suid}, eperm}, call{"open O_CREAT 4755", "open", []uint64{0, unix.O_CREAT, suid}, eperm},
				call{"open without O_CREAT, mode 4755", "open", []uint64{0, unix.O_RDONLY, suid}, allow})
		}
		if o.setuidOnly {
			calls = append(calls, call{"ptrace", "ptrace", []uint64{unix.PTRACE_ATTACH, 1}, allow}, call{"unshare", "unshare", []uint64{unix.CLONE_NEWUSER}, allow},
				call{"clone3", "clone3", []uint64{0, 88}, allow})
		} else {
			calls = append(calls, call{"ptrace", "ptrace", []uint64{unix.PTRACE_ATTACH, 1}, eperm})
		}
		for _, c := range calls {
			nr, ok := info.SyscallNames[c.nr]
			if !ok {
				t.Fatalf("%s has no %s", runtime.GOARCH, c.nr)
			}
			if got := seccompVerdict(t, prog, uint32(info.ID), uint32(nr), c.args...); got != c.want {
				t.Errorf("%s filter: %s = %#x, want %#x", name, c.what, got, c.want)
			}
		}
		if got := seccompVerdict(t, prog, uint32(arch.I386.ID), 15, 0, suid); got != uint32(unix.SECCOMP_RET_KILL_PROCESS) {
			t.Errorf("%s filter: chmod through the i386 ABI = %#x, want the process killed", name, got)
		}
	}
}

//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"sync"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"
)

// deniedSyscalls fail with EPERM for every command of the software and
// landlock modes: the container runtimes' usual deny list (Docker's default
// profile refuses these to an unprivileged container), minus what ordinary
// build and test tools use. A name the running architecture does not have
// is skipped (see filterFor).
var deniedSyscalls = []string{
	// Reaching into other processes: the daemon's memory and descriptors.
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "process_madvise",
	// Namespaces and mounts (unshare, setns, the new mount API).
	"unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "mount_setattr",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
	// The kernel's keyring, BPF, perf, modules, kexec, reboot, swap, accounting.
	"keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog",
	// The clock, raw I/O ports, file handles (which bypass path checks).
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "iopl", "ioperm",
	"open_by_handle_at", "name_to_handle_at", "lookup_dcookie", "uselib", "fanotify_init",
	"nfsservctl", "vm86", "vm86old",
}

// Namespace flags a clone(2) may not carry: clone is how fork works, so
// only these bits are judged.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// Terminal ioctls that push input into, or take over, a terminal the
// command shares: the TIOCSTI injection, and TIOCLINUX's console selection.
const (
	ioctlTIOCSTI   = 0x5412
	ioctlTIOCLINUX = 0x541C
)

// policy is the deny list as the seccomp library's policy. blockClone3
// also makes clone3 fail with ENOSYS, as container runtimes do: its flags
// are in memory a filter cannot read, and libc falls back to clone, whose
// flags it can. The executor's spawning thread itself needs clone3 (Go
// places a child in its cgroup with CLONE_INTO_CGROUP), so a filter
// installed there leaves it out; the trampoline's own filter has it.
func policy(names []string, has func(string) bool, blockClone3 bool) seccomp.Policy {
	eperm := seccomp.ActionErrno | seccomp.Action(unix.EPERM)
	var conds []seccomp.NameWithConditions
	for _, c := range []seccomp.NameWithConditions{
		{Name: "clone", Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.BitsSet, Value: namespaceFlags}}},
		// Device nodes (S_IFCHR, and S_IFBLK which contains its bit);
		// FIFOs, sockets and regular files stay allowed.
		{Name: "mknod", Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.BitsSet, Value: unix.S_IFCHR}}},
		{Name: "mknodat", Conditions: []seccomp.Condition{{Argument: 2, Operation: seccomp.BitsSet, Value: unix.S_IFCHR}}},
		// Setuid and setgid bits: a command (root without capabilities
		// under landlock, when the daemon is root without --run-as) must
		// not make a root-owned program setuid for the host's users.
		{Name: "chmod", Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.BitsSet, Value: unix.S_ISUID | unix.S_ISGID}}},
		{Name: "fchmod", Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.BitsSet, Value: unix.S_ISUID | unix.S_ISGID}}},
		{Name: "fchmodat", Conditions: []seccomp.Condition{{Argument: 2, Operation: seccomp.BitsSet, Value: unix.S_ISUID | unix.S_ISGID}}},
		{Name: "fchmodat2", Conditions: []seccomp.Condition{{Argument: 2, Operation: seccomp.BitsSet, Value: unix.S_ISUID | unix.S_ISGID}}},
		// The kernel reads an ioctl's request as 32 bits: a value
		// with any of the upper 32 set is the same request to it, so
		// it is refused outright (no real request has them).
		{Name: "ioctl", Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.GreaterThan, Value: 0xFFFFFFFF}}},
		{Name: "ioctl", Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.Equal, Value: ioctlTIOCSTI}}},
		{Name: "ioctl", Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.Equal, Value: ioctlTIOCLINUX}}},
	} {
		if has(c.Name) { // mknod is only mknodat on arm64
			conds = append(conds, c)
		}
	}
	groups := []seccomp.SyscallGroup{{Names: names, Action: eperm}, {NamesWithCondtions: conds, Action: eperm}}
	if blockClone3 {
		groups = append(groups, seccomp.SyscallGroup{Names: []string{"clone3"}, Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)})
	}
	return seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: groups}
}

// filterFor assembles the filter for this machine's architecture. The
// library jumps to the default action (allow) for a foreign architecture,
// which on x86-64 would let a command make the same calls through the
// 32-bit ABI (int 0x80); so the filter starts with its own check that
// kills a process calling through any other.
func filterFor(blockClone3 bool) ([]sandboxexec.Filter, error) {
	return filterForArch("", blockClone3)
}

// filterForArch is filterFor for the named architecture ("" for this
// machine's; the tests assemble the others').
func filterForArch(name string, blockClone3 bool) ([]sandboxexec.Filter, error) {
	info, err := arch.GetInfo(name)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(deniedSyscalls))
	for _, n := range deniedSyscalls {
		if _, ok := info.SyscallNames[n]; ok {
			names = append(names, n)
		}
	}
	p := policy(names, func(n string) bool { _, ok := info.SyscallNames[n]; return ok }, blockClone3)
	body, err := p.Assemble()
	if err != nil {
		return nil, err
	}
	const archOffset = 4 // seccomp_data.arch
	prog := append([]bpf.Instruction{
		bpf.LoadAbsolute{Off: archOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionKillProcess)},
	}, body...)
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, err
	}
	out := make([]sandboxexec.Filter, len(raw))
	for i, r := range raw {
		out[i] = sandboxexec.Filter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
}

var (
	spawnerFilter    = sync.OnceValues(func() ([]sandboxexec.Filter, error) { return filterFor(false) })
	trampolineFilter = sync.OnceValues(func() ([]sandboxexec.Filter, error) { return filterFor(true) })
)

// installSpawnerFilter installs the software mode's filter on the calling
// thread (the spawner's).
func installSpawnerFilter() error {
	prog, err := spawnerFilter()
	if err != nil {
		return fmt.Errorf("seccomp filter: %w", err)
	}
	return sandboxexec.InstallSeccomp(prog)
}

// filterMemfd is the trampoline's filter in a sealed memfd, made once:
// every landlock command gets it as sandboxexec.FilterFD.
var filterMemfd = sync.OnceValues(func() (*os.File, error) {
	prog, err := trampolineFilter()
	if err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate("agentbe-seccomp", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "agentbe-seccomp")
	if _, err := f.Write(sandboxexec.EncodeFilter(prog)); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, fmt.Errorf("sealing the memfd: %w", err)
	}
	return f, nil
})

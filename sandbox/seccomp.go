//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"slices"
	"strings"
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
	// io_uring: its operations (IORING_OP_SOCKET, IORING_OP_CONNECT,
	// IORING_OP_OPENAT, ...) are not system calls, so no rule of this
	// filter would see them; Docker's default profile refuses it too.
	"io_uring_setup", "io_uring_enter", "io_uring_register",
}

// Namespace flags a clone(2) may not carry: clone is how fork works, so
// only these bits are judged.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// openCreates are the open(2) flags that make a file, whose mode then
// applies: O_CREAT, and O_TMPFILE's own bit (O_TMPFILE also holds
// O_DIRECTORY, which a plain open of a directory has).
const openCreates = unix.O_CREAT | (unix.O_TMPFILE &^ unix.O_DIRECTORY)

// Terminal ioctls that push input into, or take over, a terminal the
// command shares: the TIOCSTI injection, and TIOCLINUX's console selection.
const (
	ioctlTIOCSTI   = 0x5412
	ioctlTIOCLINUX = 0x541C
)

// setuidRules refuse (EPERM) a setuid or setgid bit on a file: a command
// (root without capabilities under landlock or bwrap, when the daemon is
// root without --run-as) must not leave a root-owned program setuid for
// the host's users, who run the workspace's files without nosuid.
var setuidRules = []seccomp.NameWithConditions{
	{Name: "chmod", Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.BitsSet, Value: unix.S_ISUID | unix.S_ISGID}}},
	{Name: "fchmod", Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.BitsSet, Value: unix.S_ISUID | unix.S_ISGID}}},
	{Name: "fchmodat", Conditions: []seccomp.Condition{{Argument: 2, Operation: seccomp.BitsSet, Value: unix.S_ISUID | unix.S_ISGID}}},
	{Name: "fchmodat2", Conditions: []seccomp.Condition{{Argument: 2, Operation: seccomp.BitsSet, Value: unix.S_ISUID | unix.S_ISGID}}},
	// A file made with the bit: the mode of a regular file's mknod, and
	// of an open that creates (O_CREAT, or O_TMPFILE and a later
	// linkat). An open without those flags may hold anything in its
	// mode argument: the kernel ignores it. openat2's mode is in
	// memory, so openat2 fails with ENOSYS (denyPolicy).
	{Name: "mknod", Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.BitsSet, Value: unix.S_ISUID | unix.S_ISGID}}},
	{Name: "mknodat", Conditions: []seccomp.Condition{{Argument: 2, Operation: seccomp.BitsSet, Value: unix.S_ISUID | unix.S_ISGID}}},
	{Name: "creat", Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.BitsSet, Value: unix.S_ISUID | unix.S_ISGID}}},
	{Name: "open", Conditions: []seccomp.Condition{
		{Argument: 1, Operation: seccomp.BitsSet, Value: openCreates},
		{Argument: 2, Operation: seccomp.BitsSet, Value: unix.S_ISUID | unix.S_ISGID}}},
	{Name: "openat", Conditions: []seccomp.Condition{
		{Argument: 2, Operation: seccomp.BitsSet, Value: openCreates},
		{Argument: 3, Operation: seccomp.BitsSet, Value: unix.S_ISUID | unix.S_ISGID}}},
}

// otherProcessRules refuse (EPERM) a change to the limits or the
// scheduling of any process but the caller's own (pid 0): prlimit64,
// setpriority, ioprio_set and the sched_set* calls, which the kernel
// allows on every process of the caller's uid and no Landlock rule sees.
// Under --run-as every scope's commands share one uid, and without it a
// root daemon's commands share the daemon's: a lower RLIMIT_CPU or
// RLIMIT_NOFILE would kill or starve another scope's command or the daemon
// itself, and SCHED_IDLE, nice 19 or one CPU would slow it. The caller's
// own stay (ulimit, nice, ionice, taskset and chrt on the program they
// start use pid 0); a thread's own id (pthread_setaffinity_np,
// pthread_setschedparam) is refused with the rest. setpriority and
// ioprio_set by user (every process of the uid) are refused too, and a
// `which` with any of its upper 32 bits set, which the kernel reads as an
// int.
var otherProcessRules = func() []seccomp.NameWithConditions {
	notSelf := func(name string, arg uint32) seccomp.NameWithConditions {
		return seccomp.NameWithConditions{Name: name, Conditions: []seccomp.Condition{{Argument: arg, Operation: seccomp.NotEqual, Value: 0}}}
	}
	whichIs := func(name string, v uint64) seccomp.NameWithConditions {
		return seccomp.NameWithConditions{Name: name, Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.Equal, Value: v}}}
	}
	wide := func(name string) seccomp.NameWithConditions {
		return seccomp.NameWithConditions{Name: name, Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.GreaterThan, Value: 0xFFFFFFFF}}}
	}
	const ioprioWhoUser = 3 // IOPRIO_WHO_USER
	return []seccomp.NameWithConditions{
		notSelf("prlimit64", 0),
		notSelf("setpriority", 1), whichIs("setpriority", unix.PRIO_USER), wide("setpriority"),
		notSelf("ioprio_set", 1), whichIs("ioprio_set", ioprioWhoUser), wide("ioprio_set"),
		notSelf("sched_setaffinity", 0), notSelf("sched_setscheduler", 0),
		notSelf("sched_setparam", 0), notSelf("sched_setattr", 0),
	}
}()

// filterOpts are what the variants of the filter differ in.
type filterOpts struct {
	// blockClone3 makes clone3 fail with ENOSYS, as container runtimes
	// do: its flags are in memory a filter cannot read, and libc falls
	// back to clone, whose flags it can. The executor's spawning thread
	// itself needs clone3 (Go places a child in its cgroup with
	// CLONE_INTO_CGROUP), so a filter installed there leaves it out; the
	// trampoline's own filter has it.
	blockClone3 bool
	// noUnixSockets refuses the unix sockets a command could reach
	// another process by path with (the trampoline's, below Landlock ABI
	// 9, which has no rule for connect(2) on them: see unixBySeccomp):
	// socket(AF_UNIX, …), also spelled with the argument's upper 32 bits
	// set (the kernel reads an int), and a socketpair of datagram
	// sockets, whose end can sendto(2) any named socket. Stream and
	// seqpacket socketpairs stay: they reach only each other.
	noUnixSockets bool
	// setuidOnly is bwrap's filter (bwrap's --seccomp): setuidRules,
	// openat2 and io_uring only. bwrap's namespaces already hold what the deny list
	// holds elsewhere (ptrace, mounts and namespaces reach only the
	// sandbox's own), and tools such as strace, gdb or a nested
	// sandbox keep working inside it; but bwrap mounts the workspace
	// nosuid inside its sandbox only, not where the host's users run it.
	setuidOnly bool
}

// denyPolicy is the deny list, with the variant's rules, as the seccomp
// library's policy.
func denyPolicy(names []string, has func(string) bool, o filterOpts) seccomp.Policy {
	eperm := seccomp.ActionErrno | seccomp.Action(unix.EPERM)
	rules := []seccomp.NameWithConditions{
		{Name: "clone", Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.BitsSet, Value: namespaceFlags}}},
		// Device nodes (S_IFCHR, and S_IFBLK which contains its bit);
		// FIFOs, sockets and regular files stay allowed.
		{Name: "mknod", Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.BitsSet, Value: unix.S_IFCHR}}},
		{Name: "mknodat", Conditions: []seccomp.Condition{{Argument: 2, Operation: seccomp.BitsSet, Value: unix.S_IFCHR}}},
		// The kernel reads an ioctl's request as 32 bits: a value
		// with any of the upper 32 set is the same request to it, so
		// it is refused outright (no real request has them).
		{Name: "ioctl", Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.GreaterThan, Value: 0xFFFFFFFF}}},
		{Name: "ioctl", Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.Equal, Value: ioctlTIOCSTI}}},
		{Name: "ioctl", Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.Equal, Value: ioctlTIOCLINUX}}},
	}
	rules = append(rules, setuidRules...)
	rules = append(rules, otherProcessRules...)
	if o.setuidOnly {
		// io_uring stays refused: its IORING_OP_OPENAT creates a file
		// with a mode no rule here would see.
		names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !strings.HasPrefix(n, "io_uring_") })
		rules = setuidRules
	}
	if o.noUnixSockets {
		rules = append(rules,
			seccomp.NameWithConditions{Name: "socket", Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.Equal, Value: unix.AF_UNIX}}},
			seccomp.NameWithConditions{Name: "socket", Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.GreaterThan, Value: 0xFFFFFFFF}}},
			// SOCK_DGRAM's bit: SOCK_STREAM (1) and SOCK_SEQPACKET (5)
			// lack it; the flags (SOCK_CLOEXEC, SOCK_NONBLOCK) are higher.
			seccomp.NameWithConditions{Name: "socketpair", Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.BitsSet, Value: unix.SOCK_DGRAM}}},
		)
	}
	var conds []seccomp.NameWithConditions
	for _, c := range rules {
		if has(c.Name) { // mknod is only mknodat on arm64
			conds = append(conds, c)
		}
	}
	var groups []seccomp.SyscallGroup
	if len(names) > 0 {
		groups = append(groups, seccomp.SyscallGroup{Names: names, Action: eperm})
	}
	groups = append(groups, seccomp.SyscallGroup{NamesWithCondtions: conds, Action: eperm})
	// ENOSYS for the calls whose arguments are in memory a filter cannot
	// read, which callers take for an older kernel and fall back from:
	// openat2 (its mode, and so a setuid file, is in struct open_how;
	// libc's open and Go's never use it), and clone3 where blockClone3.
	var nosys []string
	if has("openat2") {
		nosys = append(nosys, "openat2")
	}
	if o.blockClone3 {
		nosys = append(nosys, "clone3")
	}
	if len(nosys) > 0 {
		groups = append(groups, seccomp.SyscallGroup{Names: nosys, Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)})
	}
	return seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: groups}
}

// filterFor assembles the filter for this machine's architecture. The
// library jumps to the default action (allow) for a foreign architecture,
// which on x86-64 would let a command make the same calls through the
// 32-bit ABI (int 0x80); so the filter starts with its own check that
// kills a process calling through any other: on x86-64, the i386 ABI,
// whose socketcall(2) would reach socket(2) behind a multiplexer no rule
// here reads. (The library itself refuses the x32 ABI's calls, which share
// x86-64's architecture value, with ENOSYS; x86-64 and arm64 have no
// socketcall of their own.)
func filterFor(o filterOpts) ([]sandboxexec.Filter, error) {
	return filterForArch("", o)
}

// filterForArch is filterFor for the named architecture ("" for this
// machine's). The tests name the others' to see that the lists resolve
// against their system calls; the library assembles the numbers of the
// architecture it runs on, so only this machine's filter is a real one.
func filterForArch(name string, o filterOpts) ([]sandboxexec.Filter, error) {
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
	p := denyPolicy(names, func(n string) bool { _, ok := info.SyscallNames[n]; return ok }, o)
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

// The filters are assembled once each: the spawner's, and the
// trampoline's two variants, with and without the unix socket rules
// (filterMemfd's argument, from the Landlock ABI of the executor asking).
var (
	spawnerFilter     = sync.OnceValues(func() ([]sandboxexec.Filter, error) { return filterFor(filterOpts{}) })
	trampolineFilters = map[bool]func() ([]sandboxexec.Filter, error){
		false: sync.OnceValues(func() ([]sandboxexec.Filter, error) { return filterFor(filterOpts{blockClone3: true}) }),
		true: sync.OnceValues(func() ([]sandboxexec.Filter, error) {
			return filterFor(filterOpts{blockClone3: true, noUnixSockets: true})
		}),
	}
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

// filterMemfd is the trampoline's filter in a sealed memfd, the variant
// without unix sockets when noUnixSockets, each made once: every landlock
// command gets one as sandboxexec.FilterFD.
func filterMemfd(noUnixSockets bool) (*os.File, error) { return filterMemfds[noUnixSockets]() }

var filterMemfds = map[bool]func() (*os.File, error){
	false: sync.OnceValues(func() (*os.File, error) { return sealedFilter(false) }),
	true:  sync.OnceValues(func() (*os.File, error) { return sealedFilter(true) }),
}

// bwrapFilterMemfd is bwrap's filter (filterOpts.setuidOnly) in a sealed
// memfd, made once; bwrap reads it from a descriptor of its own
// (bwrapIsolation.command opens it again for each command: bwrap reads
// from the file offset, which a shared descriptor would have moved).
var bwrapFilterMemfd = sync.OnceValues(func() (*os.File, error) {
	prog, err := filterFor(filterOpts{setuidOnly: true})
	if err != nil {
		return nil, err
	}
	return sealProgram(prog)
})

func sealedFilter(noUnixSockets bool) (*os.File, error) {
	prog, err := trampolineFilters[noUnixSockets]()
	if err != nil {
		return nil, err
	}
	return sealProgram(prog)
}

// sealProgram writes prog, as the kernel's struct sock_filter array, to a
// memfd and seals it.
func sealProgram(prog []sandboxexec.Filter) (*os.File, error) {
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
}

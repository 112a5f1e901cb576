package policy

import (
	"strings"
	"sync"
)

// The table of programs. Every simple command, once the checks every
// command gets are done (simple: the program name, allow patterns, paths,
// functions), is judged by the rule of its program's base name, if it has
// one, and then by the files it writes. A program's rule is one entry
// below; a new program is a new entry, never a branch elsewhere.

// call is one simple command as a program's rule sees it: its words with
// their static values, what surrounds it, its redirections (nil for a
// command another program runs: find -exec, git bisect run) and the
// program's base name.
type call struct {
	args
	x    surroundings
	sio  *stmtIO
	base string
}

// rule is what the policy knows of one program.
type rule struct {
	// judge judges a call (nil: nothing beyond the files it writes). It
	// returns a refusal, or nil to let the judgement go on.
	judge func(c *checker, k call) error
	// final: what judge accepts is judged completely (the command a
	// wrapper runs, a shell's script, ...): writes is not looked at.
	final bool
	// writes judges the files the program writes, named by its arguments
	// (nil: none the policy follows).
	writes func(c *checker, k call) error
}

// programs is the table: each program's base name and its rule; ruleFor
// also finds the names that rules cover by pattern (mkfs.*, fsck.*,
// versioned interpreters). It is built once, at the first judgement, so
// that a program which links the policy and judges nothing (the landlock
// trampoline) does not build it; init sets it because the rules judge the
// commands they run through simple, which reads the table.
var programs func() map[string]rule

func init() { programs = sync.OnceValue(programTable) }

// ruleFor is the rule of the program base, if it has one.
func ruleFor(base string) (rule, bool) {
	t := programs()
	if r, ok := t[base]; ok {
		return r, true
	}
	switch {
	case strings.HasPrefix(base, "mkfs."), strings.HasPrefix(base, "fsck."):
		return t["mkfs"], true
	case langInterpreters[unversioned(base)]:
		return t[unversioned(base)], true
	}
	return rule{}, false
}

// Programs refused whatever their arguments, by category.
var (
	privilegeTools = []string{"sudo", "su", "doas", "pkexec", "runuser", "setpriv", "capsh", "nsenter",
		"chroot", "machinectl", "sg", "newgrp", "ksu", "run0", "calife", "runcon", "login"}
	// diskTools are refused, and so are mkfs.* and fsck.*; mount only
	// when it does more than list the mounts.
	diskTools = []string{"mkfs", "mke2fs", "mkswap", "fdisk", "sfdisk", "cfdisk", "parted", "gdisk",
		"sgdisk", "wipefs", "umount", "losetup", "swapon", "swapoff", "fsck", "e2fsck",
		"blkdiscard", "cryptsetup", "hdparm", "debugfs", "tune2fs", "resize2fs", "pvcreate",
		"vgcreate", "lvcreate", "lvremove", "vgremove", "mdadm", "dmsetup", "zpool", "partprobe"}
	systemTools = []string{"shutdown", "reboot", "halt", "poweroff", "telinit", "killall", "killall5",
		"pkill", "insmod", "rmmod", "modprobe", "kexec", "systemd-run", "useradd", "userdel",
		"usermod", "groupadd", "groupdel", "groupmod", "passwd", "chpasswd", "visudo", "adduser",
		"deluser", "vipw", "update-rc.d", "launchctl", "at", "batch"}
	remoteTools = []string{"nc", "ncat", "netcat", "socat", "telnet", "ftp", "sftp", "ssh", "scp",
		"tftp", "rsh", "rlogin", "rcp"}
	firewallTools = []string{"iptables", "ip6tables", "iptables-restore", "ip6tables-restore",
		"iptables-legacy", "iptables-nft", "nft", "ufw", "firewall-cmd", "ebtables", "arptables",
		"ipset", "ifdown", "ifup", "iwconfig", "brctl", "pfctl"}
)

// programTable builds the table. A name given two rules is a mistake in
// this function: it panics (at the first judgement, so every test fails).
func programTable() map[string]rule {
	t := map[string]rule{}
	add := func(r rule, names ...string) {
		for _, n := range names {
			if _, dup := t[n]; dup {
				panic("policy: two rules for the program " + n)
			}
			t[n] = r
		}
	}
	refuse := func(ruleName, why string) rule {
		return rule{final: true, judge: func(c *checker, k call) error { return c.danger(ruleName, why, k.base) }}
	}
	judge := func(f func(c *checker, k call) error) rule { return rule{judge: f} }
	final := func(f func(c *checker, k call) error) rule { return rule{judge: f, final: true} }

	add(refuse(RulePrivilege, "%s runs commands with other privileges"), privilegeTools...)
	add(refuse(RuleDisk, "%s formats, mounts or rewrites disks"), diskTools...)
	add(refuse(RuleSystemControl, "%s controls the host system, its processes or accounts"), systemTools...)
	add(refuse(RuleRemoteAccess, "%s opens remote shells or raw connections"), remoteTools...)
	add(refuse(RuleNetwork, "%s changes the firewall or network configuration"), firewallTools...)
	add(final(func(c *checker, k call) error { return c.shell(k.args, k.x, k.sio) }), keys(shells)...)
	add(final(func(c *checker, k call) error { return c.interpreter(k.args, k.x, k.sio, k.base) }), keys(langInterpreters)...)
	add(judge(func(c *checker, k call) error { c.recordDownload(k.args, k.sio); return nil }), keys(downloaders)...)
	for name, w := range wrappers {
		add(final(func(c *checker, k call) error { return c.wrapper(k, w) }), name)
	}

	// `mount` alone (or -l, -t TYPE) only lists mounts.
	add(judge(func(c *checker, k call) error {
		if len(k.operands(set("-t"))) == 0 && !k.has("-a", "--all", "-o", "--options", "--bind", "--move") {
			return nil
		}
		return c.danger(RuleDisk, "%s formats, mounts or rewrites disks", k.base)
	}), "mount")
	add(final(func(c *checker, k call) error {
		if len(k.words) > 1 && c.anyDownloadSubst(k.words[1:]) {
			return c.danger(RuleDownloadExec, "eval of downloaded code")
		}
		return c.unsafe(RuleUnjudgeable, "eval runs code built at run time")
	}), "eval")
	add(final(func(c *checker, k call) error { return c.source(k.args, k.x, k.sio) }), "source", ".")
	add(rule{judge: func(c *checker, k call) error { return c.find(k.args, k.x) }, writes: findWrites}, "find")
	// awk -f - / -f /dev/stdin: the program comes from stdin.
	add(judge(func(c *checker, k call) error {
		a := k.args
		for i := 1; i+1 < len(a.vals); i++ {
			if a.ok[i] && (a.vals[i] == "-f" || a.vals[i] == "--file") && a.ok[i+1] {
				if fd, isFd := fdPath(a.vals[i+1]); isFd {
					if fd != "0" {
						return c.unsafe(RuleUnjudgeable, "%s reads its program from file descriptor %s", k.base, fd)
					}
					if err := c.stdinProgram(k.base, k.x, k.sio, false); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}), "awk", "gawk", "mawk", "nawk", "busybox-awk")
	add(judge(func(c *checker, k call) error { return c.make(k.args, k.x, k.sio) }), "make", "gmake", "bmake")
	add(rule{judge: func(c *checker, k call) error { return c.sed(k.args) }, writes: inPlaceWrites}, "sed")
	add(judge(func(c *checker, k call) error { return c.sed(k.args) }), "gsed")
	add(judge(func(c *checker, k call) error { return c.editor(k.args, k.x, k.sio, k.base) }),
		"ed", "red", "ex", "vi", "vim", "nvim", "view", "vimdiff")
	add(final(func(c *checker, k call) error {
		return c.unsafe(RuleUnjudgeable, "%s runs shells whose input cannot be judged", k.base)
	}), "tmux", "screen", "byobu", "dtach", "abduco")
	add(judge(func(c *checker, k call) error { return c.nameArgs(k.args, k.base) }),
		"read", "printf", "unset", "getopts")
	add(judge(func(c *checker, k call) error { return c.codeBuiltin(k) }),
		"mapfile", "readarray", "compgen", "fc", "set", "test", "[")
	add(judge(func(c *checker, k call) error {
		if k.has("-p") || k.hasShort('p') {
			return c.unsafe(RuleUnjudgeable, "hash -p rebinds a command name to another program")
		}
		return nil
	}), "hash")
	add(judge(func(c *checker, k call) error {
		if k.has("-f") || k.hasShort('f') {
			return c.unsafe(RuleUnjudgeable, "enable -f loads builtins from a shared library")
		}
		return nil
	}), "enable")
	add(final(func(c *checker, k call) error { return c.parallel(k.args) }), "parallel")
	add(judge(func(c *checker, k call) error { return c.git(k.args) }), "git")
	add(rule{judge: func(c *checker, k call) error { return c.codeOptions(k.args, k.base) }, writes: tarWrites}, "tar")
	add(judge(func(c *checker, k call) error { return c.codeOptions(k.args, k.base) }), "zip")
	add(final(func(c *checker, k call) error { return c.trap(k.args) }), "trap")
	add(final(func(c *checker, k call) error { return c.alias(k.args) }), "alias")
	add(final(func(c *checker, k call) error { return c.cd(k.args) }), "cd", "pushd")
	add(final(func(c *checker, k call) error { return c.rm(k.args) }), "rm")
	// ln: the link is judged as a write, then remembered, so that a later
	// write or rm -r through it is judged where it lands.
	add(final(func(c *checker, k call) error {
		err := copyWrites(c, k)
		c.recordLinks(k.args)
		return err
	}), "ln")
	add(final(func(c *checker, k call) error {
		a := k.args
		for i := 1; i < len(a.vals); i++ {
			if a.ok[i] && strings.HasPrefix(a.vals[i], "of=") {
				if err := c.writePath(a.vals[i][3:], "dd output"); err != nil {
					return err
				}
			}
		}
		return nil
	}), "dd")
	add(final(func(c *checker, k call) error { return c.kill(k.args) }), "kill")
	add(judge(func(c *checker, k call) error {
		if len(k.vals) > 1 {
			return c.danger(RuleSystemControl, "init %s changes the runlevel", k.vals[1])
		}
		return nil
	}), "init")
	add(judge(func(c *checker, k call) error {
		a := k.args
		for _, i := range a.operands(nil) {
			if a.ok[i] && !readOnlyVerbs[a.vals[i]] && !strings.HasPrefix(a.vals[i], "list-") {
				if k.base == "service" && i == 1 {
					continue // the service name
				}
				return c.danger(RuleSystemControl, "%s %s changes system services", k.base, a.vals[i])
			}
			if k.base == "systemctl" {
				break
			}
		}
		return nil
	}), "systemctl", "service")
	add(judge(func(c *checker, k call) error {
		for i := 1; i < len(k.vals); i++ {
			if v := k.vals[i]; v == "-w" || v == "-p" || v == "--load" || v == "--system" || strings.Contains(v, "=") {
				return c.danger(RuleSystemControl, "sysctl changes kernel parameters")
			}
		}
		return nil
	}), "sysctl")
	add(judge(func(c *checker, k call) error {
		if !(len(k.vals) == 2 && k.vals[1] == "-l") {
			return c.danger(RuleSystemControl, "crontab installs or removes scheduled jobs")
		}
		return nil
	}), "crontab")
	add(judge(func(c *checker, k call) error {
		if len(k.operands(nil)) >= 2 {
			return c.danger(RuleNetwork, "ifconfig changes a network interface")
		}
		return nil
	}), "ifconfig")
	add(final(func(c *checker, k call) error { return c.netVerb(k.args, k.base) }), "ip", "tc", "route", "nmcli")
	add(judge(func(c *checker, k call) error {
		a := k.args
		if err := c.codeOptions(a, k.base); err != nil {
			return err
		}
		for _, i := range a.operands(set("-e", "--rsh")) {
			v := a.vals[i]
			if strings.HasPrefix(v, "rsync://") || strings.Contains(v, "::") || remoteSpec(v) {
				return c.danger(RuleRemoteAccess, "rsync to or from a remote host")
			}
		}
		return nil
	}), "rsync")
	// chmod's first operand is the mode.
	add(rule{writes: ownerWrites, judge: func(c *checker, k call) error {
		if ops := k.operands(nil); len(ops) > 0 {
			mode := k.vals[ops[0]]
			if strings.Contains(mode, "s") && strings.ContainsAny(mode, "+=") ||
				len(mode) == 4 && strings.ContainsAny(mode[:1], "2467") && isDigits(mode) {
				return c.danger(RulePrivilege, "chmod %s sets the setuid/setgid bit", mode)
			}
		}
		return nil
	}}, "chmod")
	// chown's first operand is the owner, chgrp's the group.
	add(rule{writes: ownerWrites, judge: func(c *checker, k call) error {
		if ops := k.operands(nil); len(ops) > 0 {
			owner := k.vals[ops[0]]
			for _, part := range strings.FieldsFunc(owner, func(r rune) bool { return r == ':' || r == '.' }) {
				if part == "root" || part == "0" {
					return c.danger(RulePrivilege, "%s gives files to root", k.base)
				}
			}
		}
		return nil
	}}, "chown", "chgrp")
	add(rule{writes: ownerWrites}, "chattr", "setfacl")
	add(rule{writes: operandWrites}, "tee", "touch", "mkdir", "rmdir", "unlink", "shred", "mkfifo", "truncate")
	add(rule{writes: copyWrites}, "cp", "mv", "install")
	add(rule{writes: unzipWrites}, "unzip")
	return t
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// What programs write: each function judges the files its programs'
// arguments name (writeTarget).

// operandWrites: every operand is a file written (tee, touch, mkdir, ...).
func operandWrites(c *checker, k call) error {
	a := k.args
	return c.writeTargets(k, a.operands(set("-s", "--size", "-r", "--reference", "-m", "--mode", "-n", "--iterations")))
}

// copyWrites: the destination (the last operand, or -t DIR) of cp, mv,
// install and ln, and the sources mv deletes.
func copyWrites(c *checker, k call) error {
	a := k.args
	var targets []int
	vops := a.operands(set("-t", "--target-directory", "-S", "--suffix", "-m", "--mode", "-o", "-g", "--owner", "--group"))
	for i := 1; i < len(a.vals); i++ {
		if a.ok[i] && (a.vals[i] == "-t" || a.vals[i] == "--target-directory") && i+1 < len(a.vals) {
			targets = append(targets, i+1)
		} else if a.ok[i] && strings.HasPrefix(a.vals[i], "--target-directory=") {
			if err := c.writePath(strings.TrimPrefix(a.vals[i], "--target-directory="), k.base); err != nil {
				return err
			}
		}
	}
	if len(targets) == 0 && len(vops) >= 2 {
		targets = vops[len(vops)-1:]
	}
	if k.base == "mv" && len(vops) >= 2 {
		targets = append(targets, vops[:len(vops)-1]...) // moving away deletes the source
	}
	return c.writeTargets(k, targets)
}

// ownerWrites: the operands after the first (chmod's mode, chown's owner).
func ownerWrites(c *checker, k call) error {
	a := k.args
	if ops := a.operands(nil); len(ops) > 1 {
		return c.writeTargets(k, ops[1:])
	}
	return nil
}

// inPlaceWrites: the files sed -i edits (the operands after the script).
func inPlaceWrites(c *checker, k call) error {
	a := k.args
	if !(a.has("-i", "--in-place") || a.hasShort('i') || hasPrefixArg(a, "-i") || hasPrefixArg(a, "--in-place=")) {
		return nil
	}
	sops := a.operands(set("-e", "-f", "--expression", "--file", "-l", "-E"))
	if !a.has("-e", "-f", "--expression", "--file") && len(sops) > 0 {
		sops = sops[1:]
	}
	return c.writeTargets(k, sops)
}

// findWrites: find's -fprint, -fprint0, -fls and -fprintf files.
func findWrites(c *checker, k call) error {
	a := k.args
	var targets []int
	for i := 1; i < len(a.vals)-1; i++ {
		if a.ok[i] && (a.vals[i] == "-fprint" || a.vals[i] == "-fprint0" || a.vals[i] == "-fls" || a.vals[i] == "-fprintf") {
			targets = append(targets, i+1)
		}
	}
	return c.writeTargets(k, targets)
}

// tarWrites: the directory tar -C extracts into.
func tarWrites(c *checker, k call) error {
	a := k.args
	var targets []int
	for i := 1; i < len(a.vals); i++ {
		if a.ok[i] && (a.vals[i] == "-C" || a.vals[i] == "--directory") && i+1 < len(a.vals) {
			targets = append(targets, i+1)
		}
	}
	return c.writeTargets(k, targets)
}

// unzipWrites: the directory unzip -d extracts into.
func unzipWrites(c *checker, k call) error {
	a := k.args
	var targets []int
	for i := 1; i < len(a.vals); i++ {
		if a.ok[i] && a.vals[i] == "-d" && i+1 < len(a.vals) {
			targets = append(targets, i+1)
		}
	}
	return c.writeTargets(k, targets)
}

// writeTargets judges the words at targets as files k's program writes.
func (c *checker) writeTargets(k call, targets []int) error {
	for _, i := range targets {
		if err := c.writeTarget(k.words[i], k.base); err != nil {
			return err
		}
	}
	return nil
}

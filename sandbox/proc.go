//go:build linux

package sandbox

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// procEntry is what /proc/<pid>/stat tells about a process.
type procEntry struct {
	pid, ppid, pgid, sid int
	state                byte // R, S, D, Z, T, ...
}

// scanProc lists every process. It is called when killing (timeout,
// cancel, Close) and when previews judge a port (WorkspaceProcesses, once
// per connection opened), never on a command's normal path.
func scanProc() []procEntry {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	out := make([]procEntry, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp session ..."; comm may contain
		// spaces and parentheses, so parse after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 4 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgid, _ := strconv.Atoi(f[2])
		sid, _ := strconv.Atoi(f[3])
		out = append(out, procEntry{pid: pid, ppid: ppid, pgid: pgid, sid: sid, state: f[0][0]})
	}
	return out
}

// descendants returns the pids below root, in the process table ps.
func descendants(ps []procEntry, root int) []int {
	return descendantsOf(ps, []int{root})
}

// descendantsOf returns the pids below any of roots, in the process table
// ps, reading the table once whatever the number of roots.
func descendantsOf(ps []procEntry, roots []int) []int {
	kids := make(map[int][]int)
	for _, p := range ps {
		kids[p.ppid] = append(kids[p.ppid], p.pid)
	}
	var out []int
	queue := slices.Clone(roots)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, k := range kids[p] {
			out = append(out, k)
			queue = append(queue, k)
		}
	}
	return out
}

// killTree kills the process group led by pid and every descendant of pid,
// including ones that left the group. Everything found is stopped first and
// the table re-read until it stops growing, so a process forking during the
// scan cannot leave a child behind.
func killTree(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGSTOP)
	seen := stopTrees(func([]procEntry) []int { return []int{pid} })
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for d := range seen {
		_ = syscall.Kill(d, syscall.SIGKILL)
	}
}

// stopTrees stops (SIGSTOP) the roots that roots picks from the process
// table and all their descendants, re-reading the table until no new
// process appears, and returns what it stopped.
func stopTrees(roots func([]procEntry) []int) map[int]bool {
	seen := map[int]bool{}
	for range 8 {
		grew := false
		ps := scanProc()
		for _, r := range roots(ps) {
			for _, d := range append(descendants(ps, r), r) {
				if !seen[d] {
					seen[d] = true
					grew = true
					_ = syscall.Kill(d, syscall.SIGSTOP)
				}
			}
		}
		if !grew {
			break
		}
	}
	return seen
}

// killSession kills every process of the session led by sid (a pty
// command): job control moves background jobs to their own process groups,
// but they stay in the session.
func killSession(sid int) {
	_ = syscall.Kill(-sid, syscall.SIGKILL)
	for _, p := range scanProc() {
		if p.sid == sid {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
}

// sshSignals maps the signal names SSH uses (RFC 4254 section 6.10, without
// "SIG") plus the common job-control ones to signals.
var sshSignals = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE,
	"HUP": syscall.SIGHUP, "ILL": syscall.SIGILL, "INT": syscall.SIGINT,
	"KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE, "QUIT": syscall.SIGQUIT,
	"SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2, "CONT": syscall.SIGCONT, "STOP": syscall.SIGSTOP,
	"TSTP": syscall.SIGTSTP, "WINCH": syscall.SIGWINCH, "TTIN": syscall.SIGTTIN,
	"TTOU": syscall.SIGTTOU, "CHLD": syscall.SIGCHLD, "BUS": syscall.SIGBUS,
	"TRAP": syscall.SIGTRAP, "SYS": syscall.SIGSYS, "XCPU": syscall.SIGXCPU,
	"XFSZ": syscall.SIGXFSZ, "VTALRM": syscall.SIGVTALRM, "PROF": syscall.SIGPROF,
	"URG": syscall.SIGURG, "IO": syscall.SIGIO,
}

// ParseSignal returns the signal of an SSH signal name ("INT", also accepted
// as "SIGINT", any case).
func ParseSignal(name string) (syscall.Signal, bool) {
	n := strings.TrimPrefix(strings.ToUpper(name), "SIG")
	s, ok := sshSignals[n]
	return s, ok
}

// signalName is the SSH name of a signal ("KILL"), or its number.
func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return strings.TrimPrefix(n, "SIG")
	}
	return strconv.Itoa(int(s))
}

//go:build linux

package sandbox

import (
	"bytes"
	"os/exec"
	"syscall"
)

// softwareIsolation runs a command as a plain host process in its own
// session and cgroup (cgroup.go), under the seccomp deny list its spawning
// thread holds (New: installSpawnerFilter), with the policy's
// workspace escape checks: nothing else keeps it inside its boundary.
type softwareIsolation struct{ e *executor }

func (softwareIsolation) mode() Mode                        { return ModeSoftware }
func (softwareIsolation) escapeChecks() bool                { return true }
func (softwareIsolation) ownsTree() bool                    { return false }
func (softwareIsolation) directOK() bool                    { return true }
func (softwareIsolation) visible(string, string, bool) bool { return true }
func (softwareIsolation) runs(hdr []byte) bool              { return hostRuns(hdr) }
func (softwareIsolation) scriptPrefix(string) string        { return "" }
func (s softwareIsolation) command(p program, wd *workdir, pty bool) *exec.Cmd {
	return hostCommand(s.e, p, wd, pty)
}

// hostRuns reports a file the kernel execs itself on the host: ELF or #!.
func hostRuns(hdr []byte) bool {
	return isELF(hdr) || (len(hdr) >= 2 && hdr[0] == '#' && hdr[1] == '!')
}

func isELF(hdr []byte) bool { return len(hdr) >= 4 && bytes.Equal(hdr[:4], []byte("\x7fELF")) }

// hostCommand is the exec.Cmd of the modes that run a command as a host
// process (software and none): p as it is, entering its directory by
// descriptor, in its own session (Start sets up a pty's), killed with the
// daemon (Pdeathsig), with the run-as credential.
func hostCommand(e *executor, p program, wd *workdir, pty bool) *exec.Cmd {
	cmd := &exec.Cmd{Path: p.path, Args: p.argv, Dir: p.dir, Env: p.env,
		SysProcAttr: &syscall.SysProcAttr{Credential: e.cred}}
	// The child enters a directory we opened, not a name: its chdir runs
	// before exec, while it still has our descriptors. A `cd` target the
	// direct path took is opened beneath the boundary's descriptor; if that
	// fails the kernel's chdir by name reports it, as bash's cd would.
	if p.dir == wd.dir {
		cmd.Dir = procPath(wd.dfd)
	} else if f := wd.openBeneath(p.dir); f != nil {
		cmd.Dir = procPath(f)
	}
	if !pty {
		// Its own session, not only its own process group: a command in
		// the daemon's session could open the daemon's controlling terminal
		// (/dev/tty) and push input into it with TIOCSTI. The session
		// leader is also the group leader, so the group is still -pid.
		cmd.SysProcAttr.Setsid = true
	}
	// If the daemon dies, its commands die with it (bwrap does this
	// itself with --die-with-parent). Safe because the spawner's thread
	// lives as long as the executor.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	return cmd
}

func (softwareIsolation) filtersSpawner() bool { return true }

func (softwareIsolation) rootWarning(*executor) string { return "" }

func (softwareIsolation) gaps(*executor) []string {
	return []string{"no boundary: commands reach whatever the daemon's user can (files, unix sockets, the network), and code the policy does not judge runs unchecked"}
}

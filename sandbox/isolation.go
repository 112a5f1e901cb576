//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// modeTable is the one list of isolation modes: ParseMode, Modes, the
// config package's validation (through Modes) and New's choice of a
// strategy all read it, and nothing else compares modes.
var modeTable = []struct {
	mode Mode
	// policy: the safety policy applies (unless PolicyConfig.Disabled).
	policy bool
	// tries: New probes bubblewrap for this mode.
	tries bool
	// namespaced: as an effective mode, commands run in namespaces of
	// their own.
	namespaced bool
	// cutsNetwork: as an effective mode, Config.NoNetwork holds (bwrap's
	// network namespace; Landlock's TCP rules, without which New refuses
	// the mode when NoNetwork is set).
	cutsNetwork bool
	// kernelBoundary: as an effective mode, the kernel keeps commands
	// inside their boundary (bwrap's mounts, Landlock), so the policy
	// needs no escape checks and lets a program read from stdin run.
	kernelBoundary bool
	// strength orders the effective modes for Config.MinMode (the
	// --isolation-min floor): bwrap > landlock > software > none; 0 for
	// auto, which is not one.
	strength int
	// pick chooses the strategy once, in New; an error means the mode
	// cannot work here. reason is what Executor.Reason reports.
	pick func(e *executor) (iso isolation, reason string, err error)
}{
	{ModeAuto, true, true, false, false, false, 0, func(e *executor) (isolation, string, error) {
		b, err := newBwrapIsolation(e)
		if err == nil {
			return b, "auto: bwrap probe succeeded", nil
		}
		why := "auto: bwrap unusable (" + err.Error() + ")"
		l, lerr := newLandlockIsolation(e)
		if lerr == nil {
			return l, fmt.Sprintf("%s; landlock ABI %d probe succeeded; %s", why, l.abi, l.unixSockets()), nil
		}
		return softwareIsolation{e}, why + "; landlock unusable (" + lerr.Error() + "); using software mode", nil
	}},
	{ModeBwrap, true, true, true, true, true, 4, func(e *executor) (isolation, string, error) {
		b, err := newBwrapIsolation(e)
		if err != nil {
			return nil, "", &errcode.Error{Code: errcode.InvalidConfiguration, Op: "sandbox",
				Msg: "isolation mode bwrap cannot work: " + err.Error(), Err: err}
		}
		return b, "bwrap mode chosen by configuration; probe succeeded", nil
	}},
	{ModeLandlock, true, false, false, true, true, 3, func(e *executor) (isolation, string, error) {
		l, err := newLandlockIsolation(e)
		if err != nil {
			return nil, "", &errcode.Error{Code: errcode.InvalidConfiguration, Op: "sandbox",
				Msg: "isolation mode landlock cannot work: " + err.Error(), Err: err}
		}
		return l, fmt.Sprintf("landlock mode chosen by configuration; ABI %d probe succeeded; %s", l.abi, l.unixSockets()), nil
	}},
	{ModeSoftware, true, false, false, false, false, 2, func(e *executor) (isolation, string, error) {
		return softwareIsolation{e}, "software mode chosen by configuration", nil
	}},
	{ModeNone, false, false, false, false, false, 1, func(e *executor) (isolation, string, error) {
		return noIsolation{e}, "isolation disabled by configuration (mode none: no policy, no sandbox)", nil
	}},
}

// Modes lists every isolation mode a Config, the --isolation flag and the
// config file accept, in the order the documentation lists them.
func Modes() []Mode {
	ms := make([]Mode, len(modeTable))
	for i, m := range modeTable {
		ms[i] = m.mode
	}
	return ms
}

// ParseMode parses an isolation mode name as given on the command line or in
// the config file ("" means auto). The error names the bad value and the
// accepted ones, so the config package can show it as is.
func ParseMode(s string) (Mode, error) {
	m := Mode(strings.ToLower(strings.TrimSpace(s)))
	if m == "" {
		return ModeAuto, nil
	}
	if _, ok := modeEntry(m); ok {
		return m, nil
	}
	names := make([]string, len(modeTable))
	for i, e := range modeTable {
		names[i] = string(e.mode)
	}
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	return "", fmt.Errorf("invalid isolation mode %q: want %s", s, want)
}

func modeEntry(m Mode) (int, bool) {
	for i, e := range modeTable {
		if e.mode == m {
			return i, true
		}
	}
	return -1, false
}

// FloorModes lists the values of Config.MinMode (--isolation-min), the
// effective modes from the strongest to the weakest: bwrap, landlock,
// software, none.
func FloorModes() []Mode {
	var ms []Mode
	for _, m := range modeTable {
		if m.strength > 0 {
			ms = append(ms, m.mode)
		}
	}
	slices.SortStableFunc(ms, func(a, b Mode) int { return strength(b) - strength(a) })
	return ms
}

// strength is a mode's place in the floor's order; 0 for auto and for a
// name that is no mode.
func strength(m Mode) int {
	i, ok := modeEntry(m)
	if !ok {
		return 0
	}
	return modeTable[i].strength
}

// Below reports that m, an effective mode or a configured one other than
// auto, is weaker than floor (a FloorModes value; "" is none, no floor).
// Auto is below no floor: what it gives is known only once New probed.
func (m Mode) Below(floor Mode) bool {
	return strength(m) > 0 && strength(m) < strength(floor)
}

// fellBack reports that configured (auto) resolved to a weaker mode than
// the strongest one it tries.
func fellBack(configured, got Mode) bool {
	return configured.TriesBwrap() && strength(got) < strength(ModeBwrap)
}

// TriesBwrap reports a configured mode for which New probes bubblewrap
// (auto and bwrap): whether the daemon's retry with the network shared
// (daemon/wire.go) can help.
func (m Mode) TriesBwrap() bool {
	i, ok := modeEntry(m)
	return ok && modeTable[i].tries
}

// Namespaced reports an effective mode (Executor.Mode) whose commands run
// in namespaces of their own: only such a mode can take the network away
// (Config.NoNetwork), and in any other the commands are host processes of
// the daemon's user.
func (m Mode) Namespaced() bool {
	i, ok := modeEntry(m)
	return ok && modeTable[i].namespaced
}

// CutsNetwork reports an effective mode that takes the network away from
// commands when Config.NoNetwork asks it to (bwrap, landlock); in any
// other, commands reach whatever the daemon's host can.
func (m Mode) CutsNetwork() bool {
	i, ok := modeEntry(m)
	return ok && modeTable[i].cutsNetwork
}

// KernelBoundary reports an effective mode in which the kernel keeps a
// command inside its boundary (bwrap, landlock): the policy then runs no
// workspace-escape checks and lets a program read from stdin run.
func (m Mode) KernelBoundary() bool {
	i, ok := modeEntry(m)
	return ok && modeTable[i].kernelBoundary
}

// isolation is how commands are confined: one strategy per effective mode
// (isolation_bwrap.go, isolation_landlock.go, isolation_software.go,
// isolation_none.go), chosen
// once in New from modeTable and never changed afterwards. Everything that
// differs between modes is a method here; the executor's launch, wait and
// kill steps, the policy and the direct fast path (direct.go) ask it
// rather than compare modes.
//
// A strategy that needs the file system to look different to the command
// (bwrap's mounts) says so through visible and runs; one that confines the
// command in place (software, none, or a trampoline applying Landlock)
// sees the host as it is.
//
// The landlock strategy (isolation_landlock.go) confines in place too:
// its command is the trampoline (sandboxexec: the agentbe-sandbox helper
// of Config.Trampoline, or else this binary re-executed), which enters a
// Landlock domain and a seccomp filter and then execs the command.
type isolation interface {
	// mode is the effective mode Executor.Mode reports (never ModeAuto).
	mode() Mode

	// escapeChecks reports that nothing but the policy keeps a command
	// inside its boundary (the command sees the host's file system with
	// the daemon's permissions): the policy then checks workspace escapes
	// (cd out, `..` past the root, ~ leading out), and an interactive
	// shell, whose input the policy cannot judge, is refused.
	escapeChecks() bool

	// ownsTree reports that the command's top process takes the whole
	// tree with it when killed (bwrap: its pid namespace ends), so the
	// kill is a plain SIGKILL of it and its group, a pty's session is not
	// walked, a signal goes to every process inside, and no subreaper is
	// needed.
	ownsTree() bool

	// directOK reports that the direct fast path (direct.go) may be
	// taken at all.
	directOK() bool
	// visible reports that p (absolute) is the same file inside the
	// sandbox as on the host; with bound, that it also resolves into a
	// directory bound as a whole (a PATH entry).
	visible(p, boundary string, bound bool) bool
	// runs reports that the kernel execs, inside the sandbox, a file that
	// starts with hdr (its first 20 bytes, or all of a shorter file).
	runs(hdr []byte) bool

	// filtersSpawner reports that New installs the seccomp deny list
	// (installSpawnerFilter) on the thread commands are forked
	// from, so every command inherits it: software mode. The landlock
	// trampoline installs its own; bwrap needs the namespaces it refuses;
	// none is trusted use.
	filtersSpawner() bool

	// rootWarning is what to tell the operator about running this
	// strategy's commands as root ("" for nothing).
	rootWarning(e *executor) string

	// gaps are what this strategy does not confine, each a short phrase
	// for Executor.Gaps (the start-up log and /health's isolationGaps);
	// docs/security.md lists the same per mode.
	gaps(e *executor) []string

	// scriptPrefix is what a shell script must run first (bwrap without
	// --bind-fd: the mount check); "" for none.
	scriptPrefix(boundary string) string
	// command builds the exec.Cmd that runs p confined, in its own
	// session unless pty, with the run-as credential.
	command(p program, wd *workdir, pty bool) *exec.Cmd
}

// program is a command before the strategy confines it.
type program struct {
	path string   // the host file to exec: absolute, or relative to dir when typed so (./tool)
	argv []string // argv[0] as the program sees it
	// shell: the program is the executor's shell, whose argv[0] is its
	// link name (shellArg0), not a name to look up.
	shell bool
	dir   string   // the working directory: wd.dir, or a cd target beneath the boundary
	env   []string // the complete environment
}

// probe runs `<shell> -c true` in the workspace with the real arguments of
// iso, a candidate strategy (New's choice is not made yet), as New does for
// the modes that must be seen to work here (looking a program up is not
// enough: in containers bwrap is installed but cannot create namespaces,
// and a kernel may have Landlock's calls but refuse them). failed is what
// the command printed on stderr (or its exit status) when it ran and
// failed, "" when it succeeded; err says it could not start (starter names
// what) or did not finish within 10 s.
func (e *executor) probe(iso isolation, starter string) (failed string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env, _ := e.env(e.root, nil, "")
	wd, err := e.openWorkdir(&Request{}, e.root, e.root)
	if err != nil {
		return "", fmt.Errorf("cannot open the workspace root: %v", err)
	}
	defer wd.close()
	cmd := e.shellCommandIn(iso, "true", wd, env, false)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := e.spawn.start(cmd); err != nil {
		return "", fmt.Errorf("cannot start %s: %v", starter, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
	werr := cmd.Wait()
	stop()
	if werr == nil {
		return "", nil
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("the %s probe did not finish within 10s", iso.mode())
	}
	if msg := strings.TrimSpace(stderr.String()); msg != "" {
		return msg, nil
	}
	return werr.Error(), nil
}

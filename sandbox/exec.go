//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/sandbox/policy"
)

// ioGrace is how long output is still read after a command's shell has
// exited and its process group was killed. Only a process that escaped the
// group (setsid) and still holds the pipe makes us wait this long; then the
// pipes are cut so Run returns.
const ioGrace = 250 * time.Millisecond

// maxArgBytes is the kernel's MAX_ARG_STRLEN: the command travels as the
// single argument of `<shell> -c`.
const maxArgBytes = 128 << 10

// basePath is the PATH every command gets; the daemon's own PATH is not
// inherited (nothing of the daemon's environment is).
const basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// New builds an Executor. It resolves the shell, the run-as user and the
// base environment once, so Run does no lookups, and for ModeAuto and
// ModeBwrap probes bubblewrap by running it once. An explicit ModeBwrap that
// cannot work is an error saying why; ModeAuto then falls back to software
// and says why in Reason.
func New(cfg Config) (Executor, error) {
	e := &executor{cfg: cfg, log: cfg.Logger, running: make(map[*child]struct{})}
	ok := false
	e.spawn = newSpawnerPool(spawnerThreads())
	defer func() {
		if !ok {
			e.spawn.stop()
			if e.rootH != nil {
				e.rootH.Close()
			}
			if e.rootDir != nil {
				e.rootDir.Close()
			}
			if e.devNull != nil {
				e.devNull.Close()
			}
		}
	}()
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Mode == "" {
		cfg.Mode = ModeAuto
	}
	mode, err := ParseMode(string(cfg.Mode))
	if err != nil {
		return nil, invalidConfig(err.Error())
	}
	entry, _ := modeEntry(mode)
	floor := ModeNone
	if cfg.MinMode != "" {
		if floor, err = ParseMode(string(cfg.MinMode)); err != nil || strength(floor) == 0 {
			return nil, invalidConfig(fmt.Sprintf("invalid --isolation-min %q: want one of %v", cfg.MinMode, FloorModes()))
		}
	}
	if mode.Below(floor) {
		return nil, invalidConfig(fmt.Sprintf("--isolation %s is below --isolation-min %s: raise --isolation (or use auto), or lower --isolation-min", mode, floor))
	}
	if cfg.Shell == "" {
		cfg.Shell = ShellAuto
	}
	if _, err := ParseShell(string(cfg.Shell)); err != nil {
		return nil, invalidConfig(err.Error())
	}
	if cfg.WorkspaceRoot == "" || !filepath.IsAbs(cfg.WorkspaceRoot) {
		return nil, invalidConfig(fmt.Sprintf("workspace root %q must be an absolute path", cfg.WorkspaceRoot))
	}
	e.root = filepath.Clean(cfg.WorkspaceRoot)
	if e.root == "/" {
		return nil, invalidConfig("workspace root must not be / (the whole host would be the workspace)")
	}
	if real, err := filepath.EvalSymlinks(e.root); err != nil {
		return nil, invalidConfig(fmt.Sprintf("workspace root %q: %v", cfg.WorkspaceRoot, err))
	} else if real != e.root {
		return nil, invalidConfig(fmt.Sprintf("workspace root %q must be a real path (it resolves to %q)", cfg.WorkspaceRoot, real))
	}
	rootH, err := os.OpenRoot(e.root)
	if err != nil {
		return nil, invalidConfig(fmt.Sprintf("workspace root %q: %v", cfg.WorkspaceRoot, err))
	}
	e.rootH = rootH
	if e.rootDir, err = rootH.Open("."); err != nil {
		return nil, invalidConfig(fmt.Sprintf("workspace root %q: %v", cfg.WorkspaceRoot, err))
	}
	if e.devNull, err = os.Open(os.DevNull); err != nil {
		return nil, invalidConfig(fmt.Sprintf("%s: %v (commands without input read it)", os.DevNull, err))
	}
	if cfg.OutputLimit < 0 || cfg.DefaultTimeout < 0 {
		return nil, invalidConfig("output limit and default timeout must not be negative")
	}
	if cfg.MaxConcurrent < 0 {
		return nil, invalidConfig(fmt.Sprintf("--exec-max-concurrent %d must not be negative", cfg.MaxConcurrent))
	}
	if cfg.MaxConcurrent == 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	e.slots = make(chan struct{}, cfg.MaxConcurrent)
	e.timeout = cfg.DefaultTimeout
	if e.timeout == 0 {
		e.timeout = DefaultTimeout
	}
	e.limit = cfg.OutputLimit
	if e.limit == 0 {
		e.limit = DefaultOutputLimit
	}

	if e.shellPath, e.shellArg0, e.shellKind, err = resolveShell(cfg.Shell); err != nil {
		return nil, err
	}
	if err := e.resolveUser(cfg.RunAs); err != nil {
		return nil, err
	}
	rlimits, err := e.setupProcessBound(cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if !ok && e.cgroups != nil {
			e.cgroups.close()
		}
	}()
	if e.ulimit, err = ulimitPrefix(rlimits, e.shellKind); err != nil {
		return nil, err
	}
	if e.shellKind == "bash" && e.ulimit == "" && !probeDirect(e.shellPath, e.shellArg0) {
		e.noDirect = true
		e.log.Info("this bash does not exec in place after cd; every command runs through the shell")
	}
	e.buildBaseEnv()

	if modeTable[entry].policy && !cfg.Policy.Disabled {
		if e.policy, err = policy.New(cfg.Policy.Allow...); err != nil {
			return nil, invalidConfig(err.Error())
		}
	}

	// The strategy is chosen here, once (isolation.go); auto has resolved
	// to a concrete one and nothing changes it afterwards.
	if e.iso, e.reason, err = modeTable[entry].pick(e); err != nil {
		return nil, err
	}
	defer func() {
		if c, isCloser := e.iso.(interface{ close() }); isCloser && !ok {
			c.close()
		}
	}()
	if got := e.iso.mode(); got.Below(floor) {
		return nil, &errcode.Error{Code: errcode.InvalidConfiguration, Op: "sandbox",
			Msg: fmt.Sprintf("commands would run in %s mode, below --isolation-min %s (%s): make %s work here, or lower --isolation-min", got, floor, e.reason, floor)}
	}
	if got := e.iso.mode(); fellBack(mode, got) {
		// Auto fell back: the operator asked for the strongest mode
		// that works, and this machine gave a weaker one.
		e.log.Warn("command isolation fell back to a weaker mode", "mode", string(got), "reason", e.reason)
	}
	if e.iso.escapeChecks() && e.policy != nil {
		e.policy = e.policy.WithEscapeChecks(true)
	}
	if e.iso.filtersSpawner() {
		// The deny list on every thread a command is forked from: the
		// commands inherit it.
		if err := e.spawn.onEveryThread(installSpawnerFilter); err != nil {
			e.log.Warn("software mode without the seccomp filter", "err", err)
			e.reason += "; seccomp filter unavailable (" + err.Error() + ")"
		} else {
			e.reason += "; seccomp filter on"
		}
	}
	if b, isBwrap := e.iso.(bwrapIsolation); isBwrap && !e.cfg.NoNetwork {
		if why := b.scopeSpawner(); why != "" {
			e.abstractScopeOff = why
			e.log.Warn("bwrap mode with the network: commands reach the host's abstract unix sockets", "reason", why)
		} else {
			e.abstractScoped = true
			e.reason += "; abstract unix sockets scoped by Landlock"
		}
	}
	if e.cgroups == nil && !e.iso.ownsTree() {
		if err := useReaper(); err != nil {
			e.log.Warn("cannot become a child subreaper; a process that leaves its command's session and parent escapes the kill", "err", err)
		} else {
			e.reaper = true
		}
	}
	if w := e.iso.rootWarning(e); w != "" {
		e.log.Warn(w)
		e.reason += "; " + w
	}
	e.gaps = e.iso.gaps(e)
	ok = true
	e.log.Info("sandbox ready", "mode", string(e.iso.mode()), "reason", e.reason, "gaps", strings.Join(e.gaps, "; "),
		"shell", e.shellPath, "policy", e.policy != nil, "run_as", cfg.RunAs)
	return e, nil
}

func invalidConfig(msg string) error {
	return &errcode.Error{Code: errcode.InvalidConfiguration, Op: "sandbox", Msg: msg}
}

// executor is the one Executor implementation; its isolation strategy
// (isolation.go) is all that differs between modes.
type executor struct {
	cfg     Config
	log     *slog.Logger
	iso     isolation // chosen once by New
	reason  string
	gaps    []string // iso.gaps, once
	root    string
	timeout time.Duration
	limit   int64
	policy  *policy.Policy // nil when the policy is off
	rootH   *os.Root       // the workspace root, for requests without a Workspace
	rootDir *os.File       // the same directory, open: a request run at the root opens it again from here (workdir.go)
	devNull *os.File       // /dev/null, read-only, open since New: the stdin of every command given none (os/exec would open it per start, on the spawner's thread)

	shellPath, shellArg0, shellKind string
	ulimit                          string // "ulimit ... || exit 126; " or ""
	cred                            *syscall.Credential
	userName                        string
	uid, gid                        uint32   // who runs commands: cred's ids, else the daemon's (mayAccessIDs)
	groups                          []uint32 // and the supplementary groups
	baseEnv                         []string // KEY=VALUE, built once
	bwrapPath                       string
	bwrapBase                       []string // argv prefix, built once
	bwrapFilter                     *os.File // bwrap's seccomp filter (bwrapFilterMemfd); nil: unavailable
	bwrapFilterErr                  error    // why bwrapFilter is nil
	bwrapBound, bwrapLinks          []string // host paths bound / symlinks recreated at their own path (direct.go)
	noDirect                        bool     // tests: never take the direct fast path
	bindFD                          bool     // bwrap has --bind-fd (bwrap.go)
	// abstractScoped: bwrap mode with the network, and every thread bwrap
	// is forked from is in a Landlock domain that scopes abstract unix
	// sockets (bwrapIsolation.scopeSpawner); else abstractScopeOff says why not.
	abstractScoped   bool
	abstractScopeOff string

	slots   chan struct{} // one per running command (Config.MaxConcurrent)
	mu      sync.Mutex
	closed  bool
	running map[*child]struct{}
	runs    sync.WaitGroup // Run calls in flight, awaited by Close
	starts  sync.WaitGroup // Start calls between track and spawn
	spawn   *spawner
	cgroups *cgroups // nil: no cgroup per command (cgroup.go)
	reaper  bool     // no cgroups and a strategy that does not own the tree: the subreaper fallback (subreaper.go)
}

func (e *executor) Mode() Mode     { return e.iso.mode() }
func (e *executor) Reason() string { return e.reason }
func (e *executor) Gaps() []string { return slices.Clone(e.gaps) }

// LookPath finds a program the way a command's shell will: name itself when
// it holds a slash, else the first executable regular file of that name on
// the PATH a command gets (env's PATH when it sets one, else the base PATH;
// never the daemon's own). For callers that must know what a command will
// run before it runs (what to make visible under bwrap).
func LookPath(name string, env map[string]string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	p := basePath
	if v, ok := env["PATH"]; ok {
		p = v
	}
	for _, dir := range filepath.SplitList(p) {
		if !filepath.IsAbs(dir) {
			continue // a relative PATH entry depends on the cwd; not followed
		}
		c := filepath.Join(dir, name)
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return c, nil
		}
	}
	return "", &errcode.Error{Code: errcode.MissingUtilities, Op: "lookpath", Command: name, Msg: "not found on the PATH commands get (" + p + ")"}
}

// resolveShell finds the shell once. argv[0] is the real program's name for
// bash and dash (so bash invoked through an `sh` link does not switch to
// POSIX mode behind our back, which would change ulimit units), and the
// link's name otherwise (busybox dispatches on it).
func resolveShell(s Shell) (path, arg0, kind string, err error) {
	names := []string{string(s)}
	if s == ShellAuto {
		names = []string{"bash", "sh"}
	}
	for _, n := range names {
		if path, err = exec.LookPath(n); err == nil {
			break
		}
		for _, dir := range filepath.SplitList(basePath) {
			if fi, serr := os.Stat(filepath.Join(dir, n)); serr == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				path, err = filepath.Join(dir, n), nil
				break
			}
		}
		if err == nil {
			break
		}
	}
	if err != nil {
		return "", "", "", &errcode.Error{Code: errcode.MissingUtilities, Op: "sandbox",
			Msg: fmt.Sprintf("no shell found for --shell %s (looked for %s)", s, strings.Join(names, ", ")), Err: err}
	}
	if path, err = filepath.Abs(path); err != nil {
		return "", "", "", err
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", "", "", &errcode.Error{Code: errcode.MissingUtilities, Op: "sandbox", Msg: "shell " + path + ": " + err.Error(), Err: err}
	}
	switch base := filepath.Base(real); base {
	case "bash", "dash":
		return path, base, base, nil
	}
	return path, filepath.Base(path), "sh", nil
}

// ulimitPrefix renders Rlimits as ulimit builtins run before the command.
// The units differ per shell: bash counts -f in KiB, dash in 512-byte
// blocks; both count -v in KiB; -u (bash) and -p (dash) are processes.
func ulimitPrefix(r Rlimits, kind string) (string, error) {
	if r.zero() {
		return "", nil
	}
	if r.Processes < 0 || r.FileSize < 0 || r.CPUSeconds < 0 || r.AddressSpace < 0 {
		return "", invalidConfig("rlimits must not be negative")
	}
	var parts []string
	add := func(flag string, v int64) { parts = append(parts, "ulimit "+flag+" "+strconv.FormatInt(v, 10)) }
	ceil := func(v, unit int64) int64 { return (v + unit - 1) / unit }
	switch kind {
	case "bash", "dash":
	default:
		if r.Processes != 0 || r.CPUSeconds != 0 || r.AddressSpace != 0 {
			return "", invalidConfig("only the file-size rlimit is supported with this shell; use bash or dash")
		}
	}
	if r.Processes > 0 {
		if kind == "bash" {
			add("-u", r.Processes)
		} else {
			add("-p", r.Processes)
		}
	}
	if r.FileSize > 0 {
		if kind == "bash" {
			add("-f", ceil(r.FileSize, 1024))
		} else {
			add("-f", ceil(r.FileSize, 512))
		}
	}
	if r.CPUSeconds > 0 {
		add("-t", r.CPUSeconds)
	}
	if r.AddressSpace > 0 {
		add("-v", ceil(r.AddressSpace, 1024))
	}
	return strings.Join(parts, " && ") + " || exit 126; ", nil
}

func (e *executor) resolveUser(name string) error {
	if name == "" {
		e.userName = currentUserName()
		e.uid, e.gid = uint32(os.Geteuid()), uint32(os.Getegid())
		if gs, err := os.Getgroups(); err == nil {
			for _, g := range gs {
				e.groups = append(e.groups, uint32(g))
			}
		}
		return nil
	}
	cred, userName, err := LookupRunAs(name)
	if err != nil {
		return err
	}
	e.cred = cred
	e.uid, e.gid, e.groups = e.cred.Uid, e.cred.Gid, e.cred.Groups
	e.userName = userName
	return nil
}

// LookupRunAs resolves the --run-as user name: the credential its commands
// run with (uid, primary gid, groups) and the user's name. It is the one
// lookup of that user, for the executor and for the workspace that gives
// what the file tools create to the same user (fsops.Options.Owner). The
// daemon must run as root.
func LookupRunAs(name string) (*syscall.Credential, string, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, "", invalidConfig(fmt.Sprintf("run-as user %q: %v", name, err))
	}
	if os.Geteuid() != 0 {
		return nil, "", invalidConfig(fmt.Sprintf("run-as user %q needs the daemon to run as root (it runs as uid %d)", name, os.Geteuid()))
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, "", invalidConfig(fmt.Sprintf("run-as user %q has a non-numeric uid or gid", name))
	}
	gids, err := u.GroupIds()
	if err != nil {
		return nil, "", invalidConfig(fmt.Sprintf("run-as user %q: groups: %v", name, err))
	}
	groups := make([]uint32, 0, len(gids))
	for _, g := range gids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			groups = append(groups, uint32(n))
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}, u.Username, nil
}

func currentUserName() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Getuid())
}

// envOK filters one variable: an invalid name is an error (it could smuggle
// a second assignment), a denied name or a secret value is dropped quietly.
func (e *executor) envOK(k, v string) (bool, error) {
	if !policy.ValidEnvName(k) || strings.ContainsRune(v, 0) {
		return false, &errcode.Error{Code: errcode.InvalidArgument, Op: "exec",
			Msg: fmt.Sprintf("invalid environment variable name %q (want letters, digits and _, not starting with a digit)", k)}
	}
	if policy.DeniedEnv(k) {
		e.log.Debug("dropped environment variable", "name", k, "why", "denied name")
		return false, nil
	}
	for _, s := range e.cfg.Secrets.List() {
		if strings.Contains(v, s) {
			e.log.Warn("dropped environment variable carrying a secret", "name", k)
			return false, nil
		}
	}
	return true, nil
}

func (e *executor) buildBaseEnv() {
	e.baseEnv = []string{
		"PATH=" + basePath,
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"USER=" + e.userName,
		"LOGNAME=" + e.userName,
		"SHELL=" + e.shellPath,
	}
	for k, v := range e.cfg.Env {
		if ok, err := e.envOK(k, v); err != nil {
			e.log.Warn("ignored configured environment variable", "name", k, "err", err)
		} else if ok {
			e.baseEnv = append(e.baseEnv, k+"="+v)
		}
	}
}

// env is base + request env + the forced HOME/PWD (= cwd) and TERM. Later
// entries win (os/exec and bwrap --setenv both let the last one stand).
func (e *executor) env(dir string, req map[string]string, term string) ([]string, error) {
	env := make([]string, 0, len(e.baseEnv)+len(req)+3)
	env = append(env, e.baseEnv...)
	for k, v := range req {
		ok, err := e.envOK(k, v)
		if err != nil {
			return nil, err
		}
		if ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, "HOME="+dir, "PWD="+dir)
	if term != "" {
		env = append(env, "TERM="+term)
	}
	return env, nil
}

// prepare validates a request, opens its working directory (workdir.go)
// and judges its command. It parses the command once, when the policy or
// the direct path (direct.go) reads it, and returns that parse (nil when
// neither does, or for an empty command). The caller closes the workdir
// once the command has started.
func (e *executor) prepare(req *Request, allowEmpty bool) (*workdir, *policy.Script, error) {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil, nil, errClosed()
	}
	if strings.TrimSpace(req.Command) == "" && !allowEmpty {
		return nil, nil, &errcode.Error{Code: errcode.EmptyCommand, Op: "exec", Msg: "empty command"}
	}
	if n := len(e.ulimit) + len(req.Command); n >= maxArgBytes {
		return nil, nil, &errcode.Error{Code: errcode.TooLarge, Op: "exec",
			Msg: fmt.Sprintf("the command is %d bytes; the kernel passes at most %d in one argument", n, maxArgBytes-1)}
	}
	boundary := e.root
	given := req.Boundary
	if req.Workspace != nil {
		if given != "" && filepath.Clean(given) != req.Workspace.Root() {
			return nil, nil, &errcode.Error{Code: errcode.InvalidArgument, Op: "exec", Path: given, Msg: "boundary differs from the workspace's root " + req.Workspace.Root()}
		}
		given = req.Workspace.Root()
	}
	if given != "" {
		if !filepath.IsAbs(given) {
			return nil, nil, &errcode.Error{Code: errcode.InvalidArgument, Op: "exec", Path: given, Msg: "boundary must be an absolute path"}
		}
		boundary = filepath.Clean(given)
		if !policy.Within(e.root, boundary) {
			return nil, nil, &errcode.Error{Code: errcode.PathEscapeAttempt, Op: "exec", Path: given, Msg: "boundary is outside the workspace root " + e.root}
		}
	}
	dir := boundary
	if req.Dir != "" {
		if !filepath.IsAbs(req.Dir) {
			return nil, nil, &errcode.Error{Code: errcode.InvalidArgument, Op: "exec", Path: req.Dir, Msg: "working directory must be an absolute path"}
		}
		dir = filepath.Clean(req.Dir)
		if !policy.Within(boundary, dir) {
			return nil, nil, &errcode.Error{Code: errcode.PathEscapeAttempt, Op: "exec", Path: req.Dir, Msg: "working directory is outside " + boundary}
		}
	}
	var script *policy.Script
	if strings.TrimSpace(req.Command) != "" && (e.policy != nil || e.directOn()) {
		script = policy.Parse(req.Command)
	}
	if e.policy != nil {
		if script == nil {
			if e.iso.escapeChecks() {
				return nil, nil, &errcode.Error{Code: errcode.UnsafeCommand, Op: "exec",
					Msg: "an interactive shell cannot be judged by the safety policy in software mode; use bwrap isolation"}
			}
		} else if err := e.policy.CheckScript(script, req.Env, dir, boundary); err != nil {
			return nil, nil, err
		}
	}
	wd, err := e.openWorkdir(req, dir, boundary)
	return wd, script, err
}

// command builds the exec.Cmd for a script (or an interactive shell when
// script is empty): the program itself when the script takes the direct
// fast path (direct.go, reading parsed, prepare's parse of script), else
// the shell, confined by the strategy. direct says which, so that a direct
// start the kernel refuses can be retried through the shell.
func (e *executor) command(script string, parsed *policy.Script, wd *workdir, env []string, pty bool) (cmd *exec.Cmd, direct bool) {
	if d, ok := e.direct(parsed, wd.dir, wd.boundary, env); ok {
		path := d.path
		if d.rel != "" {
			// As bash does: relative to the cwd the child enters by
			// descriptor (hostCommand), not by the directory's name.
			path = d.rel
		}
		return e.iso.command(program{path: path, argv: d.argv, dir: d.dir, env: d.env}, wd, pty), true
	}
	return e.shellCommand(script, wd, env, pty), false
}

// shellCommand builds the exec.Cmd that runs script with the shell.
func (e *executor) shellCommand(script string, wd *workdir, env []string, pty bool) *exec.Cmd {
	return e.shellCommandIn(e.iso, script, wd, env, pty)
}

// shellCommandIn is shellCommand confined by iso (New's bwrap probe runs
// it with the strategy it is trying).
func (e *executor) shellCommandIn(iso isolation, script string, wd *workdir, env []string, pty bool) *exec.Cmd {
	var argv []string
	switch pre := iso.scriptPrefix(wd.boundary); {
	case pre != "":
		if script == "" && pty {
			script = "exec " + e.shellPath + " -i"
		} else if script == "" {
			script = "exec " + e.shellPath + " -s"
		}
		argv = []string{e.shellArg0, "-c", pre + e.ulimit + script}
	case script != "":
		argv = []string{e.shellArg0, "-c", e.ulimit + script}
	case e.ulimit != "":
		argv = []string{e.shellArg0, "-c", e.ulimit + "exec " + e.shellPath + " -i"}
	case pty:
		argv = []string{e.shellArg0, "-i"}
	default:
		argv = []string{e.shellArg0, "-s"}
	}
	return iso.command(program{path: e.shellPath, argv: argv, shell: true, dir: wd.dir, env: env}, wd, pty)
}

// startCmd starts cmd on the spawner's thread. When a direct start fails
// (the kernel refused the execve or the chdir: nothing ran), the script is
// started again through the shell with the same stdio and attributes, so
// the failure is reported exactly as the shell reports it. It returns the
// command that runs.
func (e *executor) startCmd(sp *spawner, cmd *exec.Cmd, direct bool, script string, wd *workdir, env []string, pty bool) (*exec.Cmd, error) {
	err := sp.start(cmd)
	if err == nil || !direct {
		return cmd, err
	}
	e.log.Debug("direct start failed; running through the shell", "err", err)
	sh := e.shellCommand(script, wd, env, pty)
	attr := *cmd.SysProcAttr
	sh.SysProcAttr = &attr
	sh.Stdin, sh.Stdout, sh.Stderr, sh.WaitDelay = cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.WaitDelay
	return sh, sp.start(sh)
}

// child is one running process, tracked so Close can kill it.
type child struct {
	cmd        *exec.Cmd
	boundary   string // the directory the command may not leave (Request.Boundary, validated)
	ownsTree   bool   // the strategy's ownsTree: killing the top process ends the tree
	session    bool   // a pty: the child leads its own session
	timedOut   atomic.Bool
	want       atomic.Bool  // a kill was asked for (maybe before the start)
	pid        atomic.Int64 // set once started
	killed     atomic.Bool  // the kill was carried out
	cg         *cgroup      // the command's own cgroup, or nil; set before pid
	registered bool         // registered with the subreaper until waited for
	sweeps     bool         // without a cgroup, with the subreaper: sweep orphans when it ends
}

// started records the pid, and carries out a kill asked for while the
// process was being started (Close racing with Run).
func (c *child) started() {
	c.pid.Store(int64(c.cmd.Process.Pid))
	if c.want.Load() {
		c.kill()
	}
}

// kill ends the whole tree. Under bwrap, killing bwrap takes the pid
// namespace down with it (--unshare-pid, --die-with-parent). Otherwise the
// process group is killed, after freezing it and every descendant found in
// /proc so that nothing can fork or escape with setsid in between.
func (c *child) kill() {
	c.want.Store(true)
	pid := int(c.pid.Load())
	if pid == 0 || !c.killed.CompareAndSwap(false, true) {
		return
	}
	if c.cg != nil {
		// Nothing of the command is outside its cgroup.
		c.cg.kill()
	}
	if c.ownsTree {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return
	}
	if c.session {
		killSession(pid)
		return
	}
	if c.cg != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return
	}
	killTree(pid)
}

func (e *executor) track(c *child) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.running[c] = struct{}{}
	e.starts.Add(1)
	return true
}

// runningBoundaries are the boundaries of the commands tracked now.
func (e *executor) runningBoundaries() map[string]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := make(map[string]bool, len(e.running))
	for c := range e.running {
		m[c.boundary] = true
	}
	return m
}

func (e *executor) untrack(c *child) {
	e.mu.Lock()
	delete(e.running, c)
	e.mu.Unlock()
}

// errClosed is a new error each time: callers fill in the command
// (withCommand), so a shared value would be written concurrently.
func errClosed() error {
	return &errcode.Error{Code: errcode.ExecError, Op: "exec", Msg: "executor is closed"}
}

// Close kills every running command, refuses new ones and waits for the Run
// calls in flight to return. It is idempotent.
func (e *executor) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	kids := make([]*child, 0, len(e.running))
	for c := range e.running {
		kids = append(kids, c)
	}
	e.mu.Unlock()
	for _, c := range kids {
		c.kill()
	}
	e.runs.Wait()
	e.starts.Wait()
	e.spawn.stop()
	if c, ok := e.iso.(interface{ close() }); ok {
		c.close() // the landlock strategy's descriptors and directories
	}
	e.rootH.Close()
	e.rootDir.Close()
	e.devNull.Close()
	if e.cgroups != nil {
		e.cgroups.close()
	}
	if e.reaper {
		releaseReaper()
	}
	return nil
}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// pump copies r into w until EOF, a write error, or a read deadline, and
// then tells w (an OutputEnder) that the stream ended. Once
// exited is set (the shell is gone and its group killed), every read must
// come within ioGrace of the last write: the deadline moves with progress,
// so a slow consumer (an SSH client not reading) still gets everything,
// while a pipe held open by a process that escaped the group is cut.
func pump(w io.Writer, r *os.File, exited *atomic.Bool, wg *sync.WaitGroup) {
	defer wg.Done()
	if e, ok := w.(OutputEnder); ok {
		defer e.OutputEnded()
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if exited.Load() {
				_ = r.SetReadDeadline(time.Now().Add(ioGrace))
			}
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				drainBuffered(w, r, buf)
			}
			return
		}
	}
}

// drainBuffered copies what the kernel already holds for r, without waiting
// for more. A deadline that expires before this goroutine gets to run (a
// loaded machine, with the race detector, can delay it past ioGrace) fails
// the read even when output is waiting, and that output would be lost.
// Only a non-blocking descriptor is read (pipes and the pty master are, as
// Go's poller opens them); a blocking one could wait for ever. At most
// maxDrain bytes are taken: a pipe holds 64 KiB (1 MiB at the most the
// kernel allows by default), and a process that escaped the group and keeps
// writing must not keep us here.
func drainBuffered(w io.Writer, r *os.File, buf []byte) {
	sc, err := r.SyscallConn()
	if err != nil {
		return
	}
	for left := maxDrain; left > 0; {
		n := 0
		var rerr error
		if sc.Control(func(fd uintptr) {
			fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
			if err != nil || fl&unix.O_NONBLOCK == 0 {
				rerr = unix.EAGAIN
				return
			}
			for {
				n, rerr = unix.Read(int(fd), buf)
				if rerr != unix.EINTR {
					return
				}
			}
		}) != nil || rerr != nil || n <= 0 {
			return
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return
		}
		left -= n
	}
}

// maxDrain bounds drainBuffered.
const maxDrain = 2 << 20

// Run runs req to completion, as os/exec's Run is Start and Wait: the same
// launch and finish steps as Start and process.Wait (run.go), with the
// output collected (head and tail up to the limit) and the executor's
// default timeout. The process tree is killed when the timeout expires
// (Result.TimedOut, with the output so far), when ctx is done (the Result
// is returned with ctx's error), or when Close is called; and in any case
// once the shell has exited, so a background job cannot outlive its
// command (as under bwrap, where the pid namespace ends with the shell).
func (e *executor) Run(ctx context.Context, req Request) (Result, error) {
	if req.Overlay != nil {
		if err := e.overlayOK(req.Overlay); err != nil {
			return Result{}, withCommand(err, req.Command)
		}
	}
	wd, parsed, err := e.prepare(&req, false)
	if err != nil {
		return Result{}, withCommand(err, req.Command)
	}
	defer wd.close()
	if err := ctx.Err(); err != nil {
		return Result{}, &errcode.Error{Code: errcode.ExecError, Op: "exec", Command: req.Command, Msg: "canceled before start", Err: err}
	}
	env, err := e.env(wd.dir, req.Env, "")
	if err != nil {
		return Result{}, withCommand(err, req.Command)
	}
	if err := e.acquire(req.Command); err != nil {
		return Result{}, err
	}
	defer e.release()
	limit := req.OutputLimit
	if limit <= 0 {
		limit = e.limit
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = e.timeout
	}

	var hov *hostOverlay
	var sp *spawner // the in-place overlay's own spawner (nil: the executor's)
	if req.Overlay != nil && os.Geteuid() == 0 && e.cred == nil && !overlayByTrampoline {
		switch sp, hov, err = privateOverlay(req.Overlay, wd); {
		case errors.Is(err, errNoMountHere):
			hov = nil // the trampoline makes a namespace where it may
		case err != nil:
			return Result{}, withCommand(err, req.Command)
		default:
			// After the command was waited for (finish, below): the
			// thread ends, and with it and bwrap the namespace.
			defer sp.stop()
			defer sp.onThread(func() error { hov.unmount(); return nil })
			if e.abstractScoped {
				// The thread forks bwrap as the executor's threads do:
				// in the domain that scopes abstract unix sockets.
				if err := sp.onThread(enterAbstractScope); err != nil {
					return Result{}, execError(req.Command, fmt.Errorf("the transaction's thread cannot scope abstract unix sockets: %w", err))
				}
			}
		}
	}
	cmd, direct := e.command(req.Command, parsed, wd, env, false)
	var ov *overlayRun
	if req.Overlay != nil && hov == nil {
		// Through the shell: a direct start's retry would build a bwrap
		// command of its own, without the overlay.
		cmd, direct = e.shellCommand(req.Command, wd, env, false), false
		if ov, err = e.wrapOverlay(cmd, req.Overlay, wd.boundary); err != nil {
			return Result{}, execError(req.Command, err)
		}
		defer ov.ours.Close()
	}
	// Our read ends stay bare descriptors: collect polls them itself.
	outR, outW, err := rawPipe()
	if err != nil {
		if ov != nil {
			ov.theirs.Close()
		}
		return Result{}, execError(req.Command, err)
	}
	readers, childEnds := []int{outR}, []*os.File{outW}
	closeReaders := func() {
		for _, fd := range readers {
			unix.Close(fd)
		}
	}
	if ov != nil {
		childEnds = append(childEnds, ov.theirs)
	}
	cmd.Stdout, cmd.Stderr = outW, outW
	if !req.MergeStderr {
		errR, errW, err := rawPipe()
		if err != nil {
			closeReaders()
			for _, f := range childEnds {
				f.Close()
			}
			return Result{}, execError(req.Command, err)
		}
		cmd.Stderr = errW
		readers, childEnds = append(readers, errR), append(childEnds, errW)
	}
	if req.Stdin != nil {
		cmd.Stdin = req.Stdin
		cmd.WaitDelay = ioGrace
	} else {
		cmd.Stdin = e.devNull
	}
	r := &launched{c: &child{cmd: cmd, ownsTree: e.iso.ownsTree()}}
	e.runs.Add(1)
	defer e.runs.Done()
	stdout, stderr := newHeadTail(limit), newHeadTail(limit)
	outs := []io.Writer{stdout, stderr}[:len(readers)]
	if req.OnOutput != nil {
		outs[0] = teeOutput{stdout, "stdout", req.OnOutput}
		if len(outs) > 1 {
			outs[1] = teeOutput{stderr, "stderr", req.OnOutput}
		}
	}
	begin := time.Now()
	if err := e.launch(ctx, r, launchSpec{direct: direct, script: req.Command, wd: wd, env: env,
		childEnds: childEnds, timeout: timeout, spawn: sp}); err != nil {
		closeReaders()
		return Result{}, err
	}
	werr := r.collect(readers, outs)
	e.untrack(r.c)

	cmd = r.c.cmd
	res := Result{Duration: time.Since(begin), TimedOut: r.c.timedOut.Load()}
	res.Stdout, res.StdoutSize = stdout.bytes()
	res.Stderr, res.StderrSize = stderr.bytes()
	res.ExitCode, res.Signal = e.exitStatus(cmd.ProcessState)
	if werr != nil && cmd.ProcessState == nil {
		return res, execError(req.Command, werr)
	}
	if hov != nil {
		res.Upper = hov.take()
	}
	if ov != nil {
		if res.Upper, err = ov.receive(); err != nil {
			return res, &errcode.Error{Code: errcode.NotImplemented, Op: "exec", Command: req.Command, Msg: err.Error()}
		}
	}
	if ctx.Err() != nil && !res.TimedOut && r.c.killed.Load() {
		if res.Upper != nil {
			res.Upper.Close()
			res.Upper = nil
		}
		return res, &errcode.Error{Code: errcode.ExecError, Op: "exec", Command: req.Command, Msg: "canceled", Err: ctx.Err()}
	}
	return res, nil
}

// teeOutput collects into w and tells on each chunk.
type teeOutput struct {
	w      io.Writer
	stream string
	on     func(string, []byte)
}

func (t teeOutput) Write(p []byte) (int, error) {
	t.on(t.stream, p)
	return t.w.Write(p)
}

func execError(command string, err error) error {
	return &errcode.Error{Code: errcode.ExecError, Op: "exec", Command: command, Msg: "cannot start: " + err.Error(), Err: err}
}

// exitStatus maps a wait status to an exit code (128+n for signal n, as
// shells report it) and the signal's SSH name. Under bwrap only bwrap's own
// death (timeout, cancel, Close) is seen as a signal: bwrap reports its
// command's death by signal n as a plain exit status 128+n, which cannot be
// told apart from `exit 128+n`, so no signal name is guessed for it.
func (e *executor) exitStatus(ps *os.ProcessState) (int, string) {
	if ps == nil {
		return -1, ""
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok {
		return ps.ExitCode(), ""
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal()), signalName(ws.Signal())
	}
	return ws.ExitStatus(), ""
}

// errorsAs is errors.As for the few places that need the typed error.
func errorsAs(err error) (*errcode.Error, bool) {
	var e *errcode.Error
	ok := errors.As(err, &e)
	return e, ok
}

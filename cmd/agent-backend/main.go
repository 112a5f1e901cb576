// Command agent-backend is the agentbe daemon: it serves one workspace to AI
// agents over MCP (HTTP or stdio), the REST and /gateway tool faces, and SSH
// (over WebSocket at /ssh and, with --ssh-listen, on a port of its own). It
// is a drop-in replacement for the reference daemon of the npm package
// agent-backend.
//
// The serving itself is the daemon package's. This command parses the
// command line into a config.Config (flags, AGENTBE_* variables, config
// file), validates it (--check-config prints it), and runs the process's
// lifecycle around daemon.Daemon: the landlock mode's trampoline first
// (sandboxexec.Main), then inherited descriptors marked close-on-exec
// before anything else, GOMAXPROCS (--max-procs), the workspace root created
// if missing, a warning when serving without a token on a non-loopback
// address, SIGINT/SIGTERM for a graceful shutdown (a second one exits at
// once) and SIGHUP, which reloads the TLS certificate, the SSH port's key
// files and the token files (--auth-token-file, --operator-token-file,
// --metrics-token-file, --tokens) and reopens the audit log. It also has
// the version, health, proxy, site serve and ext (test, check, serve)
// subcommands (health.go, proxy.go, site.go, ext.go, extserve.go) and
// answers the reference's flags and commands it does not take with what to
// use instead (compat.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/daemon"
	"github.com/agentbe/agentbe-daemon/internal/cpuburst"
	"github.com/agentbe/agentbe-daemon/internal/suggest"
	"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"
)

// version is stamped at build time with -ldflags "-X main.version=X.Y.Z"; a
// leading "v" (as in a git tag) is accepted and not doubled. Unstamped, the
// module version of the build info is used, so `go install ...@vX` reports
// vX.
var version = devVersion

// stampedCommit and stampedDate are set by release builds with -X
// main.stampedCommit=... -X main.stampedDate=... (.goreleaser.yaml); other
// builds take both from Go's build info.
var stampedCommit, stampedDate string

const devVersion = "0.1.0-dev"

func init() {
	if bi, ok := debug.ReadBuildInfo(); ok && version == devVersion {
		if v := bi.Main.Version; strings.HasPrefix(v, "v") && v != "(devel)" {
			version = v
		}
	}
	version = strings.TrimPrefix(version, "v")
}

// buildDetails is the commit, its time and whether the tree was modified,
// and the Go version, from the build info (empty when unknown).
func buildDetails() (commit, when, goVersion string) {
	if stampedCommit != "" {
		// A release build (.goreleaser.yaml) says so itself.
		c := stampedCommit
		if len(c) > 12 {
			c = c[:12]
		}
		return c, stampedDate, runtime.Version()
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", "", ""
	}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit != "" && modified {
		commit += " (modified)"
	}
	return commit, when, bi.GoVersion
}

// exitError carries an exit code through cobra without printing twice.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	// The landlock mode's trampoline (`agent-backend sandbox-exec`, which
	// the daemon starts for each of that mode's commands) before anything
	// else: it runs and execs the command, or returns at once.
	sandboxexec.Main()
	// Then, before anything opens a file: descriptors inherited from the
	// launcher must not reach commands.
	if err := daemon.MarkInheritedCloseOnExec(); err != nil {
		fmt.Fprintln(os.Stderr, "agent-backend: marking inherited descriptors close-on-exec:", err)
		os.Exit(1)
	}
	err := newRootCommand(os.Stdin, os.Stdout, os.Stderr).Execute()
	var ee exitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.code)
	case err != nil:
		fmt.Fprintln(os.Stderr, "agent-backend:", shown(err.Error(), true))
		os.Exit(1)
	}
}

func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "agent-backend",
		Short: "Serve a workspace to AI agents over MCP and SSH-over-WebSocket",
		Long: `agent-backend serves one workspace directory to AI agents:
  POST /mcp   MCP tools (read, write, edit, list, tree, search, grep, info, move, mkdir, exec)
  GET  /ssh   SSH over WebSocket (SFTP, exec, pty) for the client libraries' remote backend
  GET  /health, /metrics
or MCP over stdin/stdout with --local-only.

The form "agent-backend --backend memory --rootDir X" (used by the memory
backend of the npm client) serves an in-memory workspace over stdio.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("backend") && !cmd.Flags().Changed("root") {
				return cmd.Help()
			}
			// The memory backend's spawn: stdio unless asked otherwise.
			if !cmd.Flags().Changed("local-only") {
				if isTerminal(stdin) {
					// A person typed this, not a client spawning it:
					// MCP on their terminal would look like a hang.
					fmt.Fprintln(stderr, missingSubcommandHint)
					return exitError{code: 2}
				}
				_ = cmd.Flags().Set("local-only", "true")
			}
			return runDaemon(cmd, stdin, stdout, stderr)
		},
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("agent-backend v{{.Version}}\n")
	root.SetFlagErrorFunc(flagError)
	config.RegisterFlags(root.Flags())
	root.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "backend" && f.Name != "root" {
			f.Hidden = true // documented under "daemon"
		}
	})
	root.Flags().BoolP("version", "v", false, "print the version and exit")

	root.AddCommand(newDaemonCommand(stdin, stdout, stderr), newSiteCommand(stdout, stderr), newExtCommand(stdout, stderr), newVersionCommand(), newHealthCommand(), newProxyCommand())
	root.AddCommand(newDockerCommands()...)
	return root
}

// missingSubcommandHint is printed when the no-subcommand form (the npm
// client's spawn, MCP over stdio) is run with a terminal on stdin.
const missingSubcommandHint = `agent-backend: no command given. Without one, this serves MCP over stdin/stdout for a client that spawns it (as the npm client does), and stdin is a terminal.
  to serve a workspace over HTTP:  agent-backend daemon --root DIR
  to speak MCP on this terminal:   add --local-only
  see:                             agent-backend --help`

// isTerminal reports whether r is a terminal (stdin typed at, not a pipe).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// flagError adds the command's usage hint to a flag parsing error and, for
// an unknown --flag, the flag it probably meant (internal/suggest, as the
// config file's keys and the upstreams file's keys get).
func flagError(cmd *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if errors.As(err, &ne) && ne.GetSpecifiedName() != "" {
		var names []string
		flag := map[string]string{} // a name or alias → the flag to name
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && f.Deprecated == "" {
				names = append(names, f.Name)
				flag[f.Name] = f.Name
			}
		})
		aliases := config.FlagAliases()
		for _, alias := range slices.Sorted(maps.Keys(aliases)) {
			if key := aliases[alias]; flag[key] != "" {
				names = append(names, alias)
				flag[alias] = key
			}
		}
		if s := suggest.Closest(ne.GetSpecifiedName(), names); s != "" {
			return fmt.Errorf("%v; did you mean --%s? (see '%s --help')", err, flag[s], cmd.CommandPath())
		}
	}
	return fmt.Errorf("%v (see '%s --help')", err, cmd.CommandPath())
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, and the commit, build time and Go version it was built from",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "agent-backend v%s\n", version)
			commit, when, gover := buildDetails()
			if commit != "" {
				fmt.Fprintf(out, "commit: %s\n", commit)
			}
			if when != "" {
				fmt.Fprintf(out, "built: %s\n", when)
			}
			if gover != "" {
				fmt.Fprintf(out, "go: %s\n", gover)
			}
		},
	}
}

func newDaemonCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "daemon --root DIR [flags]",
		Short: "Serve a workspace (HTTP on --bind:--port, or stdio with --local-only)",
		Long: `Serve the workspace at --root.

Settings come from flags, then AGENTBE_* environment variables (each flag's
variable is shown in brackets), then --config FILE (YAML, TOML or JSON with the
flag names as keys), then the defaults shown. Listening on a non-loopback
--bind requires an auth token.`,
		Example: `  agent-backend daemon --root /srv/workspace
  agent-backend daemon --root /srv/workspace --bind 0.0.0.0 --auth-token-file /run/secrets/token
  agent-backend daemon --rootDir /srv/workspace --local-only --isolation bwrap
  agent-backend daemon --config /etc/agentbe/config.yaml --check-config`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDaemon(cmd, stdin, stdout, stderr)
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	cmd.SetUsageFunc(sectionedUsage) // the flags in sections (help.go)
	config.RegisterFlags(cmd.Flags())
	cmd.Flags().Bool("check-config", false, "validate the configuration, print it (token redacted) and exit 0, or exit 1 with the error")
	addUnsupportedFlags(cmd)
	return cmd
}

func runDaemon(cmd *cobra.Command, stdin io.Reader, stdout, stderr io.Writer) error {
	// SIGHUP is taken first thing: Go's default for a SIGHUP no channel
	// takes is to end the process, and the port is bound, and a
	// logrotate or cert-renewal hook may send one, long before the
	// daemon has started. One that arrives before the daemon is made
	// waits in hupc and is a reload once it is (the loop below). Never
	// stopped: a SIGHUP while shutting down, or between runDaemon's
	// return and the exit, is taken and dropped, not the process's end.
	hupc := make(chan os.Signal, 1)
	signal.Notify(hupc, syscall.SIGHUP)
	if err := checkUnsupportedFlags(cmd); err != nil {
		return err
	}
	cfg, err := config.Load(cmd.Flags(), os.LookupEnv)
	if err == nil {
		err = cfg.Validate()
	}
	if check, _ := cmd.Flags().GetBool("check-config"); check {
		if err != nil {
			fmt.Fprintln(stderr, "agent-backend: invalid configuration:", shown(err.Error(), true))
			return exitError{1}
		}
		if errs := append(cfg.Preflight(), daemon.Check(cfg)...); len(errs) > 0 {
			for _, e := range errs {
				fmt.Fprintln(stderr, "agent-backend: invalid configuration:", shown(e.Error(), true))
			}
			return exitError{1}
		}
		fmt.Fprint(stdout, cfg.Format())
		return nil
	}
	if err != nil {
		return err
	}

	// Bind first: a port that is taken or needs privileges is then the
	// first and only line (config.ListenError's), not one after the
	// start-up log and the providers' start.
	var lns daemon.Listeners
	if !cfg.LocalOnly {
		if lns, err = daemon.Listen(cfg); err != nil {
			return err
		}
		defer lns.Close()
	}

	log := daemon.NewLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	_, envProcs := os.LookupEnv("GOMAXPROCS")
	goDefault := runtime.GOMAXPROCS(0)
	procs, why := cfg.Procs(goDefault, envProcs)
	runtime.GOMAXPROCS(procs)
	cpuburst.SetCeiling(cfg.BurstProcs(goDefault, envProcs))
	log.Info("CPUs for the daemon's own work", "gomaxprocs", procs, "why", why,
		"checkpoint_walks", max(procs, cpuburst.Ceiling()))
	if soft := daemon.ApplyMemoryLimit(); soft > 0 {
		log.Info("memory: soft limit for the Go runtime at 90% of the cgroup's (set GOMEMLIMIT to choose another)", "bytes", soft)
	}
	percent, fromEnv := daemon.ApplyGCPercent()
	gogc, why := strconv.Itoa(percent), "the daemon's default (set GOGC to choose another)"
	if percent < 0 {
		gogc = "off"
	}
	if fromEnv {
		why = "GOGC in the environment"
	}
	log.Info("memory: GC target", "gogc", gogc, "why", why)
	if created, err := cfg.EnsureRoot(); err != nil {
		return err
	} else if created {
		log.Info("created the workspace root, which did not exist", "root", cfg.Root)
	}
	if cfg.InsecureNoAuth && !cfg.HasAuth() && !cfg.IsLoopback() && !cfg.LocalOnly {
		log.Warn("SERVING WITHOUT AUTHENTICATION on a non-loopback address: anyone who can reach this port can read, write and run commands in the workspace",
			"bind", cfg.Bind, "port", cfg.Port)
	}

	logStateFiles(log, cfg)
	warnRootCommands(log, cfg, os.Geteuid())
	warnRunAsCannotWrite(log, cfg)

	// The start-up line telling how to connect names the token's file or
	// variable, never its value; on a terminal it is also a plain block.
	var term io.Writer
	if f, ok := stderr.(*os.File); ok && cfg.LogFormat != "json" && isTerminal(f) {
		term = stderr
	}
	d, err := daemon.New(cfg, daemon.Options{Logger: log, Version: version,
		Notifier: daemon.NotifierFromEnv(os.Getenv, os.Getpid()), SSHListener: lns.SSH,
		TokenRef: cfg.TokenRef(os.LookupEnv), Terminal: term})
	if err != nil {
		return err
	}
	defer d.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigc)
	// The reloads run one at a time, a SIGHUP that arrives during one
	// making one more after it (hupc holds one: many coalesce into it).
	// They go on while the daemon drains after SIGTERM (a token rotated
	// then still ends its connections) and stop before d.Close, which
	// runs after this deferred stop: no reload runs while the parts
	// close, unless one is stuck on a file (a hung network mount) for
	// longer than --shutdown-timeout, which the close does not wait out.
	stopReloads, reloadsDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(reloadsDone)
		for {
			select {
			case <-hupc:
				reload(d, cfg, log)
			case <-stopReloads:
				return
			}
		}
	}()
	defer func() {
		close(stopReloads)
		select {
		case <-reloadsDone:
		case <-time.After(cfg.ShutdownTimeout):
		}
	}()
	go func() {
		sig, ok := <-sigc
		if !ok {
			return
		}
		log.Info("signal received; shutting down gracefully (send it again to exit at once)", "signal", sig.String())
		cancel()
		if sig, ok = <-sigc; ok {
			log.Warn("second signal; exiting now", "signal", sig.String())
			os.Exit(130)
		}
	}()

	if cfg.LocalOnly {
		return d.ServeStdio(ctx, stdin, stdout)
	}
	return d.Serve(ctx, lns.HTTP)
}

// reload is one SIGHUP's work, each step whatever the one before did: the
// TLS pair, the SSH port's files, the credentials, the audit log. Each
// logs its own outcome, a failure naming the file and why (never a
// token).
func reload(d *daemon.Daemon, cfg config.Config, log *slog.Logger) {
	if err := d.ReloadTLS(); err != nil {
		log.Error("SIGHUP: TLS reload failed; still serving the previous certificate", "err", err)
	} else if cfg.TLSCert != "" {
		log.Info("SIGHUP: TLS certificate reloaded", "cert", cfg.TLSCert)
	}
	if err := d.ReloadSSHKeys(); err != nil {
		log.Error("SIGHUP: an SSH port file does not load; nothing it vouched for is admitted until it does", "err", err)
	}
	if r, err := d.ReloadTokens(); err != nil {
		log.Error("SIGHUP: reloading the tokens failed; the previous tokens stay in force", "err", err)
	} else {
		if cfg.TokensFile != "" {
			log.Info("SIGHUP: token file reloaded", "file", cfg.TokensFile, "tokens", r.Tokens)
		}
		if len(r.Rotated) > 0 {
			log.Info("SIGHUP: new tokens in force; the old ones admit no one", "files", strings.Join(r.Rotated, " "), "connections_closed", r.Ended)
		}
	}
	if err := d.ReopenAuditLog(); err != nil {
		log.Error("SIGHUP: reopening the audit log failed; still writing the previous file", "err", err)
	} else if cfg.AuditLog != "" && cfg.AuditLog != "-" {
		log.Info("SIGHUP: audit log reopened", "path", cfg.AuditLog)
	}
}

package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/daemon"
	"github.com/agentbe/agentbe-daemon/face/mcphttp"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/extensions"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// extServeName is the MCP serverInfo name of `extensions serve`: a client
// (Claude Desktop, Zed) shows it, and it tells this server apart from the
// daemon's (local-filesystem).
const extServeName = "agent-backend-extensions"

// extServeLong is `extensions serve --help`: what it serves, where the
// extensions' commands run, and the client configurations.
const extServeLong = `Serve the tools of the Starlark extensions in a directory (default
./extensions) over MCP on stdin and stdout, and nothing else: no workspace
tools, no HTTP port, no token. This is how an MCP client that starts its
servers itself (Claude Desktop, Zed) uses a folder of starlark-mcp
extensions. Tools keep their own names (get_cat_fact); --prefix names them
extension__tool as the daemon's --extensions does. The server calls itself
"` + extServeName + `" in the MCP initialize result (serverInfo), with this
binary's version. Files are reloaded when they change, and the client is told
(notifications/tools/list_changed).

An extension that does not load stops the start with its error (file:line);
--skip-broken serves the others instead, and 'agent-backend ext check DIR'
reports every error at once.

Where the extensions work: the fs module and the sqlite module's files are
confined to --root, and every command the exec module runs (only the
programs an extension lists in allowed_exec) is judged by the command policy
and runs through the sandbox with --root as its working directory. Without
--root they work in a new empty temporary directory, removed when the server
ends: give --root for the files they should see. The extensions directory
must not lie inside --root (as for the daemon: a tool that writes there could
add an extension that allows any program). Commands have the network (no
port is served that they could misuse; --exec-network=false takes it away). --isolation picks the sandbox: auto
(the default) takes bwrap if it works here, else landlock if the kernel has
it, else software; the mode chosen, and what it does not cover, is logged on
stderr. http and postgres reach the network through the daemon's network door,
with its defaults (public addresses, ports 80 and 443; 5432 for postgres)
unless the --net-allow-* flags widen it; env.get reads what an extension
declares and what --extensions-env allows.

The flags below are the daemon's settings that apply here, with the same
AGENTBE_* variables, --config file keys, defaults and checks ('agent-backend
daemon --help'); the daemon's others (ports, tokens, other tools) do not apply.

Logs go to stderr (MCP clients keep them: Claude Desktop in its mcp*.log
files, Zed in its log). Standard input reaching its end, SIGINT or SIGTERM
end the server with status 0.

Claude Desktop (claude_desktop_config.json):

  {
    "mcpServers": {
      "extensions": {
        "command": "/usr/local/bin/agent-backend",
        "args": ["extensions", "serve", "-e", "/home/you/extensions", "--root", "/home/you/project",
                 "--extensions-env", "MY_API_KEY"],
        "env": {"MY_API_KEY": "your-api-key-here"}
      }
    }
  }

Zed (settings.json):

  {
    "context_servers": {
      "extensions": {
        "command": "/usr/local/bin/agent-backend",
        "args": ["extensions", "serve", "-e", "/home/you/extensions", "--root", "/home/you/project",
                 "--extensions-env", "MY_API_KEY"],
        "env": {"MY_API_KEY": "your-api-key-here"}
      }
    }
  }

Use absolute paths: a client starts its servers in a directory of its own
choosing. "ext" is the same command group: 'agent-backend ext serve' works too.`

// extServeSettings are the daemon's settings `extensions serve` takes, with
// their flags, AGENTBE_* variables, config file keys, defaults and checks
// (config): where and how the extensions' commands run, the network door's
// rules, what the extensions may read, the call limits, and logging. The
// daemon's other settings (ports, tokens, other providers) are not flags
// here; the server has no port and no other provider.
var extServeSettings = []string{"extensions", "root", "isolation", "isolation-min", "shell", "run-as", "block-dangerous",
	"allow-commands", "exec-network", "exec-timeout", "exec-output-limit", "exec-max-processes", "exec-max-file-size",
	"exec-max-cpu", "exec-max-memory", "exec-max-concurrent", "max-read-size", "max-concurrent-executions", "tool-queue-wait",
	"tool-timeout", "max-stdio-line-bytes", "net-allow-hosts", "net-allow-private", "net-allow-cidrs", "net-allow-ports", "extensions-env",
	"extensions-db-hosts", "log-format", "log-level", config.ConfigFlag}

// extServeDefaultDir is the extensions directory when none is given, as
// starlark-mcp's.
const extServeDefaultDir = "./extensions"

func newExtServeCommand() *cobra.Command {
	var prefix, skipBroken, showVersion bool
	cmd := &cobra.Command{
		Use:   "serve [-e DIR] [--root DIR]",
		Short: "Serve only the extensions' tools over MCP on stdio, as starlark-mcp does (for Claude Desktop, Zed)",
		Long:  extServeLong,
		Example: `  agent-backend extensions serve
  agent-backend extensions serve -e ~/extensions --root ~/project
  agent-backend extensions serve -e ./extensions --prefix --isolation software`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if showVersion {
				fmt.Fprintf(cmd.OutOrStdout(), "%s v%s\n", extServeName, version)
				return nil
			}
			return serveExtensions(cmd, prefix, skipBroken)
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	f := cmd.Flags()
	daemonFlags := pflag.NewFlagSet("daemon", pflag.ContinueOnError)
	config.RegisterFlags(daemonFlags)
	normalize := daemonFlags.GetNormalizeFunc()
	f.SetNormalizeFunc(func(fs *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "extensions-dir" { // starlark-mcp's name
			name = "extensions"
		}
		return normalize(fs, name)
	})
	for _, name := range extServeSettings {
		fl := daemonFlags.Lookup(name)
		if fl == nil {
			panic("extensions serve: no daemon setting " + name)
		}
		// What the flag means here, with the variables config reads for it.
		env := fl.Usage[strings.LastIndex(fl.Usage, " [env "):]
		switch name {
		case "extensions":
			fl.Shorthand, fl.DefValue = "e", extServeDefaultDir
			fl.Usage = "the directory of *.star extensions (not *_test.star) (alias --extensions-dir, starlark-mcp's name)" + env
		case "root":
			fl.Usage = "the workspace the extensions' fs, sqlite and exec calls work in, created (0755) if missing; without it a new empty temporary directory, removed at exit (alias --rootDir)" + env
		}
		f.AddFlag(fl)
	}
	f.BoolVar(&prefix, "prefix", false, "name tools extension__tool, as the daemon's --extensions does, instead of their own names")
	f.BoolVar(&skipBroken, "skip-broken", false, "serve the extensions that load when some do not (each failure is logged), instead of refusing to start")
	f.BoolVarP(&showVersion, "version", "v", false, "print the server's name and version (its MCP serverInfo) and exit")
	return cmd
}

// serveExtensions builds the extensions-only server: the workspace at
// --root, the sandbox over it, one registry holding only the extensions
// provider, and the MCP face's stdio server over that registry. The
// settings come as the daemon's do (flags, AGENTBE_* variables, --config,
// the defaults), and the server is the daemon's with --local-only: no port.
func serveExtensions(cmd *cobra.Command, prefix, skipBroken bool) error {
	cfg, err := config.Load(cmd.Flags(), os.LookupEnv)
	if err != nil {
		return err
	}
	cfg.LocalOnly = true // stdio: no port, so no token is needed and commands may have the network
	if cfg.Extensions == "" {
		cfg.Extensions = extServeDefaultDir
	}
	dir := cfg.Extensions // as the user wrote it, for the errors
	// SIGINT and SIGTERM end the serving from here on, so one that
	// arrives while it starts (a client that gives up at once) still
	// removes the scratch workspace rather than killing the process.
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	scratch := cfg.Root == ""
	if scratch {
		// A scratch workspace: the extensions' commands get a working
		// directory, and nothing of the user's is in reach.
		tmp, err := os.MkdirTemp("", "agentbe-extensions-")
		if err != nil {
			return fmt.Errorf("--root not given, and a temporary workspace cannot be made: %w", err)
		}
		defer os.RemoveAll(tmp)
		cfg.Root = tmp
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if _, err := cfg.EnsureRoot(); err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	log := daemon.NewLogger(stderr, cfg.LogFormat, cfg.LogLevel)

	ws, err := fsops.NewDir(cfg.Root, fsops.Options{MaxReadSize: cfg.MaxReadSize})
	if err != nil {
		return fmt.Errorf("--root %q: %w", cfg.Root, err)
	}
	defer ws.Close()
	// Read once: extensions serve is not reloaded.
	secrets := clip.NewSecrets(cfg.Secrets()...)
	ecfg, err := daemon.SandboxConfig(cfg, ws.Root(), secrets, log.With("component", "sandbox"))
	if err != nil {
		return err
	}
	exe, err := sandbox.New(ecfg)
	if err != nil {
		return fmt.Errorf("--isolation %s: %w", cfg.Isolation, err)
	}
	defer exe.Close()
	log.Info("command isolation", "mode", exe.Mode(), "reason", exe.Reason(), "gaps", strings.Join(exe.Gaps(), "; "))

	reg := registry.New(registry.Options{MaxConcurrent: cfg.MaxConcurrentCalls, QueueWait: cfg.ToolQueueWait,
		DefaultTimeout: cfg.ToolTimeout, Logger: log.With("component", "registry")})
	// The provider as the daemon starts it, with the tools' own names.
	eo := daemon.ExtensionsOptions(cfg, secrets)
	eo.Registry, eo.Workspace, eo.Executor, eo.Logger = reg, ws, exe, log.With("component", "extensions")
	eo.BareNames = !prefix
	p, err := extensions.Start(eo)
	if err != nil {
		return fmt.Errorf("--extensions %q: %w", dir, err)
	}
	defer p.Close()
	var broken []string
	loaded := 0
	for _, h := range p.Health() {
		if h.LastError != "" {
			broken = append(broken, h.LastError)
		} else {
			loaded++
		}
	}
	if len(broken) > 0 && !skipBroken {
		return fmt.Errorf("--extensions %q: %s (check them all with 'agent-backend ext check %s', or pass --skip-broken to serve the others)",
			dir, strings.Join(broken, "; "), dir)
	}
	names := make([]string, 0)
	for _, t := range reg.List() {
		names = append(names, t.Name)
	}
	if loaded == 0 {
		log.Warn("no extension loaded yet; serving none until a *.star file appears", "dir", cfg.Extensions)
	}

	s, err := mcphttp.New(mcphttp.Options{Workspace: ws, Registry: reg, RootDir: cfg.Root,
		MaxBodyBytes: cfg.MaxBodyBytes, MaxStdioLineBytes: cfg.MaxStdioLineBytes, MaxBatch: cfg.MaxBatch, MaxReplyBytes: cfg.MaxReplyBytes,
		Name: extServeName, Version: version,
		Instructions: "The tools are those of the Starlark extensions in " + cfg.Extensions + "; their files and commands work in the workspace " + cfg.Root + ".",
		Logger:       log.With("component", "mcp")})
	if err != nil {
		return err
	}
	defer s.Close()
	log.Info("serving the extensions over MCP on stdin and stdout", "dir", cfg.Extensions, "root", ws.Root(), "tools", strings.Join(names, ","))

	err = s.ServeStdio(ctx, cmd.InOrStdin(), cmd.OutOrStdout())
	if ctx.Err() != nil || errors.Is(err, mcphttp.ErrClosed) {
		log.Info("shutting down")
		return nil
	}
	return err
}

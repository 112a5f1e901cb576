package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/daemon"
	"github.com/agentbe/agentbe-daemon/face/mcphttp"
	"github.com/agentbe/agentbe-daemon/fsops"
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
port is served that they could misuse). --isolation picks the sandbox: auto
(the default) takes bwrap if it works here, else landlock if the kernel has
it, else software; the mode chosen, and what it does not cover, is logged on
stderr. http and postgres reach the network through the daemon's network door,
with its defaults (public addresses, ports 80 and 443; 5432 for postgres).

Logs go to stderr (MCP clients keep them: Claude Desktop in its mcp*.log
files, Zed in its log). Standard input reaching its end, SIGINT or SIGTERM
end the server with status 0.

Claude Desktop (claude_desktop_config.json):

  {
    "mcpServers": {
      "extensions": {
        "command": "/usr/local/bin/agent-backend",
        "args": ["extensions", "serve", "-e", "/home/you/extensions", "--root", "/home/you/project"],
        "env": {"MY_API_KEY": "your-api-key-here"}
      }
    }
  }

Zed (settings.json):

  {
    "context_servers": {
      "extensions": {
        "command": "/usr/local/bin/agent-backend",
        "args": ["extensions", "serve", "-e", "/home/you/extensions", "--root", "/home/you/project"],
        "env": {"MY_API_KEY": "your-api-key-here"}
      }
    }
  }

Use absolute paths: a client starts its servers in a directory of its own
choosing. "ext" is the same command group: 'agent-backend ext serve' works too.`

// extServeOptions are the flags of `extensions serve`.
type extServeOptions struct {
	dir, root, isolation, logLevel string
	prefix, skipBroken             bool
}

func newExtServeCommand() *cobra.Command {
	var o extServeOptions
	var showVersion bool
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
			return serveExtensions(cmd, o)
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	f := cmd.Flags()
	f.StringVarP(&o.dir, "extensions", "e", "./extensions", "the directory of *.star extensions (not *_test.star)")
	f.StringVar(&o.dir, "extensions-dir", "./extensions", "alias of --extensions (starlark-mcp's name)")
	f.StringVar(&o.root, "root", "", "the workspace the extensions' fs, sqlite and exec calls work in (default: a new empty temporary directory, removed at exit); must not hold the extensions directory")
	f.StringVar(&o.isolation, "isolation", "auto", "how the exec module's commands run: auto (bwrap if it works, else landlock if the kernel has it, else software), bwrap, landlock, software, none")
	f.BoolVar(&o.prefix, "prefix", false, "name tools extension__tool, as the daemon's --extensions does, instead of their own names")
	f.BoolVar(&o.skipBroken, "skip-broken", false, "serve the extensions that load when some do not (each failure is logged), instead of refusing to start")
	f.StringVar(&o.logLevel, "log-level", "info", "what reaches stderr: debug, info, warn, error")
	f.BoolVarP(&showVersion, "version", "v", false, "print the server's name and version (its MCP serverInfo) and exit")
	return cmd
}

// serveExtensions builds the extensions-only server: the workspace at
// --root, the sandbox over it, one registry holding only the extensions
// provider, and the MCP face's stdio server over that registry. Every value
// not on the command line is the daemon's default (config.Default), so the
// limits are the daemon's.
func serveExtensions(cmd *cobra.Command, o extServeOptions) error {
	switch o.logLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("--log-level %q: use debug, info, warn or error", o.logLevel)
	}
	mode, err := sandbox.ParseMode(o.isolation)
	if err != nil {
		return fmt.Errorf("--isolation: %w", err)
	}
	cfg := config.Default()
	cfg.LocalOnly = true // stdio: no port, so no token is needed and commands may have the network
	cfg.Isolation = o.isolation
	cfg.Extensions = o.dir
	cfg.Root = o.root
	if cfg.Root == "" {
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
	stderr := cmd.ErrOrStderr()
	log := daemon.NewLogger(stderr, "text", o.logLevel)

	ws, err := fsops.NewDir(cfg.Root, fsops.Options{MaxReadSize: cfg.MaxReadSize})
	if err != nil {
		return fmt.Errorf("--root %q: %w", cfg.Root, err)
	}
	defer ws.Close()
	shell, err := sandbox.ParseShell(cfg.Shell)
	if err != nil {
		return err
	}
	netOn, _ := cfg.ExecNetworkOn()
	exe, err := sandbox.New(sandbox.Config{
		Mode: mode, MinMode: sandbox.Mode(cfg.IsolationMin), Shell: shell, WorkspaceRoot: ws.Root(), NoNetwork: !netOn,
		Policy:         sandbox.PolicyConfig{Disabled: !cfg.BlockDangerous, Allow: cfg.AllowCommands},
		MaxConcurrent:  cfg.ExecMaxConcurrent,
		DefaultTimeout: cfg.ExecTimeout,
		OutputLimit:    cfg.ExecOutputLimit,
		Logger:         log.With("component", "sandbox"),
	})
	if err != nil {
		return fmt.Errorf("--isolation %s: %w", o.isolation, err)
	}
	defer exe.Close()
	log.Info("command isolation", "mode", exe.Mode(), "reason", exe.Reason(), "gaps", strings.Join(exe.Gaps(), "; "))

	reg := registry.New(registry.Options{MaxConcurrent: cfg.MaxConcurrentCalls, QueueWait: cfg.ToolQueueWait,
		DefaultTimeout: cfg.ToolTimeout, Logger: log.With("component", "registry")})
	p, err := extensions.Start(extensions.Options{Dir: cfg.Extensions, Registry: reg, Workspace: ws, Executor: exe,
		BareNames: !o.prefix, Logger: log.With("component", "extensions")})
	if err != nil {
		return fmt.Errorf("--extensions %q: %w", o.dir, err)
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
	if len(broken) > 0 && !o.skipBroken {
		return fmt.Errorf("--extensions %q: %s (check them all with 'agent-backend ext check %s', or pass --skip-broken to serve the others)",
			o.dir, strings.Join(broken, "; "), o.dir)
	}
	names := make([]string, 0)
	for _, t := range reg.List() {
		names = append(names, t.Name)
	}
	if loaded == 0 {
		log.Warn("no extension loaded yet; serving none until a *.star file appears", "dir", cfg.Extensions)
	}

	s, err := mcphttp.New(mcphttp.Options{Workspace: ws, Registry: reg, RootDir: cfg.Root,
		MaxBodyBytes: cfg.MaxBodyBytes, MaxBatch: cfg.MaxBatch, MaxReplyBytes: cfg.MaxReplyBytes,
		Name: extServeName, Version: version,
		Instructions: "The tools are those of the Starlark extensions in " + cfg.Extensions + "; their files and commands work in the workspace " + cfg.Root + ".",
		Logger:       log.With("component", "mcp")})
	if err != nil {
		return err
	}
	defer s.Close()
	log.Info("serving the extensions over MCP on stdin and stdout", "dir", cfg.Extensions, "root", ws.Root(), "tools", strings.Join(names, ","))

	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err = s.ServeStdio(ctx, cmd.InOrStdin(), cmd.OutOrStdout())
	if ctx.Err() != nil || errors.Is(err, mcphttp.ErrClosed) {
		log.Info("shutting down")
		return nil
	}
	return err
}

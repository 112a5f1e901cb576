package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/spf13/cobra"

	"github.com/agentbe/agentbe-daemon/daemon"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/sites"
)

// siteFile is the --config file of `site serve` (TOML); flags win over it.
type siteFile struct {
	Host         string `toml:"host"`
	Port         int    `toml:"port"`
	Timeout      string `toml:"timeout"`
	MaxOutput    int64  `toml:"max_output_bytes"`
	MaxListItems int    `toml:"max_list_items"`
	EnvFile      string `toml:"env_file"`
	Isolation    string `toml:"isolation"`
	TokenFile    string `toml:"token_file"`
	// AllowedOrigins are browser origins allowed besides loopback ones.
	AllowedOrigins []string `toml:"allowed_origins"`
}

func newSiteCommand(stdout, stderr io.Writer) *cobra.Command {
	site := &cobra.Command{
		Use:   "site",
		Short: "Serve a tool site: Markdown pages whose frontmatter lists the commands an agent may run",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var host, timeout, envFile, configFile, isolation, tokenFile string
	var origins []string
	var port int
	serve := &cobra.Command{
		Use:   "serve DIR",
		Short: "Serve the tool site in DIR at / (GET reads a page, POST runs one of its tools); see docs/sites.md",
		Long: `Serve the tool site in DIR (which must hold README.md) over HTTP, a drop-in for
"statespace serve": GET /{path} reads a page (the file, {path}/README.md, or
{path}.md), POST /{path} with {"command": [...]} runs a command the page's
frontmatter allows, without a shell, in the page's directory, through the
sandbox (--isolation). $VAR in a page's tool literals comes from --env-file
only. Requests are admitted as the daemon admits them: a browser Origin that
is neither loopback nor in --allowed-origins is refused (403), and so, without
a token, is a request on a loopback address naming another Host (DNS
rebinding); a POST body must be Content-Type: application/json (415); with
--token-file every request needs "Authorization: Bearer <token>" (401). The
same site can be served by the daemon: agent-backend daemon --site DIR.`,
		Example: `  agent-backend site serve ./examples/site
  curl localhost:8000/
  curl localhost:8000/ -H 'Content-Type: application/json' -d '{"command":["ls"]}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var file siteFile
			if configFile != "" {
				data, err := os.ReadFile(configFile)
				if err != nil {
					return fmt.Errorf("--config: %v", err)
				}
				dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
				if err := dec.Decode(&file); err != nil {
					return fmt.Errorf("--config %s: %v", configFile, err)
				}
			}
			pick := func(flag string, fromFlag, fromFile string) string {
				if cmd.Flags().Changed(flag) || fromFile == "" {
					return fromFlag
				}
				return fromFile
			}
			host, timeout, envFile, isolation = pick("host", host, file.Host), pick("timeout", timeout, file.Timeout), pick("env-file", envFile, file.EnvFile), pick("isolation", isolation, file.Isolation)
			tokenFile = pick("token-file", tokenFile, file.TokenFile)
			if !cmd.Flags().Changed("allowed-origins") && len(file.AllowedOrigins) > 0 {
				origins = file.AllowedOrigins
			}
			if !cmd.Flags().Changed("port") && file.Port != 0 {
				port = file.Port
			}
			d, err := time.ParseDuration(timeout)
			if err != nil || d <= 0 {
				if n, nerr := strconv.Atoi(timeout); nerr == nil && n > 0 {
					d, err = time.Duration(n)*time.Second, nil // seconds, as statespace takes them
				} else {
					return fmt.Errorf("--timeout %q: want a duration such as 30s", timeout)
				}
			}
			if port < 1 || port > 65535 {
				return fmt.Errorf("--port %d: want 1-65535", port)
			}
			var token string
			if tokenFile != "" {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return fmt.Errorf("--token-file %q: cannot read: %v", tokenFile, err)
				}
				if token = strings.TrimSpace(string(b)); token == "" {
					return fmt.Errorf("--token-file %q is empty", tokenFile)
				}
			}
			return serveSite(cmd.Context(), args[0], siteServeOptions{host: host, port: port, timeout: d, envFile: envFile, isolation: isolation,
				maxOutput: file.MaxOutput, maxList: file.MaxListItems, token: token, origins: origins}, stdout, stderr)
		},
	}
	serve.Flags().StringVar(&host, "host", "127.0.0.1", "address to bind (statespace's --host); without --token-file keep it on loopback or behind a proxy that authenticates")
	serve.Flags().StringVar(&host, "bind", "127.0.0.1", "alias of --host")
	serve.Flags().IntVarP(&port, "port", "p", 8000, "port")
	serve.Flags().StringVar(&timeout, "timeout", "30s", "a command's time limit (a duration, or seconds); the whole process tree is killed when it passes")
	serve.Flags().StringVar(&envFile, "env-file", "", "KEY=VALUE file whose variables fill $VAR in the pages' tool literals (never the agent's requests)")
	serve.Flags().StringVar(&tokenFile, "token-file", "", "read a bearer token from this file (surrounding whitespace trimmed); every request must then send \"Authorization: Bearer <token>\"")
	serve.Flags().StringSliceVar(&origins, "allowed-origins", nil, "browser Origins allowed besides loopback ones (comma-separated; \"*\" allows any), as the daemon's --allowed-origins")
	serve.Flags().StringVarP(&configFile, "config", "c", "", "TOML file with host, port, timeout, max_output_bytes, max_list_items, env_file, isolation, token_file, allowed_origins; flags win")
	serve.Flags().StringVar(&isolation, "isolation", "auto", "how commands run: auto (bwrap if it works, else landlock if the kernel has it, else software), bwrap, landlock, software, none")
	site.AddCommand(serve)
	return site
}

type siteServeOptions struct {
	host, envFile, isolation string
	token                    string   // "" = none
	origins                  []string // --allowed-origins
	port                     int
	timeout                  time.Duration
	maxOutput                int64
	maxList                  int
}

func serveSite(ctx context.Context, dir string, o siteServeOptions, stdout, stderr io.Writer) error {
	log := daemon.NewLogger(stderr, "text", "info")
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(filepath.Join(abs, "README.md")); err != nil || fi.IsDir() {
		return fmt.Errorf("%s has no README.md: a tool site is a directory of Markdown pages whose front page is README.md", dir)
	}
	ws, err := fsops.NewDir(abs, fsops.Options{})
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	defer ws.Close()
	mode, err := sandbox.ParseMode(o.isolation)
	if err != nil {
		return fmt.Errorf("--isolation: %w", err)
	}
	exe, err := sandbox.New(sandbox.Config{Mode: mode, WorkspaceRoot: ws.Root(), Logger: log.With("component", "sandbox")})
	if err != nil {
		return fmt.Errorf("--isolation %s: %w", o.isolation, err)
	}
	defer exe.Close()
	var env map[string]string
	if o.envFile != "" {
		if env, err = sites.LoadEnvFile(o.envFile); err != nil {
			return fmt.Errorf("--env-file: %w", err)
		}
	}
	s, err := sites.New(sites.Options{Workspace: ws, Executor: exe, Timeout: o.timeout, MaxOutput: o.maxOutput, MaxListItems: o.maxList,
		Env: env, Logger: log.With("component", "site")})
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", net.JoinHostPort(o.host, strconv.Itoa(o.port)))
	if err != nil {
		return fmt.Errorf("--host %s --port %d: %w", o.host, o.port, err)
	}
	// The daemon's admission: its Origin and Host rules, its token rule
	// (compared in constant time), and the site's own rules for a POST.
	rules := admit.Rules{
		Guard:   httpguard.New(httpguard.Options{AuthToken: o.token, AllowedOrigins: o.origins, Logger: log.With("component", "http")}),
		Token:   httpguard.NewToken(o.token),
		RootDir: ws.Root(),
	}
	srv := &http.Server{Handler: s.Handler(rules), ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	log.Info("serving the tool site", "dir", ws.Root(), "addr", "http://"+ln.Addr().String()+"/", "isolation", exe.Mode(), "timeout", o.timeout, "token", o.token != "")
	if o.token == "" && !httpguard.IsLoopbackAddr(ln.Addr().String()) {
		log.Warn("serving the site on a non-loopback address without a token: anyone who reaches it runs the site's commands; set --token-file", "addr", ln.Addr().String())
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/spf13/cobra"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/daemon"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/internal/opfile"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/sites"
)

// siteFile is the --config file of `site serve` (TOML); flags win over it.
// Each key is checked by parseSiteFile, whose errors name the key and the
// file.
type siteFile struct {
	Host         string
	Port         int
	Timeout      time.Duration // 0: not set
	MaxOutput    int64
	MaxListItems int
	EnvFile      string
	Isolation    string
	TokenFile    string
	// AllowedOrigins are browser origins allowed besides loopback ones.
	AllowedOrigins   []string
	NotAllowedStatus int
	StrictOutput     *bool // nil: not set
}

// siteFileKeys are the keys of a --config file, in the order --help and
// the errors list them.
var siteFileKeys = []string{"host", "port", "timeout", "max_output_bytes", "max_list_items", "env_file", "isolation", "token_file",
	"allowed_origins", "not_allowed_status", "strict_output"}

// Bounds of the site's limits, from a flag or the file.
const (
	maxSiteOutput = 1 << 30 // bytes per stream
	maxSiteList   = 1_000_000
)

// parseSiteFile reads a --config file. statespace's config takes timeout
// as whole seconds (timeout = 30); a duration string (timeout = "1m30s")
// is taken too. A syntax error names the line and column, and a bad value
// or an unknown key names the key and the file.
func parseSiteFile(name string, data []byte) (siteFile, error) {
	var f siteFile
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			// The parser's message may quote the character at fault, a
			// carriage return or newline among them: the error is one line.
			msg := strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(strings.TrimPrefix(de.Error(), "toml: "))
			return f, fmt.Errorf("--config %s:%d:%d: %v", name, row, col, msg)
		}
		return f, fmt.Errorf("--config %s: %v", name, err)
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := doc[k]
		bad := func(want string) error {
			return fmt.Errorf("--config %s: %s = %s: want %s", name, k, tomlValue(v), want)
		}
		str := func(dst *string) error {
			s, ok := v.(string)
			if !ok || s == "" || strings.ContainsRune(s, 0) {
				return bad("a non-empty string")
			}
			*dst = s
			return nil
		}
		num := func(lo, hi int64, want string) (int64, error) {
			n, ok := v.(int64)
			if !ok || n < lo || n > hi {
				return 0, bad(want)
			}
			return n, nil
		}
		var err error
		switch k {
		case "host":
			err = str(&f.Host)
		case "env_file":
			err = str(&f.EnvFile)
		case "isolation":
			if err = str(&f.Isolation); err == nil {
				if _, perr := sandbox.ParseMode(f.Isolation); perr != nil {
					err = bad("one of auto, bwrap, landlock, software, none")
				}
			}
		case "token_file":
			err = str(&f.TokenFile)
		case "port":
			var n int64
			n, err = num(1, 65535, "a port, 1-65535")
			f.Port = int(n)
		case "timeout":
			f.Timeout, err = siteTimeout(v)
			if err != nil {
				err = bad(err.Error())
			}
		case "max_output_bytes":
			f.MaxOutput, err = num(1, maxSiteOutput, fmt.Sprintf("a number of bytes, 1-%d", maxSiteOutput))
		case "max_list_items":
			var n int64
			n, err = num(1, maxSiteList, fmt.Sprintf("a number of items, 1-%d", maxSiteList))
			f.MaxListItems = int(n)
		case "allowed_origins":
			list, ok := v.([]any)
			if !ok {
				return f, bad(`a list of strings, such as ["https://app.example"]`)
			}
			for _, o := range list {
				s, ok := o.(string)
				if !ok || s == "" {
					return f, bad(`a list of strings, such as ["https://app.example"]`)
				}
				f.AllowedOrigins = append(f.AllowedOrigins, s)
			}
		case "not_allowed_status":
			var n int64
			if n, err = num(400, 403, "403 (the default) or 400"); err == nil && n != 400 && n != 403 {
				err = bad("403 (the default) or 400")
			}
			f.NotAllowedStatus = int(n)
		case "strict_output":
			b, ok := v.(bool)
			if !ok {
				return f, bad("true or false")
			}
			f.StrictOutput = &b
		default:
			return f, fmt.Errorf("--config %s: unknown key %q (the keys are %s)", name, k, strings.Join(siteFileKeys, ", "))
		}
		if err != nil {
			return f, err
		}
	}
	return f, nil
}

// siteTimeout is a command's time limit from --timeout or the file's
// timeout: whole seconds (30, "30", as statespace takes them) or a Go
// duration ("1m30s"); positive, at most a day.
func siteTimeout(v any) (time.Duration, error) {
	const want = `whole seconds (30) or a duration ("1m30s"), more than 0 and at most 24h`
	var d time.Duration
	switch t := v.(type) {
	case int64:
		if t <= 0 || t > 86400 {
			return 0, errors.New(want)
		}
		d = time.Duration(t) * time.Second
	case string:
		if n, err := strconv.ParseInt(t, 10, 64); err == nil {
			return siteTimeout(n)
		}
		var err error
		if d, err = time.ParseDuration(t); err != nil || d <= 0 || d > 24*time.Hour {
			return 0, errors.New(want)
		}
	default:
		return 0, errors.New(want)
	}
	return d, nil
}

// tomlValue is v as the file wrote it, for an error.
func tomlValue(v any) string {
	switch t := v.(type) {
	case string:
		return strconv.Quote(t)
	case map[string]any:
		return "{...}"
	}
	b, err := toml.Marshal(map[string]any{"v": v})
	if err != nil {
		return fmt.Sprint(v)
	}
	s := strings.TrimSpace(string(b))
	if strings.ContainsAny(s, "\n\r") || !strings.HasPrefix(s, "v = ") {
		// An array holding tables is written as [[v]] sections, on lines
		// of their own: the error is one line.
		return "[...]"
	}
	return strings.TrimPrefix(s, "v = ")
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
	var port, notAllowed int
	var maxOutput int64
	var strict, showVersion, noInit bool
	serve := &cobra.Command{
		Use:   "serve [DIR]",
		Short: "Serve the tool site in DIR (default .) at / (GET reads a page, POST runs one of its tools); see docs/sites.md",
		Long: `Serve the tool site in DIR (default: the current directory, which must hold
README.md) over HTTP, a drop-in for "statespace serve": GET /{path} reads a
page (the file, {path}/README.md, or {path}.md), POST /{path} with
{"command": [...]} runs a command the page's frontmatter allows, without a
shell, in the page's directory, through the sandbox (--isolation). $VAR in a
page's tool literals comes from --env-file only.

A command no pattern allows is 403 (--not-allowed-status 400 gives
statespace's Rust server's answer). Output over --max-output is cut, head and
tail kept with a notice; a request with "Prefer: handling=strict" gets 413
instead (--strict-output makes that the default, "Prefer: handling=lenient"
asks for the cut answer).

Requests are admitted as the daemon admits them: a browser Origin that is
neither loopback nor in --allowed-origins is refused (403), and so, without a
token, is a request on a loopback address naming another Host (DNS
rebinding); a POST body must be Content-Type: application/json (415); with
--token-file every request needs "Authorization: Bearer <token>" (401). The
same site can be served by the daemon: agent-backend daemon --site DIR.

--config FILE is TOML with the keys host, port, timeout (whole seconds, as
statespace takes it, or a duration string), max_output_bytes, max_list_items,
env_file, isolation, token_file, allowed_origins (a list),
not_allowed_status, strict_output; flags win over it.`,
		Example: `  agent-backend site serve ./examples/site
  agent-backend site serve ./examples/site -H 127.0.0.1 -p 8080 -c site.toml
  curl localhost:8000/
  curl localhost:8000/ -H 'Content-Type: application/json' -d '{"command":["ls"]}'
  curl localhost:8000/ -H 'Content-Type: application/json' -H 'Prefer: handling=strict' -d '{"command":["ls"]}'

  # site.toml
  port = 8080
  timeout = 30`,
		Args: func(cmd *cobra.Command, args []string) error {
			if showVersion {
				return nil
			}
			if len(args) > 1 {
				return fmt.Errorf("site serve takes one DIR, the tool site's directory; got %d arguments (%s)", len(args), strings.Join(args, " "))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if showVersion {
				fmt.Fprintf(stdout, "agent-backend v%s\n", version)
				return nil
			}
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			var file siteFile
			if configFile != "" {
				// It names the token and the secrets: read as every file
				// that grants rights is (opfile.Read: not a FIFO, bounded,
				// and refused when a user other than root and this one
				// could change it).
				data, err := opfile.Read(configFile, maxSiteConfig)
				if err != nil {
					return fmt.Errorf("--config %s: %v", configFile, err)
				}
				if file, err = parseSiteFile(configFile, data); err != nil {
					return err
				}
			}
			// where names a value's source for an error: the flag, or the
			// key in the file.
			where := func(flag, key string) string {
				if cmd.Flags().Changed(flag) || configFile == "" {
					return "--" + flag
				}
				return fmt.Sprintf("%s in --config %s", key, configFile)
			}
			fromFile := func(flags ...string) bool {
				for _, f := range flags {
					if cmd.Flags().Changed(f) {
						return false
					}
				}
				return true
			}
			pick := func(flag string, fromFlag, fromFile string) string {
				if cmd.Flags().Changed(flag) || fromFile == "" {
					return fromFlag
				}
				return fromFile
			}
			if fromFile("host", "bind") && file.Host != "" {
				host = file.Host
			}
			envFile, isolation = pick("env-file", envFile, file.EnvFile), pick("isolation", isolation, file.Isolation)
			tokenFile = pick("token-file", tokenFile, file.TokenFile)
			if fromFile("allowed-origins") && len(file.AllowedOrigins) > 0 {
				origins = file.AllowedOrigins
			}
			if fromFile("port") && file.Port != 0 {
				port = file.Port
			}
			if fromFile("max-output") && file.MaxOutput != 0 {
				maxOutput = file.MaxOutput
			}
			if fromFile("not-allowed-status") && file.NotAllowedStatus != 0 {
				notAllowed = file.NotAllowedStatus
			}
			if fromFile("strict-output") && file.StrictOutput != nil {
				strict = *file.StrictOutput
			}
			d := file.Timeout
			if !fromFile("timeout") || d == 0 {
				var err error
				if d, err = siteTimeout(timeout); err != nil {
					return fmt.Errorf("--timeout %q: want %v", timeout, err)
				}
			}
			if port < 1 || port > 65535 {
				return fmt.Errorf("--port %d: want 1-65535", port)
			}
			if maxOutput < 1 || maxOutput > maxSiteOutput {
				return fmt.Errorf("--max-output %d: want a number of bytes, 1-%d", maxOutput, maxSiteOutput)
			}
			if notAllowed != http.StatusBadRequest && notAllowed != http.StatusForbidden {
				return fmt.Errorf("--not-allowed-status %d: want 403 (the default) or 400", notAllowed)
			}
			// GET answers any file of DIR, and DIR is the commands'
			// workspace: a secret there is one request away.
			for _, f := range []struct{ flag, key, path string }{{"env-file", "env_file", envFile}, {"token-file", "token_file", tokenFile}} {
				if err := outsideSite(dir, where(f.flag, f.key), f.path); err != nil {
					return err
				}
			}
			var token string
			if tokenFile != "" {
				// It admits callers: read as every file that grants rights
				// is (opfile.Read), as the daemon's token files are.
				b, err := opfile.Read(tokenFile, opfile.MaxTokenFile)
				if err != nil {
					return fmt.Errorf("%s %q: cannot read: %v", where("token-file", "token_file"), tokenFile, err)
				}
				if token = strings.TrimSpace(string(b)); token == "" {
					return fmt.Errorf("%s %q is empty", where("token-file", "token_file"), tokenFile)
				}
			}
			return serveSite(cmd.Context(), dir, siteServeOptions{host: host, port: port, timeout: d, envFile: envFile, isolation: isolation,
				maxOutput: maxOutput, maxList: file.MaxListItems, token: token, origins: origins, notAllowed: notAllowed, strict: strict,
				envFileFrom: where("env-file", "env_file"), isolationFrom: where("isolation", "isolation"), noInit: noInit}, stdout, stderr)
		},
	}
	serve.Flags().StringVarP(&host, "host", "H", "127.0.0.1", "address to bind (statespace's --host, -H); without --token-file keep it on loopback or behind a proxy that authenticates")
	serve.Flags().StringVar(&host, "bind", "127.0.0.1", "alias of --host")
	serve.Flags().IntVarP(&port, "port", "p", 8000, "port")
	serve.Flags().StringVar(&timeout, "timeout", "30s", "a command's time limit (whole seconds as statespace takes them, or a duration such as 1m30s); the whole process tree is killed when it passes")
	serve.Flags().Int64Var(&maxOutput, "max-output", sites.DefaultMaxOutput, "cap on each of a command's stdout and stderr, in bytes (statespace's --max-output); over it the output is cut with a notice, or 413 in strict mode")
	serve.Flags().BoolVar(&strict, "strict-output", false, "answer 413 when a command's output is over --max-output, as statespace does, unless the request sends \"Prefer: handling=lenient\"; without it a request asks for the 413 with \"Prefer: handling=strict\"")
	serve.Flags().IntVar(&notAllowed, "not-allowed-status", sites.DefaultNotAllowedStatus, "the status of a command that no pattern of its page allows: 403, or 400 as statespace's Rust server answers")
	serve.Flags().StringVar(&envFile, "env-file", "", "KEY=VALUE file whose variables fill $VAR in the pages' tool literals (never the agent's requests)")
	serve.Flags().StringVar(&tokenFile, "token-file", "", "read a bearer token from this file (surrounding whitespace trimmed); every request must then send \"Authorization: Bearer <token>\"")
	serve.Flags().StringSliceVar(&origins, "allowed-origins", nil, "browser Origins allowed besides loopback ones (comma-separated; \"*\" allows any), as the daemon's --allowed-origins")
	serve.Flags().StringVarP(&configFile, "config", "c", "", "TOML file with "+strings.Join(siteFileKeys, ", ")+"; flags win (see above)")
	serve.Flags().StringVar(&isolation, "isolation", "auto", "how commands run: auto (bwrap if it works, else landlock if the kernel has it, else software), bwrap, landlock, software, none")
	serve.Flags().BoolVar(&noInit, "no-init", false, "write no AGENTS.md or index.html into DIR (statespace's --no-init); by default each is written when it is missing, and an existing one is never touched")
	serve.Flags().BoolVarP(&showVersion, "version", "V", false, "print the version and exit (statespace's --version)")
	site.AddCommand(serve)
	return site
}

// maxSiteConfig bounds site serve's --config file.
const maxSiteConfig = 1 << 20

// outsideSite refuses a file of the operator's (from) that lies inside the
// site's directory dir once symlinks and ".." are followed: site serve
// answers GET for every file of dir, pages or not, and its commands run
// there.
func outsideSite(dir, from, p string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	return config.Outside(from, p, "the tool site", abs,
		"every file of which a client can read (GET /{path}) and the site's commands may change; keep it outside the site")
}

type siteServeOptions struct {
	host, envFile, isolation string
	// envFileFrom and isolationFrom name where envFile and isolation came
	// from (the flag, or the key in the --config file), for an error.
	envFileFrom, isolationFrom string
	token                      string   // "" = none
	origins                    []string // --allowed-origins
	port                       int
	timeout                    time.Duration
	maxOutput                  int64
	maxList                    int
	notAllowed                 int  // the status of a command no pattern allows
	strict                     bool // --strict-output
	noInit                     bool // --no-init
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
		return fmt.Errorf("%s: %w", o.isolationFrom, err)
	}
	exe, err := sandbox.New(sandbox.Config{Mode: mode, WorkspaceRoot: ws.Root(), Logger: log.With("component", "sandbox")})
	if err != nil {
		return fmt.Errorf("%s %s: %w", o.isolationFrom, o.isolation, err)
	}
	defer exe.Close()
	var env map[string]string
	if o.envFile != "" {
		if env, err = sites.LoadEnvFile(o.envFile); err != nil {
			return fmt.Errorf("%s: %w", o.envFileFrom, err)
		}
	}
	s, err := sites.New(sites.Options{Workspace: ws, Executor: exe, Timeout: o.timeout, MaxOutput: o.maxOutput, MaxListItems: o.maxList,
		Env: env, EnvFlag: "--env-file", NotAllowedStatus: o.notAllowed, StrictOutput: o.strict, NoAgentFiles: o.noInit, Logger: log.With("component", "site")})
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
	// The daemon's read deadlines (internal/admit): a header within 10 s,
	// a body within 30 s; a keep-alive connection that sends nothing more
	// is closed after 30 s, so idle connections cannot pile up.
	srv := &http.Server{Handler: admit.BodyDeadline(admit.ReplyDeadline(s.Handler(rules), admit.ReplyStallTimeout), admit.BodyTimeout), ReadHeaderTimeout: admit.HeaderTimeout, IdleTimeout: 30 * time.Second, ErrorLog: nil}
	// The signals are caught before the line that says the site is served,
	// so a SIGTERM sent on seeing it shuts the server down gracefully.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log.Info("serving the tool site", "dir", ws.Root(), "addr", "http://"+ln.Addr().String()+"/", "isolation", exe.Mode(), "timeout", o.timeout,
		"max_output", o.maxOutput, "strict_output", o.strict, "not_allowed_status", o.notAllowed, "token", o.token != "")
	if o.token == "" && !httpguard.IsLoopbackAddr(ln.Addr().String()) {
		log.Warn("serving the site on a non-loopback address without a token: anyone who reaches it runs the site's commands; set --token-file", "addr", ln.Addr().String())
	}
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

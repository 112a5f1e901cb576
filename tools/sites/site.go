package sites

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/opfile"
	"github.com/agentbe/agentbe-daemon/internal/ratelog"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/sandbox/policy"
)

// Defaults of Options.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultMaxOutput    = 1 << 20
	DefaultMaxListItems = 1000
	// MaxRequestBytes bounds a POST body (413 past it).
	MaxRequestBytes = 64 << 10
	// DefaultNotAllowedStatus is the status of a command no pattern of its
	// page allows: 403, as the statespace RFD's table has it (statespace's
	// Rust server answers 400; Options.NotAllowedStatus picks that).
	DefaultNotAllowedStatus = http.StatusForbidden
)

// Bounds of a request's env, as the reference's TypeScript port has them.
const (
	maxEnvVars     = 64
	maxEnvKey      = 64
	maxEnvValue    = 4 << 10
	maxEnvTotal    = 16 << 10
	maxCommandArgs = 256
	// maxElementBytes and maxCommandBytes bound a command after its
	// {key} placeholders are filled: the kernel passes at most 128 KiB in
	// one argument, and a request of a few KiB that repeats {key} with a
	// large value would otherwise expand to hundreds of MB (a 43 KB one
	// allocated 420 MB) before anything refused it.
	maxElementBytes = 128 << 10
	maxCommandBytes = 1 << 20
)

// Options configure a Site.
type Options struct {
	// Workspace is the site's directory (it must hold README.md). Pages are
	// read and commands run inside it only.
	Workspace fsops.Workspace
	// CallerContext, when set, gives the context a request admitted by the
	// site's handler is served with, from the request's and its caller:
	// what the caller may reach through doors that take it from the
	// context (the daemon: netguard.WithLoopbackJudge for a site's curl, as
	// its run_command tool gets through the registry).
	CallerContext func(ctx context.Context, c admit.Caller) context.Context
	// Executor runs the commands (no shell: each argv is handed over as is).
	Executor sandbox.Executor
	// Timeout bounds one command (DefaultTimeout when 0); the whole process
	// tree is killed when it passes.
	Timeout time.Duration
	// MaxOutput caps each of stdout and stderr while they stream
	// (DefaultMaxOutput when 0): the head and tail are kept, with a notice.
	MaxOutput int64
	// MaxListItems caps glob's results (DefaultMaxListItems when 0).
	MaxListItems int
	// StrictOutput makes output over MaxOutput an error (413, with none of
	// the output) for every request that does not ask for the cut answer
	// (ActionRequest.Output). By default the output is cut, head and tail
	// kept with a notice, and a request asks for the 413.
	StrictOutput bool
	// NoAgentFiles leaves the site's directory as it is: New writes no
	// AGENTS.md or index.html (statespace's --no-init).
	NoAgentFiles bool
	// NotAllowedStatus is the HTTP status of a command that no pattern of
	// its page allows: 403 (DefaultNotAllowedStatus, when 0) or 400, the
	// answer of statespace's Rust server, for clients that expect it.
	NotAllowedStatus int
	// ComponentTimeout bounds each component block of a page
	// (DefaultComponentTimeout when 0).
	ComponentTimeout time.Duration
	// Env is the operator's trusted environment (--site-env-file): the only
	// source of $VAR in spec literals. Never sent to the agent.
	Env map[string]string
	// EnvFlag is the flag that sets Env, named where a page uses a
	// variable Env lacks ("--site-env-file" when empty; `site serve` has
	// "--env-file").
	EnvFlag string
	// Net is the guarded client the curl builtin uses (a strict
	// netguard.New(netguard.Options{}) when nil).
	Net *netguard.Client
	// Logger receives failures; nil discards.
	Logger *slog.Logger
}

// Site serves one tool site: pages by GET, the commands their frontmatter
// allows by POST (Handler), and the same as Read and Run for other faces.
type Site struct {
	ws   fsops.Workspace
	exe  sandbox.Executor
	opts Options
	log  *slog.Logger

	mu    sync.Mutex
	pages map[string]cachedPage // parsed frontmatter, by page path

	// mem holds the agent files served from memory (agentFiles), by
	// path: a site that lacks them and cannot be written. A file of the
	// same name on disk wins.
	mem map[string][]byte

	// othersCouldChange limits the warnings about pages judge refuses:
	// the overview judges every page on every GET, so a line per refusal
	// would let any caller fill the log.
	othersCouldChange ratelog.Every
}

type cachedPage struct {
	mod   time.Time
	size  int64
	specs []Spec
	err   error
}

// Error is a request the site refuses or cannot serve, with the HTTP status
// of the reference's table.
type Error struct {
	Status int
	Msg    string
	// code is the errcode of the MCP tools' refusal when the status alone
	// does not tell it ("" derives it from Status).
	code errcode.Code
}

func (e *Error) Error() string { return e.Msg }

func fail(status int, format string, args ...any) *Error {
	return &Error{Status: status, Msg: fmt.Sprintf(format, args...)}
}

// New checks the site's directory and returns the Site.
func New(opts Options) (*Site, error) {
	if opts.Workspace == nil || opts.Executor == nil {
		return nil, errors.New("sites: Options.Workspace and Executor are required")
	}
	if fi, err := opts.Workspace.Stat("README.md"); err != nil || fi.IsDir() {
		return nil, fmt.Errorf("%s has no README.md: a tool site is a directory of Markdown pages whose front page is README.md", opts.Workspace.Root())
	}
	// Its pages say which commands run (frontmatter tools, components):
	// the directory is judged as every file that grants rights is, and
	// each page again when it is used (judge).
	if err := opfile.CheckModes(filepath.Join(opts.Workspace.Root(), "README.md")); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(opts.Workspace.Root(), "README.md"), err)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	if opts.MaxListItems <= 0 {
		opts.MaxListItems = DefaultMaxListItems
	}
	switch opts.NotAllowedStatus {
	case 0:
		opts.NotAllowedStatus = DefaultNotAllowedStatus
	case http.StatusBadRequest, http.StatusForbidden:
	default:
		return nil, fmt.Errorf("sites: NotAllowedStatus %d: want 403 or 400", opts.NotAllowedStatus)
	}
	if opts.ComponentTimeout <= 0 {
		opts.ComponentTimeout = DefaultComponentTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mem, err := agentFiles(opts.Workspace, opts.NoAgentFiles, log)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Workspace.Root(), err)
	}
	if opts.Net == nil {
		opts.Net = netguard.New(netguard.Options{MaxBodyBytes: opts.MaxOutput, Timeout: opts.Timeout})
	}
	return &Site{ws: opts.Workspace, exe: opts.Executor, opts: opts, log: log, pages: map[string]cachedPage{}, mem: mem}, nil
}

// Close releases the idle connections of the curl builtin's client.
func (s *Site) Close() error {
	s.opts.Net.CloseIdleConnections()
	return nil
}

// Resolve maps a request path to the page it names, in the reference's
// order: the file itself, {path}/README.md for a directory, {path}.md;
// else 404. An absolute path or a ".." component is 403; fsops keeps
// symlinks inside the site.
func (s *Site) Resolve(p string) (string, error) {
	p = strings.TrimPrefix(p, "/")
	if strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return "", fail(http.StatusForbidden, "path traversal: %q", p)
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", fail(http.StatusForbidden, "path traversal: %q (\"..\")", p)
		}
	}
	p = path.Clean("/" + p)[1:]
	if p == "" {
		p = "README.md"
	}
	candidates := []string{p, path.Join(p, "README.md"), p + ".md"}
	for i, c := range candidates {
		fi, err := s.ws.Stat(c)
		switch {
		case err == nil && !fi.IsDir():
			return c, nil
		case err == nil && i == 0:
			continue // a directory: its README.md
		case errcode.Is(err, errcode.PathEscapeAttempt):
			return "", fail(http.StatusForbidden, "path traversal: %q leads outside the site", p)
		case errcode.Is(err, errcode.NotFound) && s.mem[c] != nil:
			return c, nil
		}
	}
	return "", fail(http.StatusNotFound, "no page at /%s (tried %s, %s/README.md and %s.md)", p, p, p, p)
}

// ReadPage returns a page as an agent reads it: the file's bytes, with the
// component blocks of a Markdown page replaced by their output.
func (s *Site) ReadPage(ctx context.Context, p string) (page string, data []byte, err error) {
	page, data, err = s.Read(p)
	if err != nil || path.Ext(page) != ".md" {
		return page, data, err
	}
	return page, s.renderComponents(ctx, page, data), nil
}

// judge refuses a page whose tools (its frontmatter, which every POST and
// component is matched against, in specs) a user other than root and this
// process's could change or put there, as every file that grants rights is
// judged (opfile.CheckModes, on the page's path under the site's root),
// by j: the judge of the request's batch of pages (the overview's), or a
// new one for a page alone (nil).
// The caller is told only that; the log says why and what to do.
func (s *Site) judge(page string, j *opfile.Judge) error {
	full := filepath.Join(s.ws.Root(), filepath.FromSlash(page))
	if j == nil {
		j = new(opfile.Judge)
	}
	if err := j.CheckModes(full); err != nil {
		s.othersCouldChange.Warn(s.log, "site page others could change", "site: a page another user could change runs nothing", "page", page, "err", fmt.Sprintf("%s: %v", full, err))
		return fail(http.StatusForbidden, "/%s: another user than the operator could change this page, so its commands do not run (the operator's log says why)", page)
	}
	return nil
}

// Read returns a page's bytes as stored.
func (s *Site) Read(p string) (page string, data []byte, err error) {
	page, err = s.Resolve(p)
	if err != nil {
		return "", nil, err
	}
	data, err = s.ws.ReadFile(page)
	if errcode.Is(err, errcode.NotFound) && s.mem[page] != nil {
		return page, s.mem[page], nil
	}
	if err != nil {
		return "", nil, s.fsError(page, err)
	}
	return page, data, nil
}

func (s *Site) fsError(page string, err error) error {
	switch errcode.Of(err) {
	case errcode.NotFound:
		return fail(http.StatusNotFound, "no page at /%s", page)
	case errcode.PathEscapeAttempt:
		return fail(http.StatusForbidden, "path traversal: %q leads outside the site", page)
	case errcode.TooLarge:
		return fail(http.StatusRequestEntityTooLarge, "/%s: %s", page, errcode.Sentence(err))
	}
	s.log.Warn("site: reading a page failed", "page", page, "err", err)
	return fail(http.StatusInternalServerError, "reading /%s failed", page)
}

// specs returns the page's tool specs, parsed once per version of the file
// (a page edited on disk is parsed again on its next use: watch mode),
// once the page is judged by j (judge).
func (s *Site) specs(page string, j *opfile.Judge) ([]Spec, error) {
	fi, err := s.ws.Stat(page)
	if errcode.Is(err, errcode.NotFound) && s.mem[page] != nil {
		// The daemon's own AGENTS.md or index.html, served from memory:
		// no frontmatter, no tools, as when written.
		return nil, fail(http.StatusBadRequest, "/%s declares no tools (it has no frontmatter)", page)
	}
	if err != nil {
		return nil, s.fsError(page, err)
	}
	if err := s.judge(page, j); err != nil {
		return nil, err
	}
	s.mu.Lock()
	c, ok := s.pages[page]
	s.mu.Unlock()
	if ok && c.mod.Equal(fi.ModTime) && c.size == fi.Size {
		return c.specs, c.err
	}
	data, err := s.ws.ReadFile(page)
	if err != nil {
		return nil, s.fsError(page, err)
	}
	specs, _, perr := ParseFrontmatter(data)
	switch {
	case errors.Is(perr, ErrNoFrontmatter):
		perr = fail(http.StatusBadRequest, "/%s declares no tools (it has no frontmatter)", page)
	case perr != nil:
		perr = fail(http.StatusBadRequest, "/%s: %v", page, perr)
	}
	s.mu.Lock()
	s.pages[page] = cachedPage{mod: fi.ModTime, size: fi.Size, specs: specs, err: perr}
	s.mu.Unlock()
	return specs, perr
}

// ActionRequest is a POST body.
type ActionRequest struct {
	Command []string          `json:"command"`
	Args    map[string]string `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Output says what to do with output over the cap; it is not part of
	// the body: the handler takes it from the request's Prefer header.
	Output OutputMode `json:"-"`
}

// OutputMode is what a request wants when a command's output is over the
// cap (Options.MaxOutput).
type OutputMode int

const (
	// OutputDefault is the server's choice: OutputStrict with
	// Options.StrictOutput, else OutputCut.
	OutputDefault OutputMode = iota
	// OutputCut keeps the head and tail of each stream with a notice of
	// what was cut (the answer for agents).
	OutputCut
	// OutputStrict answers 413 with none of the output, as statespace's
	// Rust server does (Prefer: handling=strict).
	OutputStrict
)

// ActionResponse is a command's outcome: its output and its real exit code.
type ActionResponse struct {
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Returncode int    `json:"returncode"`
}

// placeholderRe finds a command's {key} placeholders; compiled on the
// first command run, not at start, as the patterns below.
var placeholderRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`) })

// Run runs a command the page at p allows. The order matters for safety:
// resolve the page, fill {key} placeholders from req.Args, match the specs,
// check the arguments, and only then expand $VAR — inside the elements that
// matched a spec literal containing "$", from the operator's environment,
// never the request's — and check the request's env.
func (s *Site) Run(ctx context.Context, p string, req ActionRequest) (ActionResponse, error) {
	page, err := s.Resolve(p)
	if err != nil {
		return ActionResponse{}, err
	}
	specs, err := s.specs(page, nil)
	if err != nil {
		return ActionResponse{}, err
	}
	if len(req.Command) == 0 || req.Command[0] == "" {
		return ActionResponse{}, fail(http.StatusBadRequest, "empty command")
	}
	if len(req.Command) > maxCommandArgs {
		return ActionResponse{}, fail(http.StatusBadRequest, "more than %d command elements", maxCommandArgs)
	}
	argv := make([]string, len(req.Command))
	total := 0
	for i, a := range req.Command {
		if strings.ContainsRune(a, 0) {
			return ActionResponse{}, fail(http.StatusBadRequest, "command element %d contains a NUL byte", i)
		}
		// The size it will have, counted before it is built.
		size := len(a)
		for _, m := range placeholderRe().FindAllStringSubmatchIndex(a, -1) {
			if v, ok := req.Args[a[m[2]:m[3]]]; ok {
				size += len(v) - (m[1] - m[0])
			}
		}
		if total += size; size > maxElementBytes || total > maxCommandBytes {
			return ActionResponse{}, fail(http.StatusRequestEntityTooLarge, "command element %d is %d bytes with its placeholders filled (%d in all so far); at most %d in one element and %d in all", i, size, total, maxElementBytes, maxCommandBytes)
		}
		argv[i] = placeholderRe().ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := req.Args[m[1:len(m)-1]]; ok {
				return v
			}
			return m
		})
	}
	spec, ok := FirstMatch(specs, argv)
	if !ok {
		e := fail(s.opts.NotAllowedStatus, "command not allowed by /%s: %q matches none of its tools %s", page, argv, specList(specs))
		e.code = errcode.InvalidArgument
		return ActionResponse{}, e
	}
	if n := argv[0]; strings.ContainsAny(n, `/\`) || strings.Contains(n, "..") {
		return ActionResponse{}, fail(http.StatusForbidden, "security: the command name %q must be a plain name looked up on PATH", n)
	}
	for i, a := range argv[1:] {
		if absoluteOrClimbing(a) {
			return ActionResponse{}, fail(http.StatusForbidden, "security: argument %d (%q) is an absolute path or contains \"..\" (as itself or as an option's value)", i+1, a)
		}
	}
	for i, part := range spec.Parts {
		if part.Any || part.Regex != nil || !strings.Contains(part.Literal, "$") {
			continue
		}
		var missing string
		argv[i] = expandVars(part.Literal, func(k string) string {
			v, ok := s.opts.Env[k]
			if !ok && missing == "" {
				missing = k
			}
			return v
		})
		if missing != "" {
			return ActionResponse{}, fail(http.StatusInternalServerError, "the site's environment does not define $%s, which /%s uses; the operator sets it with %s", missing, page, cmp.Or(s.opts.EnvFlag, "--site-env-file"))
		}
	}
	env, err := checkEnv(req.Env)
	if err != nil {
		return ActionResponse{}, err
	}
	dir := path.Dir(page)
	switch argv[0] {
	case "glob":
		return s.glob(ctx, dir, argv)
	case "curl":
		return s.curl(ctx, argv, s.strict(req.Output))
	}
	return s.exec(ctx, dir, argv, env, s.strict(req.Output))
}

// strict reports whether output over the cap is a 413 for a request.
func (s *Site) strict(m OutputMode) bool {
	return m == OutputStrict || m == OutputDefault && s.opts.StrictOutput
}

// tooLarge is the 413 of strict output: the sizes, the limit and how to get
// the cut output instead.
func tooLarge(what string, size, limit int64) *Error {
	return fail(http.StatusRequestEntityTooLarge, "output too large: %s is %d bytes, over the limit of %d bytes (strict output; a request with \"Prefer: handling=lenient\" gets the head and tail with a notice)", what, size, limit)
}

func specList(specs []Spec) string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.String()
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// expandVars replaces $NAME and ${NAME}; anything else stays.
func expandVars(s string, get func(string) string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		j := i + 1
		brace := s[j] == '{'
		if brace {
			j++
		}
		k := j
		for k < len(s) && (s[k] == '_' || s[k] >= 'A' && s[k] <= 'Z' || s[k] >= 'a' && s[k] <= 'z' || k > j && s[k] >= '0' && s[k] <= '9') {
			k++
		}
		if k == j || (brace && (k == len(s) || s[k] != '}')) {
			b.WriteByte(s[i])
			continue
		}
		b.WriteString(get(s[j:k]))
		if brace {
			k++
		}
		i = k - 1
	}
	return b.String()
}

// envKeyRe is a variable name (the request's env, --env-file); compiled on
// first use, as placeholderRe.
var envKeyRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// shortOptionPath matches a short option with a path attached (-o/x,
// -rko/x).
var shortOptionPath = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^-[A-Za-z0-9]*/`) })

// namedValuePath matches an argument that gives a name an absolute path:
// an option's value (--output=/x) or an operand of the NAME=VALUE kind
// (dd's if=/x and of=/x, make's and awk's VAR=/x).
var namedValuePath = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^-*[A-Za-z0-9_.-]+=/`) })

// absoluteOrClimbing reports whether an argument names a path outside the
// page's directory: an absolute path or one with "..", bare or as a
// value: an option's (--output=/x, -o/x), a NAME=VALUE operand's
// (if=/etc/passwd), a response file's (@/x, which gcc and javac read
// their arguments from) or a file: URI's (file:/x, file:///x, which
// sqlite3 and git open).
func absoluteOrClimbing(a string) bool {
	return strings.HasPrefix(a, "/") || strings.Contains(a, "..") || shortOptionPath().MatchString(a) ||
		namedValuePath().MatchString(a) || strings.HasPrefix(a, "@/") ||
		len(a) > 5 && strings.EqualFold(a[:5], "file:") && strings.HasPrefix(a[5:], "/")
}

// checkEnv bounds the request's env and refuses the names that would change
// how a program is found or loaded, or make it run other code: with those,
// a page that allows only `git status` would allow anything.
func checkEnv(env map[string]string) (map[string]string, error) {
	if len(env) > maxEnvVars {
		return nil, fail(http.StatusBadRequest, "env: %d variables; at most %d", len(env), maxEnvVars)
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	total := 0
	for _, k := range keys {
		v := env[k]
		switch {
		case len(k) > maxEnvKey || !envKeyRe().MatchString(k):
			return nil, fail(http.StatusBadRequest, "env: %q is not a variable name (letters, digits, _; at most %d bytes)", k, maxEnvKey)
		case reservedEnv(k):
			return nil, fail(http.StatusBadRequest, "env: %s is reserved and cannot be set by a request", k)
		case runsCode(k) != "":
			return nil, fail(http.StatusBadRequest, "env: %s can make the command run other code (%s); a request may not set it", k, runsCode(k))
		case len(v) > maxEnvValue:
			return nil, fail(http.StatusBadRequest, "env: the value of %s is %d bytes; at most %d", k, len(v), maxEnvValue)
		case strings.IndexFunc(v, unicode.IsControl) >= 0:
			return nil, fail(http.StatusBadRequest, "env: the value of %s contains a control character", k)
		}
		total += len(k) + len(v)
	}
	if total > maxEnvTotal {
		return nil, fail(http.StatusBadRequest, "env: %d bytes in all; at most %d", total, maxEnvTotal)
	}
	return env, nil
}

func runsCode(k string) string {
	if ok, why := sandbox.EnvRunsCode(k); ok {
		return why
	}
	return ""
}

// reservedEnv reports a name a request may not set, in any case: one the
// sandbox drops from every command (policy.DeniedEnv: refused here, with a
// 400, rather than dropped without a word), and the site's own.
func reservedEnv(k string) bool {
	u := strings.ToUpper(k)
	if policy.DeniedEnv(u) {
		return true
	}
	switch u {
	case "PATH", "LANG", "SHELL", "USER", "LOGNAME", "TMPDIR":
		return true
	}
	for _, p := range []string{"LC_", "STATESPACE_", "AGENTBE_"} {
		if strings.HasPrefix(u, p) {
			return true
		}
	}
	return false
}

// exec hands argv to the sandbox, in (and confined to) the page's
// directory.
func (s *Site) exec(ctx context.Context, dir string, argv []string, env map[string]string, strict bool) (ActionResponse, error) {
	// The command is bound to the page's directory (a scope of the site),
	// which the sandbox opens once and binds by descriptor.
	ws, release, err := fsops.WorkDir(s.ws, dir)
	if err != nil {
		return ActionResponse{}, s.fsError(dir, err)
	}
	defer release()
	res, err := s.exe.Run(ctx, sandbox.Request{
		Command:     sandbox.CommandLine(argv...),
		Workspace:   ws,
		Env:         env,
		Timeout:     s.opts.Timeout,
		OutputLimit: s.opts.MaxOutput,
	})
	if err != nil {
		switch errcode.Of(err) {
		case errcode.DangerousOperation, errcode.UnsafeCommand:
			return ActionResponse{}, fail(http.StatusForbidden, "security: %s", errcode.Sentence(err))
		case errcode.TooLarge:
			// An argument over the kernel's bound: the request's doing,
			// not a failure of the daemon's to log (with the argv, which
			// can be megabytes).
			return ActionResponse{}, fail(http.StatusRequestEntityTooLarge, "%s", errcode.Sentence(err))
		}
		s.log.Warn("site: command failed to start", "argv", argv, "err", err)
		return ActionResponse{}, fail(http.StatusInternalServerError, "the command could not be run: %s", errcode.Sentence(err))
	}
	out := ActionResponse{
		Stdout:     string(sandbox.WithTruncationNotice(res.Stdout, res.StdoutSize)),
		Stderr:     string(sandbox.WithTruncationNotice(res.Stderr, res.StderrSize)),
		Returncode: res.ExitCode,
	}
	if res.TimedOut {
		return out, &TimeoutError{Response: out, After: s.opts.Timeout}
	}
	if strict {
		for _, st := range []struct {
			name       string
			kept, size int64
		}{{"stdout", int64(len(res.Stdout)), res.StdoutSize}, {"stderr", int64(len(res.Stderr)), res.StderrSize}} {
			if st.size > st.kept {
				return ActionResponse{}, tooLarge(st.name, st.size, s.opts.MaxOutput)
			}
		}
	}
	return out, nil
}

// TimeoutError is a command killed at the timeout; Response holds what it
// wrote until then (HTTP 408).
type TimeoutError struct {
	Response ActionResponse
	After    time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("the command timed out after %s and was killed (with every process it started)", e.After)
}

// glob lists the paths under the page's directory that match the pattern
// (fsops' globs: **, {a,b}, dot files), relative to that directory, but
// for the kubelet's own names of a ConfigMap volume (kubeletEntry).
func (s *Site) glob(ctx context.Context, dir string, argv []string) (ActionResponse, error) {
	if len(argv) != 2 {
		return ActionResponse{}, fail(http.StatusBadRequest, "glob takes one pattern: [glob, PATTERN]")
	}
	pattern := strings.TrimLeft(argv[1], "/")
	if strings.Contains(pattern, "..") {
		return ActionResponse{}, fail(http.StatusForbidden, "security: the glob pattern may not contain \"..\"")
	}
	found, err := s.ws.Search(ctx, dir, pattern, fsops.SearchOptions{})
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return ActionResponse{Returncode: 0}, nil
		}
		return ActionResponse{}, s.fsError(dir, err)
	}
	var b strings.Builder
	n := 0
	for _, f := range found {
		rel := strings.TrimPrefix(f, dir+"/")
		if dir == "." {
			rel = strings.TrimPrefix(f, "./")
		}
		// A ConfigMap volume's files are listed once, by their own
		// names, as the overview lists its pages (kubeletEntry).
		if kubeletEntry(rel) {
			continue
		}
		if n++; n > s.opts.MaxListItems {
			continue
		}
		b.WriteString(rel)
		b.WriteByte('\n')
	}
	out := ActionResponse{Stdout: b.String()}
	if n > s.opts.MaxListItems {
		out.Stderr = fmt.Sprintf("glob: %d matches; the first %d are listed\n", n, s.opts.MaxListItems)
	}
	return out, nil
}

// curl is the in-process HTTP client builtin, through the network door:
// [curl, (-X|--request) METHOD, (-H|--header) "K: V"..., (-d|--data) BODY, URL].
// Any other flag is a 400. The body goes to stdout; a refused address is
// 403, a network failure 502.
func (s *Site) curl(ctx context.Context, argv []string, strict bool) (ActionResponse, error) {
	method, body, target := "", "", ""
	hdr := http.Header{}
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		next := func() (string, error) {
			if i+1 >= len(argv) {
				return "", fail(http.StatusBadRequest, "curl: %s needs a value", a)
			}
			i++
			return argv[i], nil
		}
		var err error
		switch a {
		case "-X", "--request":
			method, err = next()
		case "-H", "--header":
			var h string
			if h, err = next(); err == nil {
				k, v, ok := strings.Cut(h, ":")
				if !ok || strings.TrimSpace(k) == "" {
					return ActionResponse{}, fail(http.StatusBadRequest, "curl: header %q is not \"Name: value\"", h)
				}
				hdr.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			}
		case "-d", "--data":
			body, err = next()
			if method == "" {
				method = http.MethodPost
			}
		default:
			if strings.HasPrefix(a, "-") {
				return ActionResponse{}, fail(http.StatusBadRequest, "curl: %s is not supported (only -X, -H, -d and a URL)", a)
			}
			if target != "" {
				return ActionResponse{}, fail(http.StatusBadRequest, "curl: one URL only")
			}
			target = a
		}
		if err != nil {
			return ActionResponse{}, err
		}
	}
	if target == "" {
		return ActionResponse{}, fail(http.StatusBadRequest, "curl: no URL")
	}
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, strings.ToUpper(method), target, strings.NewReader(body))
	if err != nil {
		return ActionResponse{}, fail(http.StatusBadRequest, "curl: %v", err)
	}
	req.Header = hdr
	res, err := s.opts.Net.Fetch(ctx, req)
	var be *netguard.BlockedError
	switch {
	case errors.As(err, &be):
		return ActionResponse{}, fail(http.StatusForbidden, "security: %v", be)
	case err != nil:
		return ActionResponse{}, fail(http.StatusBadGateway, "curl: %v", err)
	}
	if res.Truncated && strict {
		return ActionResponse{}, fail(http.StatusRequestEntityTooLarge, "output too large: the response body is over the limit of %d bytes (strict output; a request with \"Prefer: handling=lenient\" gets it cut with a notice)", len(res.Body))
	}
	out := ActionResponse{Stdout: string(res.Body)}
	if res.Truncated {
		out.Stderr = fmt.Sprintf("curl: the response was cut at %d bytes\n", len(res.Body))
	}
	return out, nil
}

// marshal is the JSON of a response.
func marshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

package extensions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/fsnotify/fsnotify"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.starlark.net/starlark"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/internal/opfile"
	"github.com/agentbe/agentbe-daemon/internal/resolvepath"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// Defaults and bounds.
const (
	DefaultMaxSteps      = 100_000_000 // about a second of pure Starlark on one core
	DefaultMaxConcurrent = 4
	DefaultDebounce      = 200 * time.Millisecond
	MaxFileBytes         = 1 << 20
	MaxOutputBytes       = 1 << 20 // a handler's result text
	maxPrintBytes        = 64 << 10
	// stepGrace is how long a call whose deadline passed waits for its
	// thread to stop: a cancelled thread stops at its next step, and the
	// modules' calls (exec, http, sqlite, postgres) end with the call's
	// context. A built-in still running after that (one step of seconds:
	// the "%" of a value nested 10^5 deep) is abandoned: the call is
	// answered, and the step keeps the call's slots until it ends.
	stepGrace = 100 * time.Millisecond
	// maxBurst bounds, in Debounce periods, how long changes that keep
	// coming postpone a reload.
	maxBurst = 10
)

// Options configure a Provider.
type Options struct {
	Dir       string // the extensions directory
	Registry  *registry.Registry
	Workspace fsops.Workspace // where fs and exec work (a call's scope narrows it)
	Executor  sandbox.Executor
	Net       *netguard.Client
	// PostgresNet is the door of the postgres module's connections: the
	// rules of Net (no loopback, private, link-local or metadata address)
	// with the PostgreSQL port, DefaultPostgresPort, when nil.
	PostgresNet *netguard.Client
	// Getenv reads the daemon's environment for env.get (os.LookupEnv when
	// nil); Secrets are values never returned (the daemon's tokens, read at
	// each call, so a token a reload adds is never returned either).
	Getenv  func(string) (string, bool)
	Secrets *clip.Secrets
	// EnvAllow are the variables every extension may read with env.get
	// besides those it declares in env=[...] (the operator's
	// --extensions-env): names, or PREFIX_* for every name with the prefix.
	EnvAllow []string
	// DBHosts are the hosts every extension's postgres calls may connect
	// to besides its allowed_db_hosts (the operator's
	// --extensions-db-hosts); the network door's rules still apply.
	DBHosts []string
	// MaxSteps bounds the Starlark steps of one call (and of loading a file).
	MaxSteps uint64
	// MaxHeapBytes bounds the daemon's Go heap while extension code runs
	// (heapwatch.go): past it every running call, and every file loading,
	// is cancelled. DefaultMaxHeapBytes when 0; negative: no bound.
	MaxHeapBytes int64
	// MaxConcurrent bounds the calls of one extension running at once.
	MaxConcurrent int
	// Debounce waits for a burst of file changes to end before reloading.
	Debounce time.Duration
	// BareNames names each tool by its own name (get_cat_fact), as
	// starlark-mcp does, instead of extension__tool: for a server that
	// serves nothing but extensions (`agent-backend extensions serve`).
	// Two extensions that declare the same tool name then collide, and the
	// registry refuses the second file's tools, naming both.
	BareNames bool
	Logger    *slog.Logger
}

// Health is /health's view of one extension file.
type Health struct {
	File string `json:"file"`
	Name string `json:"name,omitempty"`
	// State is ready; failed (and still serving its last good version, if
	// any); or degraded: ready, with Runaway calls.
	State     string `json:"state"`
	Tools     int    `json:"tools"`
	LastError string `json:"last_error,omitempty"`
	// Runaway counts the calls answered at their deadline whose Starlark
	// step (a built-in that does not look at cancellation) still runs:
	// each keeps its slot of the extension's MaxConcurrent, and of the
	// registry's, until it ends.
	Runaway int `json:"runaway,omitempty"`
}

type loaded struct {
	ext *Extension // the version serving, nil if none ever loaded
	// fi, mod and size are the stat of the file last read (through its
	// links), to tell a new version; fi is nil after a refused link.
	fi      os.FileInfo
	mod     time.Time
	size    int64
	lastErr string
	calls   *calls
}

// calls are an extension file's calls, whichever version they run.
type calls struct {
	sem     chan struct{} // a slot per call running, MaxConcurrent
	runaway atomic.Int64  // calls answered whose step still runs
}

// Provider serves a directory of extensions.
type Provider struct {
	dir  string
	opts Options
	log  *slog.Logger

	mu    sync.Mutex
	files map[string]*loaded
	heap  *heapWatch

	watcher *fsnotify.Watcher
	watched map[string]bool // directories watchDirs watches
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// Start loads every extension of the directory and watches it. A file that
// fails to load is logged and reported in Health; it does not stop the
// others. The directory itself must exist, and pass CheckDir.
func Start(opts Options) (*Provider, error) {
	if err := CheckDir(opts.Dir); err != nil {
		return nil, err
	}
	p, err := newProvider(opts)
	if err != nil {
		return nil, err
	}
	// The watcher first, so that nothing changed after the first load
	// goes unseen; reload adds the directories links lead into.
	if w, err := fsnotify.NewWatcher(); err == nil && w.Add(p.dir) == nil {
		p.watcher = w
	} else {
		if w != nil {
			w.Close()
		}
		p.log.Warn("extensions: cannot watch the directory; polling every second instead", "dir", p.dir, "err", err)
	}
	p.reload()
	go p.watch()
	return p, nil
}

func newProvider(opts Options) (*Provider, error) {
	abs, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	// The real directory: load() confines a file to it once the file's
	// own links are followed, so a directory named through a link (an
	// --extensions path through /etc/alternatives or a symlinked home)
	// must be compared as what it leads to.
	if real, err := resolvepath.Resolve(abs); err == nil {
		abs = real
	}
	if opts.MaxSteps == 0 {
		opts.MaxSteps = DefaultMaxSteps
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = DefaultMaxConcurrent
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.Getenv == nil {
		opts.Getenv = os.LookupEnv
	}
	if opts.Net == nil {
		opts.Net = netguard.New(netguard.Options{})
	}
	if opts.PostgresNet == nil {
		opts.PostgresNet = netguard.New(netguard.Options{AllowPorts: []uint16{DefaultPostgresPort}})
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{dir: abs, opts: opts, log: log, files: map[string]*loaded{}, watched: map[string]bool{}, heap: newHeapWatch(opts.MaxHeapBytes),
		stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// Close stops watching and withdraws every tool. A Starlark step still
// running after its call was answered (Health's Runaway) cannot be stopped;
// Close does not wait for it.
func (p *Provider) Close() error {
	p.once.Do(func() {
		close(p.stop)
		<-p.done
		if p.watcher != nil {
			p.watcher.Close()
		}
		p.mu.Lock()
		for f := range p.files {
			_ = p.opts.Registry.Set(provider(f), nil)
		}
		p.mu.Unlock()
		p.opts.Net.CloseIdleConnections()
	})
	return nil
}

func provider(file string) string { return "extension:" + file }

// watch reloads after changes, debounced; without a watcher it polls.
func (p *Provider) watch() {
	defer close(p.done)
	var events <-chan fsnotify.Event
	var errs <-chan error
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	if p.watcher != nil {
		events, errs = p.watcher.Events, p.watcher.Errors
		poll.Stop()
	}
	var timer *time.Timer
	var fire <-chan time.Time
	var burst time.Time // when the first change of the pending reload came
	for {
		select {
		case <-p.stop:
			if timer != nil {
				timer.Stop()
			}
			return
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			// Any change in the directory: a *.star file, or a link one
			// leads through (a ConfigMap's ..data, swapped by a rename of
			// ..data_tmp over it), or a file in a directory a link leads
			// into (watchDirs). A reload of what did not change is a stat
			// of each file. A burst that never ends (whoever may write
			// the directory touching a file of theirs without pause)
			// postpones the reload by at most maxBurst.
			switch {
			case fire == nil:
				burst = time.Now()
				if timer == nil {
					timer = time.NewTimer(p.opts.Debounce)
				} else {
					timer.Reset(p.opts.Debounce)
				}
				fire = timer.C
			case time.Since(burst) < maxBurst*p.opts.Debounce:
				timer.Reset(p.opts.Debounce)
			}
		case err, ok := <-errs:
			if ok {
				p.log.Warn("extensions: watching the directory", "err", err)
			} else {
				errs = nil
			}
		case <-fire:
			fire = nil
			p.reload()
		case <-poll.C:
			p.reload()
		}
	}
}

// watchDirs watches the directories inside the extensions directory that
// its links lead into (a ConfigMap's timestamped directory), and stops
// watching those no link leads into any more: an edit there, in place, is
// seen as one in the directory is. It runs on reload's goroutine.
func (p *Provider) watchDirs(dirs map[string]bool) {
	if p.watcher == nil {
		return
	}
	for d := range p.watched {
		if !dirs[d] {
			_ = p.watcher.Remove(d) // a directory removed is unwatched already
			delete(p.watched, d)
		}
	}
	for d := range dirs {
		if p.watched[d] {
			continue
		}
		if err := p.watcher.Add(d); err != nil {
			p.log.Warn("extensions: cannot watch a directory a link leads into; its files are seen changed at the next change of the directory", "dir", d, "err", err)
			continue
		}
		p.watched[d] = true
	}
}

// CheckDir refuses a directory of extensions that is not one, or that a
// user other than root and the daemon's could change (opfile.CheckModes:
// owned by another user, or writable by its group or others, or lying in
// such a directory), and names each *.star file in it that such a user
// could change or has put there (in a sticky directory others may write,
// a file of theirs is refused by its owner), and each extension file that
// is a symlink the provider refuses to follow (resolve: one leading out
// of the directory, to what is not a regular file, or in a loop): the code
// the daemon runs is judged as every file that grants rights is. It is
// --check-config's check and Start's; each file is judged again when it
// is read (readSource), so one changed later fails to load and the last
// good version serves.
func CheckDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a directory of *.star extensions", dir)
	}
	if err := opfile.CheckModes(dir); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	real, err := realDir(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	entries, err := os.ReadDir(real)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".star") {
			continue
		}
		p := filepath.Join(dir, n)
		if err := opfile.CheckModes(p); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		if e.Type()&fs.ModeSymlink != 0 && !strings.HasSuffix(n, "_test.star") {
			if _, _, err := resolve(real, n); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// realDir is dir as an absolute path without symlinks: what a file's
// resolved path must lie under.
func realDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	real, err := resolvepath.Resolve(abs)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(real); err != nil {
		return "", err
	}
	return real, nil
}

// list lists the extension files (not *_test.star) of the directory:
// regular files and symlinks (resolve judges where they lead).
func (p *Provider) list() ([]string, error) {
	out, err := listDir(p.dir, func(n string) bool { return !strings.HasSuffix(n, "_test.star") })
	sort.Strings(out)
	return out, err
}

// reload loads the files that changed, keeps the last good version of
// those that fail, and withdraws the tools of files that are gone.
func (p *Provider) reload() {
	names, err := p.list()
	if err != nil {
		p.log.Error("extensions: listing the directory", "dir", p.dir, "err", err)
		return
	}
	seen := map[string]bool{}
	dirs := map[string]bool{}
	judge := new(opfile.Judge) // the directories links lead into, judged once per reload
	for _, f := range names {
		real, fi, rerr := resolve(p.dir, f)
		if errors.Is(rerr, fs.ErrNotExist) {
			// Gone, or a link to nothing: a ConfigMap key dropped, whose
			// link outlives the ..data swap for a moment.
			continue
		}
		seen[f] = true
		if d := filepath.Dir(real); rerr == nil && d != p.dir && judge.CheckModes(d) == nil {
			// Watched only when the rights rule passes it (root's or
			// the daemon's user's, and theirs alone to change): the
			// watches are bounded by what they made, never by the
			// directories another user makes in a sticky mount point
			// and plants links into.
			dirs[d] = true
		}
		p.mu.Lock()
		cur := p.files[f]
		p.mu.Unlock()
		if rerr == nil && cur != nil && cur.fi != nil && os.SameFile(cur.fi, fi) && cur.mod.Equal(fi.ModTime()) && cur.size == fi.Size() {
			continue
		}
		if rerr != nil && cur != nil && cur.fi == nil && cur.lastErr == (&LoadError{File: f, Msg: rerr.Error()}).Error() {
			continue // refused already, for the same reason
		}
		if cur == nil {
			cur = &loaded{calls: &calls{sem: make(chan struct{}, p.opts.MaxConcurrent)}}
		}
		next := *cur
		var ext *Extension
		var err error
		if rerr != nil {
			// A link refused: the file fails to load, and is looked at
			// again at every reload until it leads somewhere allowed.
			next.fi, next.mod, next.size = nil, time.Time{}, 0
			err = &LoadError{File: f, Msg: rerr.Error()}
		} else {
			// The stat of the file the name leads to: a ConfigMap update
			// is a new file (another inode) through the same link.
			next.fi, next.mod, next.size = fi, fi.ModTime(), fi.Size()
			ext, err = p.loadFile(f)
		}
		if err == nil {
			err = p.opts.Registry.Set(provider(f), p.tools(ext, next.calls))
		}
		if err != nil {
			next.lastErr = err.Error()
			state := "failed"
			detail := err.Error()
			if next.ext != nil {
				detail += " (serving the last good version)"
			}
			p.opts.Registry.SetState(provider(f), state, detail)
			if rerr != nil {
				p.log.Warn("extension: a symlink not followed", "file", f, "err", rerr, "serving_previous", next.ext != nil)
			} else {
				p.log.Error("extension did not load", "file", f, "err", err, "serving_previous", next.ext != nil)
			}
		} else {
			next.ext, next.lastErr = ext, ""
			p.opts.Registry.SetState(provider(f), "ready", "")
			p.log.Info("extension loaded", "file", f, "name", ext.Name, "tools", len(ext.Tools))
		}
		p.mu.Lock()
		p.files[f] = &next
		p.mu.Unlock()
	}
	p.watchDirs(dirs)
	p.mu.Lock()
	for f := range p.files {
		if !seen[f] {
			delete(p.files, f)
			_ = p.opts.Registry.Set(provider(f), nil)
			p.opts.Registry.SetState(provider(f), "removed", "")
			p.log.Info("extension removed", "file", f)
		}
	}
	p.mu.Unlock()
}

// Health reports every extension file.
func (p *Provider) Health() []Health {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Health, 0, len(p.files))
	for f, l := range p.files {
		h := Health{File: f, State: "ready", LastError: l.lastErr, Runaway: int(l.calls.runaway.Load())}
		if l.ext != nil {
			h.Name, h.Tools = l.ext.Name, len(l.ext.Tools)
		}
		switch {
		case l.lastErr != "":
			h.State = "failed"
		case h.Runaway > 0:
			h.State = "degraded"
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out
}

// tools turns an extension into registry tools bound to this version: a
// call that started keeps its version whatever a reload does meanwhile.
func (p *Provider) tools(ext *Extension, c *calls) []registry.Tool {
	out := make([]registry.Tool, 0, len(ext.Tools))
	for _, t := range ext.Tools {
		var ann *mcp.ToolAnnotations
		if t.Annotations != nil {
			ann = &mcp.ToolAnnotations{ReadOnlyHint: t.Annotations["readOnlyHint"], IdempotentHint: t.Annotations["idempotentHint"]}
			if v, ok := t.Annotations["destructiveHint"]; ok {
				ann.DestructiveHint = &v
			}
			if v, ok := t.Annotations["openWorldHint"]; ok {
				ann.OpenWorldHint = &v
			}
		}
		name := ext.Name + "__" + t.Name
		if p.opts.BareNames {
			name = t.Name
		}
		out = append(out, registry.Tool{
			Name: name, Title: t.Title, Description: t.Description,
			InputSchema: t.schema(), Annotations: ann,
			// A script may run commands (the exec module) wherever the
			// daemon can.
			RunsCommands: p.opts.Executor != nil,
			Handler: func(ctx context.Context, call registry.Call) *mcp.CallToolResult {
				return p.call(ctx, ext, t, c, call)
			},
		})
	}
	return out
}

// newThread is a thread for file rel: load() confined to the directory,
// print() to the daemon's log, at most maxPrintBytes of it (the last
// message that fits cut).
func (p *Provider) newThread(rel string, ext *Extension) *starlark.Thread {
	printed := 0
	t := &starlark.Thread{
		Name: rel,
		Print: func(_ *starlark.Thread, msg string) {
			if printed >= maxPrintBytes {
				return
			}
			msg = cutText(msg, maxPrintBytes-printed)
			printed += len(msg)
			p.log.Info("extension print", "file", rel, "msg", msg)
		},
	}
	cache := map[string]starlark.StringDict{}
	t.Load = func(th *starlark.Thread, module string) (starlark.StringDict, error) {
		return p.load(th, rel, module, cache, 0)
	}
	return t
}

// load reads another file of the directory for load(); nothing outside it.
func (p *Provider) load(th *starlark.Thread, from, module string, cache map[string]starlark.StringDict, depth int) (starlark.StringDict, error) {
	if depth > 16 {
		return nil, errors.New("load: nested more than 16 deep")
	}
	name := filepath.Clean(filepath.FromSlash(module))
	if !strings.HasSuffix(name, ".star") {
		name += ".star" // load("cat_facts", ...), as starlark-mcp's test files write it
	}
	if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("load(%q): only .star files inside the extensions directory", module)
	}
	if g, ok := cache[name]; ok {
		if g == nil {
			return nil, fmt.Errorf("load(%q): a cycle", module)
		}
		return g, nil
	}
	full := filepath.Join(p.dir, name)
	// Read as an extension file is (readSource): through links only to a
	// regular file inside the directory, judged by opfile's rule.
	src, err := readSource(p.dir, name)
	if err != nil {
		return nil, fmt.Errorf("load(%q): %v", module, err)
	}
	cache[name] = nil
	sub := &starlark.Thread{Name: name, Print: th.Print, Load: func(t2 *starlark.Thread, m string) (starlark.StringDict, error) {
		return p.load(t2, name, m, cache, depth+1)
	}}
	sub.SetMaxExecutionSteps(p.opts.MaxSteps)
	unwatch := p.heap.watch(sub)
	g, err := starlark.ExecFileOptions(fileOptions, sub, full, src, p.predeclared())
	unwatch()
	if err != nil {
		delete(cache, name)
		return nil, err
	}
	cache[name] = g
	return g, nil
}

// call runs one tool call: the per-extension cap, the arguments, the
// handler under the step limit and the call's deadline, the result.
//
// The thread runs on a goroutine of its own, so that the call is answered
// at its deadline whatever the thread is doing: cancelling a thread stops
// it at its next step, and one step, a built-in that does not look at
// cancellation, can take far longer. Such a step cannot be stopped, so it
// keeps its slots (the extension's, and the registry's through
// Call.Detach) until it ends, and counts as runaway in Health meanwhile.
func (p *Provider) call(ctx context.Context, ext *Extension, t Tool, c *calls, call registry.Call) *mcp.CallToolResult {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return failure(errcode.Timeout, fmt.Sprintf("extension %s is running %d calls (its limit); this one's time ran out waiting", ext.Name, cap(c.sem)))
	}
	args, err := arguments(t, call.Args)
	if err != nil {
		<-c.sem
		return failure(errcode.InvalidArgument, err.Error())
	}
	ws := call.Workspace
	if ws == nil {
		ws = p.opts.Workspace
	}
	thread := p.newThread(ext.File, ext)
	thread.SetLocal(localCtx, ctx)
	thread.SetLocal(localExt, ext)
	thread.SetLocal(localWS, ws)
	thread.SetLocal(localReadOnly, call.ReadOnly)
	thread.SetMaxExecutionSteps(p.opts.MaxSteps)
	stop := context.AfterFunc(ctx, func() { thread.Cancel("the call's time ran out") })
	unwatch := p.heap.watch(thread)
	release := call.Detach()
	const running, finished, abandoned = 0, 1, 2
	var state atomic.Int32
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res := p.run(ctx, thread, ext, t, args)
		stop()
		unwatch()
		<-c.sem
		release()
		if !state.CompareAndSwap(running, finished) {
			c.runaway.Add(-1)
			p.log.Info("extension: the step of a call answered at its deadline ended", "file", ext.File, "tool", t.Name)
		}
		done <- res
	}()
	select {
	case res := <-done:
		return res
	case <-ctx.Done():
	}
	grace := time.NewTimer(stepGrace)
	defer grace.Stop()
	select {
	case res := <-done:
		return res
	case <-grace.C:
	}
	c.runaway.Add(1) // before the goroutine can see it abandoned and uncount it
	if !state.CompareAndSwap(running, abandoned) {
		c.runaway.Add(-1)
		return <-done
	}
	p.log.Warn("extension: a call's deadline passed inside one Starlark step; answered, the step keeps running and holds its slot", "file", ext.File, "tool", t.Name)
	return failure(errcode.Timeout, fmt.Sprintf("%s__%s: the call's time ran out inside one step (a built-in), which is still running", ext.Name, t.Name))
}

// run calls the handler and converts its result; a panic (in a built-in)
// is an error result and logged, as the registry does on its goroutine.
func (p *Provider) run(ctx context.Context, thread *starlark.Thread, ext *Extension, t Tool, args *starlark.Dict) (res *mcp.CallToolResult) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("extension call panicked", "file", ext.File, "tool", t.Name, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			res = failure(errcode.ExecFailed, fmt.Sprintf("%s__%s failed with an internal error; the daemon's log has the details", ext.Name, t.Name))
		}
	}()
	v, err := starlark.Call(thread, t.Handler, starlark.Tuple{args}, nil)
	if err != nil {
		code := errcode.ExecFailed
		if ctx.Err() != nil {
			code = errcode.Timeout
		}
		return failure(code, cutText(fmt.Sprintf("%s__%s: %s", ext.Name, t.Name, evalMessage(err)), MaxOutputBytes))
	}
	res, err = result(v)
	if err != nil {
		return failure(errcode.ExecFailed, fmt.Sprintf("%s__%s returned %v", ext.Name, t.Name, err))
	}
	return res
}

// cutText is s, or when it is longer than n bytes, s cut (on a rune
// boundary) to n bytes with the note that says so.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return withCutNote(s, n)
}

const cutNote = " … (cut)"

// withCutNote is s cut to fit n bytes with cutNote after it.
func withCutNote(s string, n int) string {
	i := min(max(n-len(cutNote), 0), len(s))
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + cutNote
}

// evalMessage is a Starlark error with where it happened: the innermost
// frame of the extension's code (a built-in's frame has no place).
func evalMessage(err error) string {
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		for i := len(ee.CallStack) - 1; i >= 0; i-- {
			if pos := ee.CallStack[i].Pos; pos.Line > 0 {
				return fmt.Sprintf("%s (%s:%d)", ee.Msg, filepath.Base(pos.Filename()), pos.Line)
			}
		}
		return ee.Msg
	}
	return err.Error()
}

// arguments converts the call's JSON into the handler's dict, with the
// declared defaults filled in and the required parameters checked.
func arguments(t Tool, raw json.RawMessage) (*starlark.Dict, error) {
	d := starlark.NewDict(len(t.Params))
	if len(raw) > 0 && string(raw) != "null" {
		v, err := FromJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("arguments: %v", err)
		}
		var ok bool
		if d, ok = v.(*starlark.Dict); !ok {
			return nil, errors.New("arguments must be a JSON object")
		}
	}
	for _, p := range t.Params {
		if _, found, _ := d.Get(starlark.String(p.Name)); found {
			continue
		}
		switch {
		case p.Default != nil:
			d.SetKey(starlark.String(p.Name), p.Default)
		case p.Required:
			return nil, fmt.Errorf("missing required parameter %q", p.Name)
		}
	}
	return d, nil
}

// result turns a handler's return value into a tool result: a dict with
// "content" is an MCP result; anything else is text (a string) or JSON.
func result(v starlark.Value) (*mcp.CallToolResult, error) {
	if d, ok := v.(*starlark.Dict); ok {
		if _, has, _ := d.Get(starlark.String("content")); has {
			b, err := toJSONLimit(d, MaxOutputBytes)
			if err != nil {
				return nil, err
			}
			var res mcp.CallToolResult
			if err := json.Unmarshal(b, &res); err != nil {
				return nil, fmt.Errorf("a result dict that is not an MCP result: %v", err)
			}
			return &res, nil
		}
	}
	var text string
	if s, ok := starlark.AsString(v); ok {
		text = s
	} else if v == starlark.None {
		text = ""
	} else {
		b, err := toJSONLimit(v, MaxOutputBytes)
		if err != nil {
			return nil, err
		}
		text = string(b)
	}
	if len(text) > MaxOutputBytes {
		return nil, fmt.Errorf("a result of %d bytes; the limit is %d", len(text), MaxOutputBytes)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
}

func failure(code errcode.Code, text string) *mcp.CallToolResult {
	return registry.WithCode(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}, code)
}

// jsonRaw keeps a JSON value as is inside a schema map.
type jsonRaw = json.RawMessage

// A file of the extensions directory is a regular file, or a symlink that
// leads to a regular file inside the directory: the layout the kubelet
// gives a ConfigMap or Secret volume (DIR/x.star -> ..data/x.star,
// DIR/..data -> ..2026_11_28_10_00_00.123456789, the timestamped
// directory holding the files, and an update a new timestamped directory
// and a ..data_tmp link renamed over ..data). A link that leads out of the
// directory, to what is not a regular file, or nowhere it can follow (a
// loop) is refused, naming it and where it leads; one that leads to
// nothing that exists is no file at all (a key the ConfigMap dropped,
// between the ..data swap and the removal of its link).

// resolve finds the file rel, a name under dir (a real path: no symlink in
// it), stands for: its real path (rel's own when no link is followed) and
// that file's stat. An error matching fs.ErrNotExist is a missing file or
// a link to nothing; any other error is a refusal that names the link and
// where it leads. A name that is not a link and not a regular file (a FIFO
// put there) is returned as it is: opfile.Read refuses it without opening
// it, and a listing leaves it out.
func resolve(dir, rel string) (string, fs.FileInfo, error) {
	full := filepath.Join(dir, rel)
	// Where the name leads, walked as the rights rule walks it
	// (resolvepath, the one walker of an operator's path).
	real, err := resolvepath.Walk(full, nil)
	if err != nil {
		return "", nil, fmt.Errorf("%s cannot be followed: %v", linkTo(full), err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		// A link to nothing is a missing file (fs.ErrNotExist).
		return "", nil, err
	}
	if real != full && !inside(dir, real) {
		return "", nil, fmt.Errorf("%s leads to %s: not a file inside the extensions directory %s, refused (a link is followed only to a regular file inside it, as a ConfigMap's through ..data are)", linkTo(full), real, dir)
	}
	if real != full && !fi.Mode().IsRegular() {
		return "", nil, fmt.Errorf("%s leads to %s, %s: refused (a link is followed only to a regular file)", linkTo(full), real, kind(fi.Mode()))
	}
	return real, fi, nil
}

// readSource reads the extension file rel of dir as every file that grants
// rights is (opfile.ReadWhere: the name as given judged by
// opfile.CheckModes, each link on the way and the file it leads to owned
// by root or the daemon's user and not writable by others; read without
// blocking, only if regular, at most MaxFileBytes; the way judged again
// once the file is open, and the file read the one it leads to), after
// resolve has refused, naming them, the links it does not follow. The
// file read must lie inside the directory: the judged walk says where it
// is, so a way that changed between resolve and the read (a ConfigMap's
// ..data swapped, a link another user plants and takes away) is held to
// the same rule. A read that meets such a change (opfile.ErrChanged) is
// tried again, a few times.
func readSource(dir, rel string) ([]byte, error) {
	full := filepath.Join(dir, rel)
	for tries := 1; ; tries++ {
		if _, _, err := resolve(dir, rel); err != nil {
			return nil, unwrapPath(err)
		}
		if afterResolve != nil {
			afterResolve(rel)
		}
		src, at, err := opfile.ReadWhere(full, MaxFileBytes)
		if errors.Is(err, opfile.ErrChanged) && tries < 3 {
			continue
		}
		if err != nil {
			return nil, err
		}
		if at != full && !inside(dir, at) {
			return nil, fmt.Errorf("%s leads to %s: not a file inside the extensions directory %s, refused", linkTo(full), at, dir)
		}
		return src, nil
	}
}

// afterResolve, when set, runs between readSource's resolve and its read:
// the tests change the directory there.
var afterResolve func(rel string)

// linkTo names a link and, when the name itself is one, its target:
// "x.star (a symlink to ../elsewhere/x.star)".
func linkTo(full string) string {
	if target, err := os.Readlink(full); err == nil {
		return fmt.Sprintf("%s (a symlink to %s)", full, target)
	}
	return full
}

// inside reports whether the real path p lies under the directory dir.
func inside(dir, p string) bool {
	return strings.HasPrefix(p, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
}

// kind says what a file that is not a regular one is (opfile.TypeName's
// wording).
func kind(m fs.FileMode) string {
	name := opfile.TypeName(m)
	if strings.HasPrefix(name, "not a regular file") {
		return name
	}
	return name + ", not a regular file"
}

// unwrapPath is a missing file's error without the path that names it
// again (the caller names the file).
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// listDir lists the *.star entries of dir (a real path) that keep says to
// keep and that are regular files or symlinks; what a link leads to is
// resolve's to judge.
func listDir(dir string, keep func(name string) bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".star") || !keep(n) {
			continue
		}
		if t := e.Type(); t.IsRegular() || t&fs.ModeSymlink != 0 {
			out = append(out, n)
		}
	}
	return out, nil
}

// Package transactions runs commands as transactions: `exec {command,
// transaction: true}` runs the command on a copy-on-write overlay of the
// workspace (sandbox Request.Overlay, bwrap mode only), so the workspace is
// untouched; the result carries the change set, as checkpoint_diff shows
// one, and a transaction id. transaction_apply makes those changes, each
// file replaced atomically, and refuses, listing the conflicts, when the
// workspace changed underneath since (fsops/checkpoint's Upper.Apply);
// transaction_discard drops them. A pending transaction holds its upper
// layer (a tmpfs of at most MaxBytes and MaxFiles) until it is applied,
// discarded, expires (TTL) or the daemon closes; at most MaxPending are
// pending at once. A transaction belongs to the workspace (scope) it ran
// in, and only that scope sees, applies or discards it.
package transactions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/fsops/checkpoint"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// Defaults of Options.
const (
	DefaultMaxBytes   = 256 << 20
	DefaultMaxFiles   = 20000
	DefaultMaxPending = 8
	DefaultTTL        = 30 * time.Minute
)

// Options configure a Manager.
type Options struct {
	Executor sandbox.Executor
	// Dir is where transaction directories are made: the daemon's
	// <state-dir>/transactions, outside the workspace.
	Dir string
	// MaxBytes and MaxFiles bound one transaction's upper layer: the
	// command's writes past either fail (ENOSPC) and the transaction is
	// refused, naming the limit.
	MaxBytes, MaxFiles int64
	// MaxPending bounds the transactions pending at once; TTL is how long
	// one waits to be applied or discarded.
	MaxPending int
	TTL        time.Duration
	Logger     *slog.Logger
	// now is the clock (tests).
	now func() time.Time
}

// Manager holds the pending transactions.
type Manager struct {
	opts Options
	log  *slog.Logger

	// dir holds this daemon's transaction directories: Options.Dir/d-<random>,
	// locked for the Manager's life (sandbox.OverlayParent), so that daemons
	// sharing a state directory, in whatever pid namespaces, keep out of
	// each other's.
	parent *sandbox.OverlayParent
	dir    string

	mu      sync.Mutex
	pending map[string]*tx
	// running counts the transactions whose command runs: each holds an
	// upper layer too, so they count against MaxPending with the pending.
	running int
	closed  bool
	stop    chan struct{}
	swept   sync.WaitGroup
}

// tx is one pending transaction.
type tx struct {
	id, scope, command string
	dir                string
	upper              *checkpoint.Upper
	created, expires   time.Time
	exitCode           int
	busy               bool // an apply is under way
}

// New builds a Manager and clears what earlier daemons left in Dir (their
// transactions died with them: the upper layers were in memory).
func New(opts Options) (*Manager, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxFiles <= 0 {
		opts.MaxFiles = DefaultMaxFiles
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The directory is cleared of what dead daemons left: a relative one
	// would be whatever the daemon's working directory holds (often the
	// project itself), so only an absolute one is taken.
	if !filepath.IsAbs(opts.Dir) {
		return nil, fmt.Errorf("transactions directory %q: must be an absolute path (it is under --state-dir, which must be absolute)", opts.Dir)
	}
	if err := sandbox.ClearOverlayDirs(opts.Dir); err != nil {
		return nil, fmt.Errorf("transactions directory %s: %w", opts.Dir, err)
	}
	parent, err := sandbox.NewOverlayParent(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("transactions directory %s: %w", opts.Dir, err)
	}
	m := &Manager{opts: opts, log: log, pending: map[string]*tx{}, stop: make(chan struct{}),
		parent: parent, dir: parent.Dir}
	m.swept.Add(1)
	go m.sweeper()
	return m, nil
}

// sweeper discards expired transactions.
func (m *Manager) sweeper() {
	defer m.swept.Done()
	every := min(m.opts.TTL/4, time.Minute)
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.expire()
		}
	}
}

// expire discards the transactions past their TTL.
func (m *Manager) expire() {
	now := m.opts.now()
	m.mu.Lock()
	var gone []*tx
	for id, t := range m.pending {
		if !t.busy && now.After(t.expires) {
			delete(m.pending, id)
			gone = append(gone, t)
		}
	}
	m.mu.Unlock()
	for _, t := range gone {
		m.log.Info("transaction expired", "id", t.id, "scope", t.scope, "ttl", m.opts.TTL)
		m.drop(t)
	}
}

func (m *Manager) drop(t *tx) {
	if t.upper != nil {
		t.upper.Close()
	}
	if err := sandbox.RemoveOverlayDir(t.dir); err != nil {
		m.log.Warn("transaction directory not removed", "dir", t.dir, "err", err)
	}
}

// Close discards every pending transaction and stops the sweeper.
// Idempotent.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	all := m.pending
	m.pending = map[string]*tx{}
	m.mu.Unlock()
	close(m.stop)
	m.swept.Wait()
	for _, t := range all {
		m.drop(t)
	}
	if err := m.parent.Close(); err != nil {
		m.log.Warn("transactions directory not removed", "dir", m.dir, "err", err)
	}
	return nil
}

// Pending is how many transactions are pending (/health, metrics).
func (m *Manager) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}

// Result is what a transaction's command gave.
type Result struct {
	ID       string               `json:"transaction,omitempty"`
	Expires  time.Time            `json:"expires,omitzero"`
	Run      sandbox.Result       `json:"-"`
	Changes  checkpoint.ChangeSet `json:"changes"`
	ExitCode int                  `json:"exitCode"`
}

// Run runs req (its Workspace set: the caller's) as a transaction. A
// command that changed nothing leaves no transaction (ID empty). The
// error is the sandbox's refusal (not bwrap, the overlay refused), a full
// pending list or a full upper layer, each naming its limit.
func (m *Manager) Run(ctx context.Context, req sandbox.Request) (Result, error) {
	ws, ok := req.Workspace.(fsops.Workspace)
	if !ok || ws == nil {
		return Result{}, &errcode.Error{Code: errcode.InvalidArgument, Op: "exec", Msg: "a transaction needs the caller's workspace"}
	}
	scope := ws.Root()
	m.expire()
	m.mu.Lock()
	switch {
	case m.closed:
		m.mu.Unlock()
		return Result{}, &errcode.Error{Code: errcode.ExecError, Op: "exec", Msg: "the daemon is closing"}
	case len(m.pending)+m.running >= m.opts.MaxPending:
		n := len(m.pending) + m.running
		m.mu.Unlock()
		return Result{}, &errcode.Error{Code: errcode.TooLarge, Op: "exec",
			Msg: fmt.Sprintf("%d transactions are pending or running, the most allowed (--transaction-max-pending %d): apply or discard one first (transaction_apply, transaction_discard)", n, m.opts.MaxPending)}
	}
	m.running++
	m.mu.Unlock()
	counted := true
	uncount := func() {
		if counted {
			m.mu.Lock()
			m.running--
			m.mu.Unlock()
			counted = false
		}
	}
	defer uncount()
	id := newID()
	dir, err := sandbox.NewOverlayDir(m.dir, id)
	if err != nil {
		return Result{}, &errcode.Error{Code: errcode.WriteFailed, Op: "exec", Msg: "cannot make the transaction's directory: " + err.Error(), Err: err}
	}
	req.Overlay = &sandbox.Overlay{Dir: dir, MaxBytes: m.opts.MaxBytes, MaxFiles: m.opts.MaxFiles}
	since := time.Now()
	res, err := m.opts.Executor.Run(ctx, req)
	if err != nil {
		sandbox.RemoveOverlayDir(dir)
		return Result{Run: res}, err
	}
	defer res.Upper.Close()
	if full := fullLayer(res.Upper, m.opts.MaxBytes, m.opts.MaxFiles); full != "" {
		sandbox.RemoveOverlayDir(dir)
		return Result{Run: res, ExitCode: res.ExitCode}, &errcode.Error{Code: errcode.TooLarge, Op: "exec", Command: req.Command,
			Msg: "transaction refused: the command wrote " + full + "; its writes past it failed (no space left on device) and all its changes were discarded. Exit code " + fmt.Sprint(res.ExitCode) + tail(res)}
	}
	// The tmpfs bounds the blocks the layer uses; its files' apparent sizes
	// (a sparse file uses no block) are bounded here, by the same flag:
	// applying the layer writes them whole.
	u, err := checkpoint.ReadUpper(ctx, res.Upper, ws, since, checkpoint.UpperLimits{MaxBytes: m.opts.MaxBytes})
	if err != nil {
		sandbox.RemoveOverlayDir(dir)
		var ce *errcode.Error
		if errors.As(err, &ce) && ce.Code == errcode.TooLarge {
			return Result{Run: res, ExitCode: res.ExitCode}, &errcode.Error{Code: errcode.TooLarge, Op: "exec", Command: req.Command, Err: err,
				Msg: "transaction refused: the command wrote more bytes than a transaction holds (" + strconv.FormatInt(m.opts.MaxBytes, 10) + ", --transaction-max-bytes): " + ce.Msg + "; all its changes were discarded. Exit code " + fmt.Sprint(res.ExitCode) + tail(res)}
		}
		return Result{Run: res, ExitCode: res.ExitCode}, err
	}
	out := Result{Run: res, Changes: u.Set, ExitCode: res.ExitCode}
	if len(u.Set.Changes) == 0 && u.Set.Added+u.Set.Modified+u.Set.Deleted == 0 {
		u.Close()
		sandbox.RemoveOverlayDir(dir)
		return out, nil
	}
	now := m.opts.now()
	t := &tx{id: id, scope: scope, command: req.Command, dir: dir, upper: u, created: now, expires: now.Add(m.opts.TTL), exitCode: res.ExitCode}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.drop(t)
		return out, &errcode.Error{Code: errcode.ExecError, Op: "exec", Msg: "the daemon closed while the command ran; its changes were discarded"}
	}
	m.pending[id] = t
	m.running--
	counted = false
	m.mu.Unlock()
	m.log.Info("transaction pending", "id", id, "scope", scope, "command", req.Command, "changes", len(u.Set.Changes), "bytes", u.Bytes, "files", u.Files)
	out.ID, out.Expires = id, t.expires
	return out, nil
}

// tail is the command's stderr (or stdout) for a refusal, briefly.
func tail(res sandbox.Result) string {
	s := strings.TrimSpace(string(res.Stderr))
	if s == "" {
		s = strings.TrimSpace(string(res.Stdout))
	}
	if s == "" {
		return "."
	}
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return ":\n" + s
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// errNoTx is the answer for an id this scope has no pending transaction of.
func errNoTx(op, id string, ttl time.Duration) error {
	return &errcode.Error{Code: errcode.NotFound, Op: op,
		Msg: fmt.Sprintf("no pending transaction %q in this workspace (applied, discarded, expired after %s, or never made here)", id, ttl)}
}

// take marks scope's transaction id busy and returns it.
func (m *Manager) take(op, scope, id string) (*tx, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.pending[id]
	if t == nil || t.scope != scope {
		return nil, errNoTx(op, id, m.opts.TTL)
	}
	if t.busy {
		return nil, &errcode.Error{Code: errcode.ExecError, Op: op, Msg: "transaction " + id + " is being applied by another call"}
	}
	t.busy = true
	return t, nil
}

// Apply makes transaction id's changes in ws (the caller's workspace: the
// transaction's own scope). On conflicts nothing changes and the error is
// a *checkpoint.ConflictError; the transaction stays pending, to be
// discarded or applied once the conflicts are resolved. Applied, it is
// gone.
func (m *Manager) Apply(ctx context.Context, ws fsops.Workspace, id string) (checkpoint.ChangeSet, error) {
	t, err := m.take("transaction_apply", ws.Root(), id)
	if err != nil {
		return checkpoint.ChangeSet{}, err
	}
	done, err := t.upper.Apply(ctx, ws)
	m.mu.Lock()
	t.busy = false
	var ce *checkpoint.ConflictError
	keep := errors.As(err, &ce)
	if !keep {
		delete(m.pending, id)
	}
	m.mu.Unlock()
	if !keep {
		m.drop(t)
	}
	if err != nil {
		m.log.Info("transaction not applied", "id", id, "scope", t.scope, "err", err)
		return done, err
	}
	m.log.Info("transaction applied", "id", id, "scope", t.scope, "changes", len(done.Changes), "paths", changedPaths(done, 50))
	return done, nil
}

// changedPaths lists up to n paths of s for the log ("… and N more").
func changedPaths(s checkpoint.ChangeSet, n int) string {
	var b strings.Builder
	for i, c := range s.Changes {
		if i == n {
			fmt.Fprintf(&b, " … and %d more", len(s.Changes)-n)
			break
		}
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(c.Kind[:1] + ":" + c.Path)
	}
	return b.String()
}

// Discard drops transaction id of ws's scope.
func (m *Manager) Discard(ws fsops.Workspace, id string) error {
	t, err := m.take("transaction_discard", ws.Root(), id)
	if err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.pending, id)
	m.mu.Unlock()
	m.drop(t)
	m.log.Info("transaction discarded", "id", id, "scope", t.scope)
	return nil
}

// Info describes a pending transaction for transaction_list.
type Info struct {
	ID       string    `json:"id"`
	Command  string    `json:"command"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
	Changes  int       `json:"changes"`
	ExitCode int       `json:"exitCode"`
}

// List is ws's scope's pending transactions, oldest first.
func (m *Manager) List(ws fsops.Workspace) []Info {
	scope := ws.Root()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []Info{}
	for _, t := range m.pending {
		if t.scope == scope {
			s := t.upper.Set
			out = append(out, Info{ID: t.id, Command: t.command, Created: t.created, Expires: t.expires,
				Changes: s.Added + s.Modified + s.Deleted, ExitCode: t.exitCode})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// fullLayer says which limit the upper layer reached ("" for neither).
func fullLayer(f *os.File, maxBytes, maxFiles int64) string {
	free, files, ok := layerFree(f)
	if !ok {
		return ""
	}
	switch {
	case files == 0:
		return fmt.Sprintf("more files than a transaction holds (%d, --transaction-max-files)", maxFiles)
	case free == 0:
		return fmt.Sprintf("more bytes than a transaction holds (%d, --transaction-max-bytes)", maxBytes)
	}
	return ""
}

// layerFree is the upper layer's free bytes and inodes.
func layerFree(f *os.File) (bytes, files uint64, ok bool) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return 0, 0, false
	}
	return st.Bavail * uint64(st.Bsize), st.Ffree, true
}

// Package procs runs background processes for agents: commands that outlive
// the tool call that started them (a dev server, a long build), started,
// followed, signalled and waited for through MCP tools (process_start,
// process_list, process_output, process_wait, process_signal,
// process_kill). Every process goes through the sandbox door with the
// same policy and isolation as exec; its output is kept in a bounded ring
// per stream that a client follows with a cursor; a process belongs to the
// scope that started it, and a client sees and controls only its scope's;
// Close kills them all (the daemon's shutdown).
package procs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// Defaults of Options.
const (
	DefaultMaxProcs    = 16
	DefaultBufferBytes = 1 << 20 // per stream
	// DefaultScopeOutputBytes bounds the output memory of one caller (a
	// scope): its running and remembered processes' buffers together. It
	// is what 16 running processes hold at most (16 × 2 streams × 1 MiB),
	// so a caller's running processes are never cut short by it; its
	// exited processes' output makes room, oldest first.
	DefaultScopeOutputBytes = 32 << 20
	// DefaultOutputBytes bounds the output memory of all callers together
	// (a token may name many scopes).
	DefaultOutputBytes  = 64 << 20
	DefaultMaxWait      = 60 * time.Second
	maxExitedRemembered = 64 // exited processes kept for process_output/list
)

// Options configure a Manager.
type Options struct {
	Executor sandbox.Executor
	// MaxProcs caps the running processes of the whole workspace.
	MaxProcs int
	// Tokens says the daemon admits several tokens (--tokens): then the
	// processes one token started hold at most its share of MaxProcs
	// (admit.CallerShare), so no token's scope can take every slot.
	Tokens bool
	// BufferBytes is how much of each stream is kept (the tail).
	BufferBytes int
	// ScopeOutputBytes and OutputBytes bound the memory that output
	// buffers hold, per scope and in all (see DefaultScopeOutputBytes).
	// A buffer that would grow past either first takes the room of exited
	// processes' output (oldest exit first; their reads say truncated);
	// when there is none left to take, it stops growing and keeps a
	// shorter tail.
	ScopeOutputBytes int64
	OutputBytes      int64
	Logger           *slog.Logger
}

// Manager owns the background processes.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	procs  map[string]*proc
	closed bool
	// starting counts the starts that passed the cap and the closed check
	// but are not in procs yet: they count against MaxProcs (and, in
	// startingBy, against their token's share), and Close waits for them
	// (starts) before it kills what procs holds.
	starting   int
	startingBy map[string]int
	starts     sync.WaitGroup
	held       map[string]int64 // output buffer bytes per scope
	total      int64            // output buffer bytes in all
}

type proc struct {
	id, name, command, scope string
	caller                   string // the token that started it ("" the daemon's), for its share
	started                  time.Time
	pid                      int
	p                        sandbox.Process
	cancel                   context.CancelFunc
	stdout, stderr           *ring
	done                     chan struct{} // closed at exit
	status                   sandbox.ExitStatus
	ended                    time.Time
	held                     int64 // bytes its two rings hold (under Manager.mu)
}

// New makes a Manager; a nil Executor refuses every start.
func New(opts Options) *Manager {
	if opts.MaxProcs <= 0 {
		opts.MaxProcs = DefaultMaxProcs
	}
	if opts.BufferBytes <= 0 {
		opts.BufferBytes = DefaultBufferBytes
	}
	if opts.ScopeOutputBytes <= 0 {
		opts.ScopeOutputBytes = DefaultScopeOutputBytes
	}
	if opts.OutputBytes <= 0 {
		opts.OutputBytes = DefaultOutputBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{opts: opts, log: opts.Logger, procs: map[string]*proc{}, held: map[string]int64{}, startingBy: map[string]int{}}
}

// StartRequest is what process_start takes.
type StartRequest struct {
	Command string
	Name    string
	Env     map[string]string
	// Workspace is where it runs (the caller's scope, or Dir inside it);
	// Scope names the caller's scope, which owns the process.
	Workspace fsops.Workspace
	Scope     string
	// Caller is the token file entry of the caller ("" for the daemon's
	// own token), whose share of MaxProcs the process counts against.
	Caller string
}

// Info describes a process (process_list, process_start).
type Info struct {
	ID        string  `json:"id"`
	Name      string  `json:"name,omitempty"`
	Command   string  `json:"command"`
	PID       int     `json:"pid,omitempty"`
	State     string  `json:"state"` // running, exited
	ExitCode  *int    `json:"exitCode,omitempty"`
	Signal    string  `json:"signal,omitempty"`
	StartedAt string  `json:"startedAt"`
	CPU       float64 `json:"cpuSeconds,omitempty"`
	RSS       int64   `json:"rssBytes,omitempty"`
}

// Start runs a command in the background.
func (m *Manager) Start(req StartRequest) (Info, error) {
	if m.opts.Executor == nil {
		return Info{}, &errcode.Error{Code: errcode.NotImplemented, Op: "process_start", Msg: "this workspace cannot run commands"}
	}
	if strings.TrimSpace(req.Command) == "" {
		return Info{}, &errcode.Error{Code: errcode.EmptyCommand, Op: "process_start", Msg: "empty command"}
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Info{}, &errcode.Error{Code: errcode.ConnectionClosed, Op: "process_start", Msg: "the daemon is shutting down"}
	}
	running, mine := m.starting, m.startingBy[req.Caller]
	for _, p := range m.procs {
		select {
		case <-p.done:
		default:
			running++
			if p.caller == req.Caller {
				mine++
			}
		}
	}
	if running >= m.opts.MaxProcs {
		m.mu.Unlock()
		return Info{}, &errcode.Error{Code: errcode.ExecError, Op: "process_start", Command: req.Command,
			Msg: fmt.Sprintf("%d background processes are running, the most allowed; stop one with process_kill", m.opts.MaxProcs)}
	}
	if mine >= admit.CallerShare(m.opts.MaxProcs, m.opts.Tokens) {
		m.mu.Unlock()
		return Info{}, &errcode.Error{Code: errcode.ExecError, Op: "process_start", Command: req.Command,
			Msg: admit.ShareRefusal(req.Caller, mine, m.opts.MaxProcs, "running background processes", "them") + " with process_kill"}
	}
	// Counted from here until it is in procs (or failed), so that starts
	// arriving together cannot pass the cap, and Close, which waits for
	// it, kills it with the rest.
	m.starting++
	m.startingBy[req.Caller]++
	m.starts.Add(1)
	m.mu.Unlock()
	// unstart takes the start's count back, under m.mu.
	unstart := func() {
		m.starting--
		if m.startingBy[req.Caller]--; m.startingBy[req.Caller] == 0 {
			delete(m.startingBy, req.Caller)
		}
	}
	defer m.starts.Done()

	var b [6]byte
	_, _ = rand.Read(b[:])
	p := &proc{id: hex.EncodeToString(b[:]), name: req.Name, command: req.Command, scope: req.Scope, caller: req.Caller, started: time.Now(),
		stdout: newRing(m.opts.BufferBytes), stderr: newRing(m.opts.BufferBytes), done: make(chan struct{})}
	p.stdout.reserve = func(n int) bool { return m.reserve(p, n) }
	p.stderr.reserve = p.stdout.reserve
	ctx, cancel := context.WithCancel(context.Background())
	sp, err := m.opts.Executor.Start(ctx, sandbox.Request{Command: req.Command, Workspace: req.Workspace, Env: req.Env},
		sandbox.Stdio{Stdout: p.stdout, Stderr: p.stderr})
	if err != nil {
		cancel()
		m.mu.Lock()
		unstart()
		m.mu.Unlock()
		return Info{}, err
	}
	p.p, p.cancel = sp, cancel
	if pp, ok := sp.(interface{ Pid() int }); ok {
		p.pid = pp.Pid()
	}
	m.mu.Lock()
	unstart()
	m.procs[p.id] = p
	m.mu.Unlock()
	m.log.Info("background process started", "id", p.id, "name", p.name, "command", p.command, "scope", p.scope, "pid", p.pid)
	go func() {
		st, err := sp.Wait()
		cancel()
		freed := p.stdout.fit() + p.stderr.fit() // nothing writes to them any more
		m.mu.Lock()
		p.status, p.ended = st, time.Now()
		m.release(p, freed)
		m.mu.Unlock()
		close(p.done)
		m.log.Info("background process exited", "id", p.id, "code", st.Code, "signal", st.Signal, "err", err)
		m.forgetOld()
	}()
	return m.info(p), nil
}

// forgetOld drops the oldest exited processes beyond maxExitedRemembered.
func (m *Manager) forgetOld() {
	m.mu.Lock()
	defer m.mu.Unlock()
	var exited []*proc
	for _, p := range m.procs {
		select {
		case <-p.done:
			exited = append(exited, p)
		default:
		}
	}
	if len(exited) <= maxExitedRemembered {
		return
	}
	sort.Slice(exited, func(i, j int) bool { return exited[i].ended.Before(exited[j].ended) })
	for _, p := range exited[:len(exited)-maxExitedRemembered] {
		m.release(p, p.stdout.drop()+p.stderr.drop())
		delete(m.procs, p.id)
	}
}

// reserve grants p's ring n more bytes of buffer if p's scope and the
// manager stay within their bounds, first dropping exited processes'
// output (oldest exit first) to make room. It runs with the growing ring's
// lock held; the rings it drops are of exited processes, which no longer
// write (so never the growing one, and no lock order is reversed).
func (m *Manager) reserve(p *proc, n int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	fits := func() (scopeOver, totalOver bool) {
		return m.held[p.scope]+int64(n) > m.opts.ScopeOutputBytes, m.total+int64(n) > m.opts.OutputBytes
	}
	scopeOver, totalOver := fits()
	if scopeOver || totalOver {
		var exited []*proc
		for _, q := range m.procs {
			select {
			case <-q.done:
				if q.held > 0 {
					exited = append(exited, q)
				}
			default:
			}
		}
		sort.Slice(exited, func(i, j int) bool { return exited[i].ended.Before(exited[j].ended) })
		for _, q := range exited {
			if !totalOver && q.scope != p.scope {
				continue // only the scope's own bound is passed: take its own
			}
			m.release(q, q.stdout.drop()+q.stderr.drop())
			if scopeOver, totalOver = fits(); !scopeOver && !totalOver {
				break
			}
		}
		if scopeOver || totalOver {
			return false
		}
	}
	p.held += int64(n)
	m.held[p.scope] += int64(n)
	m.total += int64(n)
	return true
}

// release gives back freed bytes of p's rings; m.mu is held.
func (m *Manager) release(p *proc, freed int) {
	if freed == 0 {
		return
	}
	p.held -= int64(freed)
	m.total -= int64(freed)
	if m.held[p.scope] -= int64(freed); m.held[p.scope] <= 0 {
		delete(m.held, p.scope)
	}
}

// OutputBytes is the memory scope's processes' output buffers hold now,
// running and exited together (at most Options.ScopeOutputBytes).
func (m *Manager) OutputBytes(scope string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held[scope]
}

// TotalOutputBytes is the memory all output buffers hold now (at most
// Options.OutputBytes).
func (m *Manager) TotalOutputBytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total
}

// get finds id among scope's processes; another scope's is "not found", as
// if it did not exist.
func (m *Manager) get(op, id, scope string) (*proc, error) {
	m.mu.Lock()
	p := m.procs[id]
	m.mu.Unlock()
	if p == nil || p.scope != scope {
		return nil, &errcode.Error{Code: errcode.NotFound, Op: op, Msg: fmt.Sprintf("no background process %q (process_list shows this scope's)", id)}
	}
	return p, nil
}

func (m *Manager) info(p *proc) Info {
	in := Info{ID: p.id, Name: p.name, Command: p.command, PID: p.pid, State: "running", StartedAt: p.started.UTC().Format(time.RFC3339Nano)}
	select {
	case <-p.done:
		m.mu.Lock()
		st := p.status
		m.mu.Unlock()
		in.State = "exited"
		code := st.Code
		in.ExitCode = &code
		in.Signal = st.Signal
		in.PID = 0
	default:
		in.CPU, in.RSS = usage(p.pid)
	}
	return in
}

// List describes scope's processes, oldest first.
func (m *Manager) List(scope string) []Info {
	m.mu.Lock()
	var mine []*proc
	for _, p := range m.procs {
		if p.scope == scope {
			mine = append(mine, p)
		}
	}
	m.mu.Unlock()
	sort.Slice(mine, func(i, j int) bool { return mine[i].started.Before(mine[j].started) })
	out := make([]Info, len(mine))
	for i, p := range mine {
		out[i] = m.info(p)
	}
	return out
}

// Output is what process_output returns: each stream from the cursor on
// (or its last tail bytes), the cursor to pass next time, and whether
// bytes were lost between them (the ring kept only the tail).
type Output struct {
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Cursor    Cursor `json:"cursor"`
	Truncated bool   `json:"truncated"`
	State     string `json:"state"`
	ExitCode  *int   `json:"exitCode,omitempty"`
}

// Cursor is how many bytes of each stream have been written so far.
type Cursor struct {
	Stdout int64 `json:"stdout"`
	Stderr int64 `json:"stderr"`
}

// Output reads id's output since the cursor, or its last tail bytes.
func (m *Manager) Output(id, scope string, since *Cursor, tail int) (Output, error) {
	p, err := m.get("process_output", id, scope)
	if err != nil {
		return Output{}, err
	}
	var out Output
	var t1, t2 bool
	var s1, s2 int64
	if since != nil {
		s1, s2 = since.Stdout, since.Stderr
	}
	out.Stdout, out.Cursor.Stdout, t1 = p.stdout.read(s1, tail)
	out.Stderr, out.Cursor.Stderr, t2 = p.stderr.read(s2, tail)
	out.Truncated = t1 || t2
	in := m.info(p)
	out.State, out.ExitCode = in.State, in.ExitCode
	return out, nil
}

// Wait waits for id to exit, at most timeout (bounded by DefaultMaxWait),
// or until ctx is done; it reports the process either way.
func (m *Manager) Wait(ctx context.Context, id, scope string, timeout time.Duration) (Info, error) {
	p, err := m.get("process_wait", id, scope)
	if err != nil {
		return Info{}, err
	}
	if timeout <= 0 || timeout > DefaultMaxWait {
		timeout = DefaultMaxWait
	}
	select {
	case <-p.done:
	case <-time.After(timeout):
	case <-ctx.Done():
	}
	return m.info(p), nil
}

// Signal delivers a signal by name (TERM, INT, HUP, KILL, QUIT, USR1,
// USR2) to id's process tree.
func (m *Manager) Signal(id, scope, name string) (Info, error) {
	p, err := m.get("process_signal", id, scope)
	if err != nil {
		return Info{}, err
	}
	name = strings.TrimPrefix(strings.ToUpper(name), "SIG")
	switch name {
	case "TERM", "INT", "HUP", "KILL", "QUIT", "USR1", "USR2":
	default:
		return Info{}, &errcode.Error{Code: errcode.InvalidArgument, Op: "process_signal", Msg: fmt.Sprintf("signal %q: use TERM, INT, HUP, KILL, QUIT, USR1 or USR2", name)}
	}
	select {
	case <-p.done:
		return m.info(p), nil // already gone
	default:
	}
	if name == "KILL" {
		// Cancelling the start context is what reaches the whole tree in
		// every isolation mode (as the SSH sessions do).
		p.cancel()
	} else if err := p.p.Signal(name); err != nil {
		return Info{}, err
	}
	return m.info(p), nil
}

// KillWait is how long process_kill waits for the process it killed to be
// reaped before it answers: SIGKILL ends a process at once unless it is
// stuck in the kernel (a read of a dead network file system), and then the
// answer says it is still running and process_wait follows it.
const KillWait = 10 * time.Second

// Kill kills id's process tree and waits (at most KillWait, or until ctx is
// done) for it to exit, so that the answer is its final state: "exited",
// with the exit code and the signal ("KILL" when this call killed it; the
// process's own code and signal when it had already ended).
func (m *Manager) Kill(ctx context.Context, id, scope string) (Info, error) {
	p, err := m.get("process_kill", id, scope)
	if err != nil {
		return Info{}, err
	}
	// Cancelling the start context is what reaches the whole tree in every
	// isolation mode (as the SSH sessions do); after the exit it is a no-op.
	p.cancel()
	t := time.NewTimer(KillWait)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	case <-ctx.Done():
	}
	return m.info(p), nil
}

// Close kills every process and waits for them; a start under way is
// waited for and killed with the rest.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.starts.Wait() // no start passes the closed check from here
	m.mu.Lock()
	all := make([]*proc, 0, len(m.procs))
	for _, p := range m.procs {
		all = append(all, p)
	}
	m.mu.Unlock()
	for _, p := range all {
		p.cancel()
	}
	for _, p := range all {
		<-p.done
	}
	return nil
}

// usage reads a running process's CPU seconds and resident memory from
// /proc (the top process of its tree; 0 when it cannot be read).
func usage(pid int) (cpu float64, rss int64) {
	if pid <= 0 {
		return 0, 0
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 {
			f := strings.Fields(s[i+1:])
			if len(f) > 13 {
				ut, _ := strconv.ParseFloat(f[11], 64)
				st, _ := strconv.ParseFloat(f[12], 64)
				cpu = (ut + st) / 100 // USER_HZ
			}
		}
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				rss = kb * 1024
			}
		}
	}
	return cpu, rss
}

// ring keeps the last size bytes written and how many were written in all.
// Its buffer is allocated as output arrives, in steps (doubling from
// ringChunk) up to exactly size bytes and never past it; once full it
// wraps in place (head is the oldest byte), so a write copies only what it
// brings. Each step asks reserve for the bytes first (the manager's budget);
// refused, the ring keeps the capacity it has and wraps there.
type ring struct {
	mu      sync.Mutex
	buf     []byte // len(buf) == cap(buf): the capacity the ring holds
	n       int    // bytes kept, at most len(buf)
	head    int    // index in buf of the oldest kept byte
	size    int    // the most the ring may hold
	total   int64
	reserve func(n int) bool // nil: always granted
}

// ringChunk is a ring's first allocation (or its size, if smaller).
const ringChunk = 4 << 10

func newRing(size int) *ring { return &ring{size: size} }

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total += int64(len(p))
	q := p
	if len(q) > r.size {
		q = q[len(q)-r.size:]
	}
	if need := r.n + len(q); need > len(r.buf) && len(r.buf) < r.size {
		r.grow(min(r.size, max(need, 2*len(r.buf), ringChunk)))
	}
	c := len(r.buf)
	if c == 0 {
		return len(p), nil // no memory granted: only the count moves
	}
	if len(q) > c {
		q = q[len(q)-c:]
	}
	if over := r.n + len(q) - c; over > 0 {
		r.head = (r.head + over) % c
		r.n -= over
	}
	w := (r.head + r.n) % c
	k := copy(r.buf[w:], q)
	copy(r.buf, q[k:])
	r.n += len(q)
	return len(p), nil
}

// grow moves the kept bytes to a buffer of newCap bytes, oldest first, if
// reserve grants the difference.
func (r *ring) grow(newCap int) {
	if r.reserve != nil && !r.reserve(newCap-len(r.buf)) {
		return
	}
	nb := make([]byte, newCap)
	r.copyOut(nb)
	r.buf, r.head = nb, 0
}

// copyOut copies the kept bytes, oldest first, into dst (len(dst) >= r.n).
func (r *ring) copyOut(dst []byte) {
	if r.n == 0 {
		return
	}
	end := r.head + r.n
	if end <= len(r.buf) {
		copy(dst, r.buf[r.head:end])
		return
	}
	k := copy(dst, r.buf[r.head:])
	copy(dst[k:], r.buf[:end-len(r.buf)])
}

// fit shrinks the buffer to the bytes kept (a process that exited writes
// no more) and returns the bytes freed.
func (r *ring) fit() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	freed := len(r.buf) - r.n
	if freed == 0 {
		return 0
	}
	var nb []byte
	if r.n > 0 {
		nb = make([]byte, r.n)
		r.copyOut(nb)
	}
	r.buf, r.head = nb, 0
	return freed
}

// drop lets go of the kept bytes (what was written still counts in total:
// a read says truncated) and returns the bytes freed.
func (r *ring) drop() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	freed := len(r.buf)
	r.buf, r.n, r.head = nil, 0, 0
	return freed
}

// read returns the bytes written from the cursor since on (or, with tail >
// 0 and no cursor, the last tail bytes), the new cursor, and whether bytes
// between since and what is returned were dropped.
func (r *ring) read(since int64, tail int) (string, int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := r.total - int64(r.n) // the cursor of the oldest kept byte
	from := since
	if tail > 0 && since == 0 {
		from = max(r.total-int64(tail), 0)
	}
	truncated := false
	if from < start {
		truncated, from = true, start
	}
	if from > r.total {
		from = r.total
	}
	n := r.n - int(from-start)
	if n == 0 {
		return "", r.total, truncated
	}
	i := (r.head + r.n - n) % len(r.buf)
	if i+n <= len(r.buf) {
		return string(r.buf[i : i+n]), r.total, truncated
	}
	var b strings.Builder // the kept bytes wrap: one copy of both pieces
	b.Grow(n)
	b.Write(r.buf[i:])
	b.Write(r.buf[:n-(len(r.buf)-i)])
	return b.String(), r.total, truncated
}

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
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// Defaults of Options.
const (
	DefaultMaxProcs     = 16
	DefaultBufferBytes  = 1 << 20 // per stream
	DefaultMaxWait      = 60 * time.Second
	maxExitedRemembered = 64 // exited processes kept for process_output/list
)

// Options configure a Manager.
type Options struct {
	Executor sandbox.Executor
	// MaxProcs caps the running processes of the whole workspace.
	MaxProcs int
	// BufferBytes is how much of each stream is kept (the tail).
	BufferBytes int
	Logger      *slog.Logger
}

// Manager owns the background processes.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	procs  map[string]*proc
	closed bool
}

type proc struct {
	id, name, command, scope string
	started                  time.Time
	pid                      int
	p                        sandbox.Process
	cancel                   context.CancelFunc
	stdout, stderr           *ring
	done                     chan struct{} // closed at exit
	status                   sandbox.ExitStatus
	ended                    time.Time
}

// New makes a Manager; a nil Executor refuses every start.
func New(opts Options) *Manager {
	if opts.MaxProcs <= 0 {
		opts.MaxProcs = DefaultMaxProcs
	}
	if opts.BufferBytes <= 0 {
		opts.BufferBytes = DefaultBufferBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{opts: opts, log: opts.Logger, procs: map[string]*proc{}}
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
	running := 0
	for _, p := range m.procs {
		select {
		case <-p.done:
		default:
			running++
		}
	}
	if running >= m.opts.MaxProcs {
		m.mu.Unlock()
		return Info{}, &errcode.Error{Code: errcode.ExecError, Op: "process_start", Command: req.Command,
			Msg: fmt.Sprintf("%d background processes are running, the most allowed; stop one with process_kill", m.opts.MaxProcs)}
	}
	m.mu.Unlock()

	var b [6]byte
	_, _ = rand.Read(b[:])
	p := &proc{id: hex.EncodeToString(b[:]), name: req.Name, command: req.Command, scope: req.Scope, started: time.Now(),
		stdout: newRing(m.opts.BufferBytes), stderr: newRing(m.opts.BufferBytes), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	sp, err := m.opts.Executor.Start(ctx, sandbox.Request{Command: req.Command, Workspace: req.Workspace, Env: req.Env},
		sandbox.Stdio{Stdout: p.stdout, Stderr: p.stderr})
	if err != nil {
		cancel()
		return Info{}, err
	}
	p.p, p.cancel = sp, cancel
	if pp, ok := sp.(interface{ Pid() int }); ok {
		p.pid = pp.Pid()
	}
	m.mu.Lock()
	m.procs[p.id] = p
	m.mu.Unlock()
	m.log.Info("background process started", "id", p.id, "name", p.name, "command", p.command, "scope", p.scope, "pid", p.pid)
	go func() {
		st, err := sp.Wait()
		cancel()
		m.mu.Lock()
		p.status, p.ended = st, time.Now()
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
		delete(m.procs, p.id)
	}
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

// Close kills every process and waits for them.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
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
type ring struct {
	mu    sync.Mutex
	buf   []byte
	size  int
	total int64
}

func newRing(size int) *ring { return &ring{size: size} }

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total += int64(len(p))
	if len(p) >= r.size {
		r.buf = append(r.buf[:0], p[len(p)-r.size:]...)
		return len(p), nil
	}
	if over := len(r.buf) + len(p) - r.size; over > 0 {
		r.buf = append(r.buf[:0], r.buf[over:]...)
	}
	r.buf = append(r.buf, p...)
	return len(p), nil
}

// read returns the bytes written from the cursor since on (or, with tail >
// 0 and no cursor, the last tail bytes), the new cursor, and whether bytes
// between since and what is returned were dropped.
func (r *ring) read(since int64, tail int) (string, int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := r.total - int64(len(r.buf)) // the cursor of buf[0]
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
	return string(r.buf[from-start:]), r.total, truncated
}

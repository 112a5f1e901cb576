//go:build linux

package previews

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/internal/procnet"
	"github.com/agentbe/agentbe-daemon/internal/ratelog"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/sandbox"
)

// DefaultMaxConns bounds the connections open through previews at once
// (SSH forwards and the HTTP proxy's connections together) when
// Options.MaxConns is 0: each holds two descriptors and a goroutine or two.
const DefaultMaxConns = 256

// dialTimeout bounds one connect: a listening socket on loopback answers
// at once, or its backlog is full.
const dialTimeout = 10 * time.Second

// Why a connection was refused. Dial's errors match one of these with
// errors.Is, and their text says which port and what to do.
var (
	// ErrNotWorkspacePort: no process of the workspace (of the caller's
	// scope) listens on that port.
	ErrNotWorkspacePort = errors.New("no workspace process listens on this port")
	// ErrBadTarget: the host or port asked for is not a loopback address
	// and a port number.
	ErrBadTarget = errors.New("previews reach only the workspace's loopback")
	// ErrBusy: Options.MaxConns connections are open.
	ErrBusy = errors.New("too many preview connections")
	// ErrNamespace: the sandbox's network namespace could not be entered
	// (the daemon lacks CAP_SYS_ADMIN, or the process has just ended).
	ErrNamespace = errors.New("cannot enter the sandbox's network namespace")
	// ErrClosed: Close was called.
	ErrClosed = errors.New("previews are shut down")
)

// Options configure Previews.
type Options struct {
	// Executor runs the workspace's commands; only ports its processes
	// listen on are reachable. Required.
	Executor sandbox.Executor
	// MaxConns caps the connections open at once; 0 means DefaultMaxConns.
	MaxConns int
	// Opened, when set, is told about every connection: once when it was
	// refused, or once it has closed (with its bytes and duration). It runs
	// on the connection's goroutine: keep it short.
	Opened func(Record)
	// Logger receives refusals at debug level, and at warn (rate-limited)
	// the workspace processes whose sockets could not be read; nil
	// discards.
	Logger *slog.Logger
}

// Caller is who asks for a connection, and where: Within is the host path
// of the workspace (or scope) the caller works in, whose commands' ports it
// may reach ("" reaches every command's). The other fields are for the
// record.
type Caller struct {
	Face   string // "ssh" or "http"
	Within string
	Remote string
	Scope  string // the caller's scope as the audit log names it
	Name   string // the token file entry, "" for the daemon's token
	// Hold, when set, holds a request that lasts (a proxied WebSocket, a
	// streamed answer: holdStream) for the caller's token
	// (admit.Rules.Hold): the context it returns ends when a reload
	// removes the token or changes its rights, which closes the
	// connection; release ends the hold.
	Hold func(context.Context) (ctx context.Context, release func())
}

// Record is what Options.Opened is told about one connection.
type Record struct {
	Caller
	Port     int
	Start    time.Time
	Duration time.Duration
	Outcome  string // "ok", or "refused" with Err set
	Err      error
	BytesIn  int64 // bytes sent to the workspace's server
	BytesOut int64 // bytes it sent back
}

// Previews opens connections to the workspace's listening ports. It is
// safe for concurrent use.
type Previews struct {
	ex     sandbox.Executor
	max    int
	opened func(Record)
	log    *slog.Logger
	selfNS uint64        // the daemon's network namespace
	warns  ratelog.Every // sockets that could not be read, rate-limited

	mu     sync.Mutex
	held   int // slots taken: connections open and dials in flight
	open   map[*conn]struct{}
	closed bool
	// dropIdle, set by the HTTP proxy, closes its idle pooled connections
	// to make room when the cap is reached.
	dropIdle func()
}

// New checks opts and returns Previews.
func New(opts Options) (*Previews, error) {
	if opts.Executor == nil {
		return nil, errors.New("previews: a workspace that runs commands is required (not the memory backend)")
	}
	ns, err := netnsOf("self")
	if err != nil {
		return nil, fmt.Errorf("previews: the daemon's network namespace: %w", err)
	}
	p := &Previews{ex: opts.Executor, max: opts.MaxConns, opened: opts.Opened, log: opts.Logger, selfNS: ns,
		open: make(map[*conn]struct{})}
	if p.max <= 0 {
		p.max = DefaultMaxConns
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p, nil
}

// Held is how many of the MaxConns places are taken now: connections open
// (an idle pooled one of the HTTP proxy included) and dials in flight.
func (p *Previews) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// Close closes every connection still open and refuses new ones. It is
// idempotent.
func (p *Previews) Close() error {
	p.mu.Lock()
	p.closed = true
	open := make([]*conn, 0, len(p.open))
	for c := range p.open {
		open = append(open, c)
	}
	p.mu.Unlock()
	for _, c := range open {
		_ = c.Close()
	}
	return nil
}

// Target checks a host and port a client named (an SSH direct-tcpip
// request's): the host must name loopback (localhost, 127.0.0.1, ::1, also
// in brackets) and the port lie in 1..65535. Which of the workspace's
// sockets is reached does not depend on the host: Dial connects where the
// workspace's process listens.
func Target(host string, port uint32) (int, error) {
	if port == 0 || port > 65535 {
		return 0, fmt.Errorf("%w: port %d is not in 1..65535", ErrBadTarget, port)
	}
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return int(port), nil
	}
	if a, err := netip.ParseAddr(h); err == nil && a.Zone() == "" && (a == netip.AddrFrom4([4]byte{127, 0, 0, 1}) || a == netip.IPv6Loopback()) {
		return int(port), nil
	}
	return 0, fmt.Errorf("%w: %q is not localhost, 127.0.0.1 or ::1", ErrBadTarget, clip.String(host, 64))
}

// ParsePort reads a port as a URL path segment carries it: 1 to 5 ASCII
// digits without a leading zero, 1..65535.
func ParsePort(s string) (int, error) {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return 0, fmt.Errorf("%w: %q is not a port number (1..65535)", ErrBadTarget, clip.String(s, 16))
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: %q is not a port number (1..65535)", ErrBadTarget, clip.String(s, 16))
		}
		n = n*10 + int(s[i]-'0')
	}
	if n > 65535 {
		return 0, fmt.Errorf("%w: %d is not a port number (1..65535)", ErrBadTarget, n)
	}
	return n, nil
}

// Port is a port a workspace process listens on.
type Port struct {
	Port int
	Addr netip.Addr // the address it is bound to (maybe unspecified)
	Pid  int        // a workspace process holding the socket
	// task is the pid, or one of its threads when its main thread has
	// ended (see view): the /proc entry that shows its namespace.
	task int
	ns   uint64 // that process's network namespace
	// v4Free: no IPv4 socket listens on the port in that namespace, so a
	// dual-stack "::" listener may also be reached at 127.0.0.1.
	v4Free bool
}

// Ports lists the ports the workspace's processes within within (see
// Caller.Within) listen on, lowest first. A process or namespace whose
// sockets cannot be read is left out of the list, and logged.
func (p *Previews) Ports(within string) []Port {
	return p.find(within, 0)
}

// ErrNotTheCallers: a workspace process listens on the port, but not one
// the caller may reach through a preview (another scope's, or any when the
// caller may not run commands).
var ErrNotTheCallers = errors.New("a workspace process listens on this port, and this caller may not reach it")

// ErrUnjudged: the sockets of a workspace process that shares the daemon's
// network namespace could not be read whole (its namespace, its socket
// table or its descriptors), so whether a workspace process listens on the
// port is unknown, and the connection is refused.
var ErrUnjudged = errors.New("the workspace processes' sockets could not be read, so whose this port is cannot be told")

// Reachable judges, as a preview would, a connection that another part of
// the daemon opens to port on this machine's loopback for a caller working
// in within (the host path of its workspace or scope) that may run
// commands or not (exec): the browser under --browser-allow-local. A port
// no workspace process listens on in the daemon's network namespace is
// none of the workspace's, and nil is returned (whether to reach such a
// port is that caller's rule). A port a workspace process listens on is
// refused (ErrNotTheCallers) unless the caller may run commands and a
// process of its scope holds it: what /preview/ would refuse it is refused
// by every other way in. It fails closed: when the daemon's socket table
// cannot be read whole, or a socket listens on the port there that no
// workspace process read holds while one could not be read (its
// descriptors, or which namespace it is in), the port is refused
// (ErrUnjudged, saying which process and why) and a warning logged. A process that ended meanwhile holds no
// socket, and is no failure. Processes in other network namespaces (the
// bwrap sandbox's) are not read: a listener there is not at this loopback.
func (p *Previews) Reachable(within string, exec bool, port int) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("%w: port %d is not in 1..65535", ErrBadTarget, port)
	}
	if exec && within == "" {
		return nil // every command is the caller's: nothing to read
	}
	all, unread := p.scan("", port, p.selfNS)
	if len(unread) > 0 {
		return p.unjudged(port, unread)
	}
	if len(all) == 0 {
		return nil
	}
	if exec {
		mine, unread := p.scan(within, port, p.selfNS)
		if len(mine) > 0 {
			return nil
		}
		if len(unread) > 0 {
			return p.unjudged(port, unread)
		}
	}
	why := "it is another scope's"
	if !exec {
		why = "the caller may not run commands"
	}
	return fmt.Errorf("port %d: %w (%s)", port, ErrNotTheCallers, why)
}

// unjudged is Reachable's refusal when sockets could not be read, logged
// at warn (rate-limited: a caller chooses how often it asks).
func (p *Previews) unjudged(port int, unread []error) error {
	err := fmt.Errorf("port %d: %w: %w", port, ErrUnjudged, errors.Join(unread...))
	p.warns.Warn(p.log, "unjudged", "a connection to a port of this machine refused: the workspace processes' sockets could not be read",
		"port", port, "err", errors.Join(unread...))
	return err
}

// find returns the listening ports of the workspace's processes (within
// within), only port when it is not 0. A process or namespace it could not
// read is left out, with a warning (rate-limited): a listing may be
// short, and Dial then refuses a port it did not find.
func (p *Previews) find(within string, port int) []Port {
	ports, unread := p.scan(within, port, 0)
	if len(unread) > 0 {
		p.warns.Warn(p.log, "unread", "workspace processes left out of the previews' ports: their sockets could not be read",
			"err", errors.Join(unread...))
	}
	return ports
}

// errEnded: the process has ended (no thread of it shows a namespace).
var errEnded = errors.New("ended")

// gone reports whether err says a /proc entry is gone: its process ended.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// listenersOf reads a namespace's socket tables through a process in it
// (tests replace it to make a table unreadable).
var listenersOf = procnet.ListenersOf

// scan returns the listening ports of the workspace's processes (within
// within), only port when it is not 0, and only in the network namespace
// only when it is not 0; and what it could not read whole: a namespace
// whose socket tables none of its processes could show; a process whose
// descriptors it could not list, or whose namespace it cannot tell (with
// only, one that may be in it), while a listener of that namespace is
// unaccounted for. A process that ended meanwhile is none of these: it
// holds no socket.
func (p *Previews) scan(within string, port int, only uint64) (out []Port, unread []error) {
	pids := sandbox.WorkspaceProcesses(p.ex, within)
	if len(pids) == 0 {
		return nil, nil
	}
	// The processes by network namespace: one table read per namespace.
	type proc struct{ pid, task int }
	byNS := map[uint64][]proc{}
	var order []uint64
	var unseen []error // processes whose namespace cannot be told
	for _, pid := range pids {
		task, ns, err := view(pid)
		if errors.Is(err, errEnded) {
			continue
		}
		if err != nil {
			unseen = append(unseen, err)
			continue
		}
		if only != 0 && ns != only {
			continue
		}
		if _, ok := byNS[ns]; !ok {
			order = append(order, ns)
		}
		byNS[ns] = append(byNS[ns], proc{pid, task})
	}
	switch {
	case only == 0:
		unread = append(unread, unseen...) // left out of a listing
	case len(unseen) > 0 && byNS[only] == nil:
		// Those may be in it: its table says whether anything listens.
		order = append(order, only)
	}
	for _, ns := range order {
		group := byNS[ns]
		tasks, gpids := make([]int, len(group)), make([]int, len(group))
		for i, pr := range group {
			tasks[i], gpids[i] = pr.task, pr.pid
		}
		if ns == p.selfNS {
			// The daemon's own table, through the daemon (whose main
			// thread never leaves its namespace): no workspace thread
			// that ends meanwhile can make it look gone.
			tasks = []int{os.Getpid()}
		}
		listeners, v4, err := readNamespace(tasks, port)
		if err != nil {
			which := fmt.Sprintf("network namespace %d", ns)
			if ns == p.selfNS {
				which = fmt.Sprintf("the daemon's network namespace (%d)", ns)
			}
			if len(gpids) > 0 {
				which += ", which workspace pids " + pidList(gpids) + " are in"
			}
			unread = append(unread, fmt.Errorf("%s: %w", which, err))
			continue
		}
		if len(listeners) == 0 {
			continue
		}
		wanted := make(map[uint64]procnet.Listener, len(listeners))
		for _, l := range listeners {
			wanted[l.Inode] = l
		}
		var fdErrs []error
		for _, pr := range group {
			inodes, err := fdsOf(pr.pid, pr.task, wanted)
			if err != nil {
				fdErrs = append(fdErrs, fmt.Errorf("pid %d: %w", pr.pid, err))
			}
			for _, inode := range inodes {
				l := wanted[inode]
				delete(wanted, inode)
				out = append(out, Port{Port: int(l.Addr.Port()), Addr: l.Addr.Addr(), Pid: pr.pid, task: pr.task, ns: ns, v4Free: !v4[l.Addr.Port()]})
			}
			if len(wanted) == 0 {
				break
			}
		}
		if len(wanted) > 0 {
			// A listener no process read holds: one whose descriptors
			// could not be listed, or whose namespace could not be told,
			// may hold it.
			unread = append(unread, fdErrs...)
			if ns == only {
				unread = append(unread, unseen...)
			}
		}
	}
	sortPorts(out)
	return out, unread
}

// pidList names the first few of ps's pids.
func pidList(ps []int) string {
	var b strings.Builder
	for i, pr := range ps {
		if i == 4 {
			fmt.Fprintf(&b, " and %d more", len(ps)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, pr)
	}
	return b.String()
}

// sortPorts orders by port, IPv4 before IPv6 for the same port (the
// plainer path to dial).
func sortPorts(ps []Port) {
	slices.SortStableFunc(ps, func(a, b Port) int {
		if c := cmp.Compare(a.Port, b.Port); c != 0 {
			return c
		}
		switch {
		case a.Addr.Is4() && !b.Addr.Is4():
			return -1
		case !a.Addr.Is4() && b.Addr.Is4():
			return 1
		}
		return 0
	})
}

// view is how /proc shows process pid: through its own entry, or, when
// its main thread has ended while other threads run (the main thread is
// then a zombie that shows no namespace, no descriptors and no socket
// table, though the process holds them all), through the first of its
// other threads that shows them. errEnded when none does: a thread
// releases its descriptors before it leaves its namespace, so a process
// none of whose threads has a namespace holds no socket.
func view(pid int) (task int, ns uint64, err error) {
	id := strconv.Itoa(pid)
	ns, err = netnsOf(id)
	if err == nil {
		return pid, ns, nil
	}
	if !gone(err) {
		return 0, 0, fmt.Errorf("pid %d: its network namespace: %w", pid, err)
	}
	d, err := os.Open("/proc/" + id + "/task")
	if err != nil {
		if gone(err) {
			return 0, 0, errEnded
		}
		return 0, 0, fmt.Errorf("pid %d: its threads: %w", pid, err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil && !gone(err) {
		return 0, 0, fmt.Errorf("pid %d: its threads: %w", pid, err)
	}
	for _, n := range names {
		if n == id {
			continue
		}
		tid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		ns, err := netnsOf(n)
		if err == nil {
			return tid, ns, nil
		}
		if !gone(err) {
			return 0, 0, fmt.Errorf("pid %d: the network namespace of its thread %d: %w", pid, tid, err)
		}
	}
	return 0, 0, errEnded
}

// readNamespace reads the listening sockets of the namespace the tasks
// share (port only, unless 0) through the first of them still there
// (procnet.ListenersOf), and which ports have an IPv4 listener there. It
// is empty, without an error, when they all ended meanwhile (the
// namespace may be gone with them, and whatever listens there is no
// longer a workspace process's); an error when none could show it and
// not all ended.
func readNamespace(tasks []int, port int) (out []procnet.Listener, v4 map[uint16]bool, err error) {
	var errs []error
	for _, task := range tasks {
		l4, l6, err := listenersOf(task)
		if gone(err) {
			continue
		}
		if err != nil {
			through := fmt.Sprintf("pid %d", task)
			if task == os.Getpid() {
				through = "the daemon's own pid"
			}
			errs = append(errs, fmt.Errorf("read through %s: %w", through, err))
			continue
		}
		v4 = make(map[uint16]bool, len(l4))
		for _, l := range l4 {
			v4[l.Addr.Port()] = true
		}
		for _, l := range slices.Concat(l4, l6) {
			if port == 0 || int(l.Addr.Port()) == port {
				out = append(out, l)
			}
		}
		return out, v4, nil
	}
	return nil, nil, errors.Join(errs...)
}

// nsPath is the network namespace file of pid (tests replace it to make
// it unreadable).
var nsPath = func(pid string) string { return "/proc/" + pid + "/ns/net" }

// fdDir is the directory of task's descriptors (tests replace it to make
// it unreadable).
var fdDir = func(task int) string { return "/proc/" + strconv.Itoa(task) + "/fd/" }

// maxViews bounds how many times fdsOf looks for another thread of a
// process whose thread ended while its descriptors were read.
const maxViews = 8

// fdsOf is socketsOf for process pid, seen through task (view): when that
// thread ended meanwhile while the process runs on, through another of
// its threads. An error when its threads end faster than maxViews reads.
func fdsOf(pid, task int, wanted map[uint64]procnet.Listener) ([]uint64, error) {
	for range maxViews {
		inodes, err := socketsOf(task, wanted)
		if !errors.Is(err, errEnded) {
			return inodes, err
		}
		if task, _, err = view(pid); errors.Is(err, errEnded) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("its threads ended faster than its descriptors could be read (%d tries)", maxViews)
}

// socketsOf returns the inodes among wanted that the process task shows
// holds a descriptor of; an error when its descriptors could not all be
// read, errEnded when task has ended.
func socketsOf(task int, wanted map[uint64]procnet.Listener) ([]uint64, error) {
	dir := fdDir(task)
	d, err := os.Open(dir)
	if err != nil {
		if gone(err) {
			return nil, errEnded
		}
		return nil, fmt.Errorf("its descriptors: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil && !gone(err) {
		return nil, fmt.Errorf("its descriptors: %w", err)
	}
	var out []uint64
	var errs []error
	for _, n := range names {
		target, err := os.Readlink(dir + n)
		if err != nil {
			if !gone(err) {
				errs = append(errs, fmt.Errorf("its descriptor %s: %w", n, err))
			}
			continue
		}
		s, ok := strings.CutPrefix(target, "socket:[")
		if !ok {
			continue
		}
		inode, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
		if err != nil {
			continue
		}
		if _, ok := wanted[inode]; ok {
			out = append(out, inode)
		}
	}
	return out, errors.Join(errs...)
}

// netnsOf is the inode of /proc/<pid>/ns/net ("self" for the daemon).
func netnsOf(pid string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(nsPath(pid), &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// Dial opens a connection to port as the workspace's process listening on
// it sees it, for c. It refuses a port no workspace process of c's scope
// listens on (ErrNotWorkspacePort), and over the cap (ErrBusy).
func (p *Previews) Dial(ctx context.Context, c Caller, port int) (net.Conn, error) {
	start := time.Now()
	nc, err := p.dial(ctx, c, port)
	if err != nil {
		p.log.Debug("preview refused", "face", c.Face, "remote", c.Remote, "port", port, "err", err)
		if p.opened != nil {
			p.opened(Record{Caller: c, Port: port, Start: start, Outcome: "refused", Err: err})
		}
		return nil, err
	}
	return nc, nil
}

func (p *Previews) dial(ctx context.Context, c Caller, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("%w: port %d is not in 1..65535", ErrBadTarget, port)
	}
	slot, err := p.acquire()
	if err != nil {
		return nil, err
	}
	ports := p.find(c.Within, port)
	if len(ports) == 0 {
		slot.release()
		return nil, fmt.Errorf("port %d: %w (start the server as a workspace command: exec, process_start or an SSH session)", port, ErrNotWorkspacePort)
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var nc net.Conn
	target := ports[0]
	for _, addr := range dialAddrs(target) {
		if target.ns == p.selfNS {
			nc, err = dialLocal(ctx, addr)
		} else {
			nc, err = dialInNamespace(ctx, target.task, target.ns, addr)
		}
		if err == nil || errors.Is(err, ErrNamespace) {
			break
		}
	}
	if err != nil {
		slot.release()
		return nil, fmt.Errorf("port %d: %w", port, err)
	}
	return slot.wrap(nc, c, port), nil
}

// dialAddrs are the addresses that reach a listener: its own, or loopback
// for a wildcard one; a dual-stack "::" listener also at 127.0.0.1 when no
// IPv4 socket could take that instead.
func dialAddrs(pt Port) []string {
	port := strconv.Itoa(pt.Port)
	a := pt.Addr
	switch {
	case a.Is4() && a.IsUnspecified():
		return []string{net.JoinHostPort("127.0.0.1", port)}
	case a.IsUnspecified():
		if pt.v4Free {
			return []string{net.JoinHostPort("::1", port), net.JoinHostPort("127.0.0.1", port)}
		}
		return []string{net.JoinHostPort("::1", port)}
	case a.Is4In6():
		return []string{net.JoinHostPort(a.Unmap().String(), port)}
	}
	return []string{net.JoinHostPort(a.String(), port)}
}

// dialInNamespace connects to addr from inside the network namespace ns of
// pid. The namespace is opened by descriptor and checked to be ns before it
// is entered, so a pid reused meanwhile cannot lead elsewhere. The connect
// runs on a goroutine locked to its own OS thread, which enters the
// namespace and is never unlocked: when the goroutine returns, Go ends the
// thread rather than let other goroutines run in the sandbox's namespace.
// A socket keeps the namespace it was created in, so the connection works
// from any goroutine afterwards.
func dialInNamespace(ctx context.Context, pid int, ns uint64, addr string) (net.Conn, error) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: the process holding the port ended: %v", ErrNamespace, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Ino != ns {
		return nil, fmt.Errorf("%w: the process holding the port ended", ErrNamespace)
	}
	done := make(chan dialResult, 1)
	go enterAndDial(ctx, fd, addr, done)
	r := <-done
	return r.c, r.err
}

type dialResult struct {
	c   net.Conn
	err error
}

// enterAndDial is dialInNamespace's goroutine: it locks its thread, enters
// the namespace fd and connects, and never unlocks the thread.
func enterAndDial(ctx context.Context, fd int, addr string, done chan<- dialResult) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// The main thread: Go never ends it, so it would stay in the
		// sandbox's namespace, and /proc/self (the daemon's view of its
		// own namespace) follows it. Hold it while another goroutine,
		// which cannot be given this thread, does the work.
		inner := make(chan dialResult, 1)
		go enterAndDial(ctx, fd, addr, inner)
		r := <-inner
		runtime.UnlockOSThread() // unchanged: it never entered
		done <- r
		return
	}
	// No UnlockOSThread from here on: see dialInNamespace.
	done <- setnsAndDial(ctx, fd, addr)
}

// setnsAndDial enters the namespace fd on the calling thread, which must be
// locked and never unlocked afterwards, and connects to addr.
func setnsAndDial(ctx context.Context, fd int, addr string) dialResult {
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		if errors.Is(err, syscall.EPERM) {
			err = fmt.Errorf("%w: entering it needs CAP_SYS_ADMIN (run the daemon as root, or with that capability): %v", ErrNamespace, err)
		} else {
			err = fmt.Errorf("%w: %v", ErrNamespace, err)
		}
		return dialResult{nil, err}
	}
	c, err := dialLocal(ctx, addr)
	return dialResult{c, err}
}

// dialLocal connects to addr, a workspace listener's, only if its address
// is one of this machine's (of the namespace the calling thread is in). A
// process may listen on an address the machine does not have (a socket
// bound with IP_FREEBIND, or under net.ipv4.ip_nonlocal_bind), and a
// connection to it would leave for another host, the cloud metadata
// address among them. So the connection's own end is bound to the same
// address before it connects: the kernel refuses that bind for an address
// it does not have (EADDRNOTAVAIL), and nothing is sent. Loopback needs no
// such check.
func dialLocal(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	if ap, err := netip.ParseAddrPort(addr); err == nil && !ap.Addr().IsLoopback() && !ap.Addr().IsUnspecified() {
		d.LocalAddr = &net.TCPAddr{IP: ap.Addr().AsSlice()}
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		return nil, fmt.Errorf("%w: it listens on %s, which is not an address of this machine (a socket bound with IP_FREEBIND): not dialled", ErrNotWorkspacePort, addr)
	}
	return c, err
}

// slot is one of the MaxConns places, held from Dial until the connection
// closes.
type slot struct{ p *Previews }

func (p *Previews) acquire() (slot, error) {
	for try := 0; ; try++ {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return slot{}, ErrClosed
		}
		if p.held < p.max {
			p.held++
			p.mu.Unlock()
			return slot{p}, nil
		}
		drop := p.dropIdle
		p.mu.Unlock()
		if try > 0 || drop == nil {
			return slot{}, fmt.Errorf("%w (limit %d); close some and try again", ErrBusy, p.max)
		}
		drop() // idle pooled HTTP connections give their places up
	}
}

func (s slot) release() {
	s.p.mu.Lock()
	s.p.held--
	s.p.mu.Unlock()
}

// wrap makes nc the slot's connection: counted until it is closed, closed
// by Close, and recorded when it ends.
func (s slot) wrap(nc net.Conn, c Caller, port int) net.Conn {
	w := &conn{Conn: nc, p: s.p, rec: Record{Caller: c, Port: port, Start: time.Now(), Outcome: "ok"}}
	s.p.mu.Lock()
	closed := s.p.closed
	if !closed {
		s.p.open[w] = struct{}{}
	}
	s.p.mu.Unlock()
	if closed {
		_ = w.Close()
	}
	return w
}

// conn is a connection opened by Dial.
type conn struct {
	net.Conn
	p       *Previews
	rec     Record
	in, out atomic.Int64
	once    sync.Once
}

func (c *conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.out.Add(int64(n))
	return n, err
}

func (c *conn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.in.Add(int64(n))
	return n, err
}

// CloseWrite half-closes the connection (an SSH client's EOF).
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		p := c.p
		p.mu.Lock()
		delete(p.open, c)
		p.held--
		p.mu.Unlock()
		if p.opened != nil {
			r := c.rec
			r.Duration = time.Since(r.Start)
			r.BytesIn, r.BytesOut = c.in.Load(), c.out.Load()
			p.opened(r)
		}
	})
	return err
}

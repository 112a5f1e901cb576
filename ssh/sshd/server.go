package sshd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/ratelog"
	"github.com/agentbe/agentbe-daemon/internal/tick"
)

// Defaults for the zero values of Config.
const (
	DefaultMaxConns = 1024
	// DefaultLoginTimeout bounds the SSH handshake and authentication
	// (OpenSSH's LoginGraceTime is 120 s; our clients log in within one
	// round trip of the handshake).
	DefaultLoginTimeout = 30 * time.Second
	// DefaultMaxChannels bounds the open session and direct-tcpip channels
	// of one SSH connection (each holds a goroutine, channel buffers and
	// maybe a command, an SFTP server or a forwarded connection). One more is rejected with
	// ResourceShortage. OpenSSH's sshd has MaxSessions 10; the clients open
	// one or two, and `ssh -O` multiplexing a few more.
	DefaultMaxChannels = 64
	// DefaultMaxUnauthPerAddr is Transport.MaxUnauthPerAddr's default.
	DefaultMaxUnauthPerAddr = 10
	// keepaliveMisses is how many keepalive intervals without an answer
	// make a peer dead: the clients' own default (ServerAliveCountMax 3).
	keepaliveMisses = 3
)

// SessionRecord is what Config.SessionEnded is told about one session.
type SessionRecord struct {
	Kind     string // "exec", "shell", "scp", or the subsystem's name ("sftp")
	Command  string // the exec request's command ("" otherwise)
	Remote   string // the client's address
	Scope    string // the scope the connection was confined to (Confine), "" otherwise
	Caller   string // the token file entry the connection came with, "" otherwise
	Start    time.Time
	Duration time.Duration
	// Outcome is "ok" (exit status 0), "error" (another status or a
	// signal), "timeout" (killed at the executor's deadline) or "refused"
	// (the command did not start).
	Outcome  string
	ExitCode int
	BytesIn  int64 // bytes the client sent on the channel (stdin, SFTP requests)
	BytesOut int64 // bytes sent to the client (stdout and stderr, SFTP replies)
}

// Why the server refuses or closes a connection. A net.Conn that
// implements CloseCauser is told which; the WebSocket adapter turns them
// into close codes.
var (
	// ErrTooManyConns: Config.MaxConns connections of the listener are
	// open. The error Handshake returns names the limit and matches this
	// with errors.Is.
	ErrTooManyConns = errors.New("too many connections")
	// ErrShuttingDown: Shutdown or Close was called.
	ErrShuttingDown = errors.New("Server shutting down")
	// ErrLoginTimeout: the client did not log in within Config.LoginTimeout.
	ErrLoginTimeout = errors.New("SSH login timeout")
)

// connLimitError is ErrTooManyConns with the limit in its text.
type connLimitError struct{ limit int }

func (e connLimitError) Error() string {
	return fmt.Sprintf("too many connections (limit %d); try again later", e.limit)
}

func (e connLimitError) Is(target error) bool { return target == ErrTooManyConns }

// unauthLimitError is ErrTooManyConns for one address's connections that
// have not logged in yet (Transport.MaxUnauthPerAddr).
type unauthLimitError struct{ limit int }

func (e unauthLimitError) Error() string {
	return fmt.Sprintf("too many connections from this address that have not logged in (limit %d); try again later", e.limit)
}

func (e unauthLimitError) Is(target error) bool { return target == ErrTooManyConns }

// A CloseCauser is a net.Conn that wants to know why the server closes it:
// CloseCause is called instead of Close with ErrShuttingDown,
// ErrLoginTimeout, or the cause of the Handshake context's end (a token
// revoked by a reload, admit.Revoked). Close is still called when the
// connection simply ends.
type CloseCauser interface {
	CloseCause(cause error) error
}

func closeFor(c net.Conn, cause error) {
	if cc, ok := c.(CloseCauser); ok {
		_ = cc.CloseCause(cause)
		return
	}
	_ = c.Close()
}

// Server serves one listener's SSH connections (Config.Server):
// sessions (exec, shell, pty, env, signals, window changes) through the
// executor, subsystems through their handlers. It is safe for concurrent
// use.
type Server struct {
	// cfg is the Config every listener of the daemon shares (NewConfig);
	// keepalive and log are this listener's (Transport).
	cfg       *Config
	keepalive time.Duration
	log       *slog.Logger
	// warns rate-limits the warnings about refused connections (Refused):
	// a client decides how often it is refused.
	warns ratelog.Every
	// afterStart, set only by tests, runs on a session's request loop right
	// after an exec or shell request has started its command (or its
	// refusal), before the loop reads the next request.
	afterStart func(*session)
	// beforeRequest, set only by tests, runs on a session's request loop
	// when a request has been received, before it is served.
	beforeRequest func(*session, *gossh.Request)

	sshConf *gossh.ServerConfig

	// recheck is Transport.Recheck; nil judges a login once.
	recheck func(gossh.ConnMetadata, *gossh.Permissions) error

	mu        sync.Mutex
	conns     map[net.Conn]*Conn // nil until logged in
	unauth    map[netip.Addr]int // connections in their handshake, by address (maxUnauth)
	maxUnauth int                // Transport.MaxUnauthPerAddr as it applies: 0 for no bound
	listeners map[net.Listener]struct{}
	closing   bool
	// wg counts connections and sessions. Add is only called under mu
	// while !closing, so Shutdown's Wait never races an Add from zero.
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Permission extensions an authentication callback may grant a connection
// (in ssh.Permissions.Extensions), which its sessions honour: the options
// of an authorized_keys line.
const (
	// PermNoPty refuses pty-req (authorized_keys' no-pty and restrict).
	PermNoPty = "no-pty"
)

// Conn is a logged-in SSH connection, returned by Handshake; Serve serves
// it.
type Conn struct {
	srv    *Server
	c      net.Conn
	sc     *gossh.ServerConn
	chans  <-chan gossh.NewChannel
	reqs   <-chan *gossh.Request
	remote string
	ctx    context.Context
	stop   func() bool // stops the context.AfterFunc watching the caller's ctx

	vmu  sync.Mutex
	vals []connValue // per-connection state of subsystem handlers (a slice: one or two entries)

	// Set by Confine before Serve: the workspace this connection works in
	// (nil: the server's) and whether it may run commands.
	ws            fsops.Workspace
	noExec        bool
	scope, caller string
}

// Confine narrows what the connection may do, for the credential it came
// with (the /ssh token's scope and rights): ws replaces the server's
// workspace for its SFTP, SCP and commands, and noExec refuses exec and
// shell requests. Call it after Handshake and before Serve.
// scope and caller are what its sessions' records say.
func (c *Conn) Confine(ws fsops.Workspace, noExec bool, scope, caller string) {
	c.ws, c.noExec, c.scope, c.caller = ws, noExec, scope, caller
}

// denied reports whether the connection's authentication withheld perm.
func (c *Conn) denied(perm string) bool {
	if c == nil || c.sc == nil || c.sc.Permissions == nil {
		return false
	}
	_, set := c.sc.Permissions.Extensions[perm]
	return set
}

// Handshake registers c, runs the SSH handshake and authentication on it
// (bounded by Config.LoginTimeout) and returns the logged-in connection, to be
// served by Conn.Serve, typically on a goroutine of its own: the caller's
// goroutine (with its stack, grown by the handshake) is free again, and a
// connection then runs on one goroutine of ours plus x/crypto's three. If
// ctx ends, the connection is closed.
//
// It refuses c with an error matching ErrTooManyConns or ErrShuttingDown
// without closing it (the caller closes it, and may say why first); on any
// other error c has been closed.
func (s *Server) Handshake(ctx context.Context, c net.Conn) (*Conn, error) {
	if err := s.track(c); err != nil {
		return nil, err
	}
	addr := admit.ClientAddr(c.RemoteAddr())
	if err := s.startLogin(addr); err != nil {
		s.untrack(c)
		return nil, err
	}
	remote := c.RemoteAddr().String()
	// A peer that opens a connection but never logs in would otherwise hold
	// a slot under the cap forever. NewServerConn returns once the client
	// has authenticated, so the timer only has to outlive it.
	login := time.AfterFunc(s.cfg.LoginTimeout, func() {
		s.log.Info("no SSH login in time, dropping connection", "remote", remote)
		closeFor(c, ErrLoginTimeout)
	})
	sc, chans, reqs, err := gossh.NewServerConn(c, s.sshConf)
	login.Stop()
	s.endLogin(addr)
	if err != nil {
		s.log.Debug("ssh handshake failed", "remote", remote, "err", err)
		_ = c.Close()
		s.untrack(c)
		return nil, err
	}
	s.log.Debug("connected", "remote", remote)
	conn := &Conn{srv: s, c: c, sc: sc, chans: chans, reqs: reqs, remote: remote}
	s.mu.Lock()
	if _, ok := s.conns[c]; ok {
		s.conns[c] = conn
	}
	s.mu.Unlock()
	// ctx ends when the connection does: every command it started is
	// killed (see session.start).
	conn.ctx = ctx
	if ctx.Done() != nil {
		// A CloseCauser learns why: the context's cause (a revoked
		// token, admit.Revoked) or its error.
		conn.stop = context.AfterFunc(ctx, func() { closeFor(c, context.Cause(ctx)) })
	}
	return conn, nil
}

// HandleConn serves c until it ends: Handshake, then Serve on the calling
// goroutine. It returns nil when a logged-in connection ended, and
// Handshake's error otherwise (c is closed in every case).
func (s *Server) HandleConn(ctx context.Context, c net.Conn) error {
	conn, err := s.Handshake(ctx, c)
	if err != nil {
		if errors.Is(err, ErrTooManyConns) || errors.Is(err, ErrShuttingDown) {
			s.Refused(c.RemoteAddr().String(), err)
			closeFor(c, err)
		}
		return err
	}
	conn.Serve()
	return nil
}

// Refused logs, at warn and rate-limited per reason (ratelog: at most one
// line every 10 s, with how many were refused since), a connection that
// Handshake refused with err (ErrTooManyConns, ErrShuttingDown): the one
// warning of every transport, the SSH port's and /ssh's.
func (s *Server) Refused(remote string, err error) {
	kind := "connections"
	switch {
	case errors.Is(err, ErrShuttingDown):
		kind = "shutting-down"
	case errors.As(err, new(unauthLimitError)):
		kind = "not-logged-in"
	}
	s.warns.Warn(s.log, kind, "ssh connection refused", "remote", remote, "reason", err)
}

// Serve accepts connections on l and serves each on a goroutine of its own
// until Shutdown or Close, which close l; it then returns ErrShuttingDown.
// Any other Accept error is returned as is.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrShuttingDown
	}
	if s.listeners == nil {
		s.listeners = make(map[net.Listener]struct{})
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrShuttingDown
			}
			// Out of descriptors (EMFILE, ENFILE) or a connection reset
			// before it was accepted: wait and accept again, as net/http
			// does, rather than stop serving the port.
			if acceptRetryable(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "in", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		go func() { _ = s.HandleConn(context.Background(), c) }()
	}
}

// acceptRetryable reports an Accept error that passes: the process or the
// system out of descriptors or buffers, or a connection aborted before it
// was accepted.
func acceptRetryable(err error) bool {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// Serve serves the logged-in connection until it ends: one goroutine for
// both the channel opens and the global requests (x/crypto runs three more
// of its own: the transport's read and key-exchange loops and the
// multiplexer). When it returns the connection is closed and every process
// it started has been killed.
func (conn *Conn) Serve() {
	s, remote := conn.srv, conn.remote
	defer s.untrack(conn.c)
	ctx, cancel := context.WithCancel(conn.ctx)
	stopKeepalive := conn.startKeepalive()
	// Session and direct-tcpip channels, counted for the connection and
	// for the daemon.
	slots := newChanSlots(s.cfg.MaxChannels, s.cfg.Channels, admit.ClientAddr(conn.c.RemoteAddr()))
	chans, reqs := conn.chans, conn.reqs
	for chans != nil || reqs != nil {
		select {
		case nc, ok := <-chans:
			if !ok {
				chans = nil
				continue
			}
			kind := nc.ChannelType()
			if kind != "session" && kind != "direct-tcpip" {
				// x11, auth-agent@openssh.com, forwarded-tcpip (which
				// only a server opens), direct-streamlocal (a Unix
				// socket of the host): not offered.
				_ = nc.Reject(gossh.UnknownChannelType, "unsupported channel type")
				continue
			}
			// Each new channel is judged with the login files in force
			// (Transport.Recheck): a connection whose key was removed
			// opens nothing more, and ends.
			if conn.ctx.Err() != nil {
				// The connection is ending (its Handshake context ended:
				// a token revoked by a reload, a shutdown) and is being
				// closed: it opens nothing more meanwhile.
				_ = nc.Reject(gossh.Prohibited, "the connection is closing: "+context.Cause(conn.ctx).Error())
				continue
			}
			if err := conn.recheck(); err != nil {
				_ = nc.Reject(gossh.Prohibited, "login no longer admitted: "+err.Error())
				_ = conn.sc.Close()
				continue
			}
			// Forwards count against the same caps as sessions: each holds
			// a goroutine pair and a connection to the workspace, and
			// either can hold a window of data nobody reads.
			sl, why := slots.take(ctx)
			if sl == nil {
				s.log.Info("channel refused", "remote", remote, "reason", why)
				_ = nc.Reject(gossh.ResourceShortage, why)
				continue
			}
			if kind == "direct-tcpip" {
				s.openForward(ctx, conn, nc, sl)
				continue
			}
			s.openSession(ctx, conn, nc, sl)
		case req, ok := <-reqs:
			if !ok {
				reqs = nil
				continue
			}
			// The clients send keepalive@openssh.com every 30 s with
			// want-reply and count a missing answer as a miss; anything
			// else (tcpip-forward, no-more-sessions@openssh.com, ...) is
			// refused: remote forwarding would open a listening port, and
			// local forwarding is a channel type (direct-tcpip), not a
			// global request.
			_ = req.Reply(req.Type == "keepalive@openssh.com", nil)
		}
	}
	cancel()
	stopKeepalive()
	if conn.stop != nil {
		conn.stop()
	}
	_ = conn.sc.Close()
	_ = conn.c.Close()
	s.log.Debug("disconnected", "remote", remote)
}

// recheck judges conn's login again (Transport.Recheck) and, when it is no
// longer admitted, logs why; its caller closes the connection (Serve then
// ends, killing every process it started).
func (conn *Conn) recheck() error {
	s := conn.srv
	if s.recheck == nil {
		return nil
	}
	err := s.recheck(conn.sc, conn.sc.Permissions)
	if err != nil {
		s.log.Info("ssh connection closed: its login is no longer admitted", "remote", conn.remote, "user", conn.sc.User(), "why", err)
	}
	return err
}

// Rejudge judges every logged-in connection's login again
// (Transport.Recheck), after the files that admit logins changed, and
// closes those no longer admitted. It returns how many it closed.
func (s *Server) Rejudge() int {
	if s.recheck == nil {
		return 0
	}
	s.mu.Lock()
	conns := make([]*Conn, 0, len(s.conns))
	for _, conn := range s.conns {
		if conn != nil {
			conns = append(conns, conn)
		}
	}
	s.mu.Unlock()
	n := 0
	for _, conn := range conns {
		if conn.recheck() != nil {
			_ = conn.sc.Close()
			n++
		}
	}
	return n
}

// startKeepalive sends keepalive@openssh.com every KeepaliveInterval and
// drops a client that leaves keepaliveMisses of them unanswered. A timer,
// not a goroutine, so an idle connection costs no stack for it; each
// request waits for its answer on a goroutine that lives one round trip.
func (conn *Conn) startKeepalive() (stop func()) {
	s := conn.srv
	if s.keepalive <= 0 {
		return func() {}
	}
	var answered atomic.Int64 // unix nanos of the last answer (or the start)
	answered.Store(time.Now().UnixNano())
	return tick.Every(s.keepalive, func() bool {
		if time.Since(time.Unix(0, answered.Load())) >= keepaliveMisses*s.keepalive {
			s.log.Info("client silent, dropping connection", "remote", conn.remote,
				"after", keepaliveMisses*s.keepalive)
			_ = conn.c.Close()
			return false
		}
		go func() {
			// Any answer, success or failure, proves the client alive.
			if _, _, err := conn.sc.SendRequest("keepalive@openssh.com", true, nil); err == nil {
				answered.Store(time.Now().UnixNano())
			}
		}()
		return true
	})
}

// Value returns the connection's value for key, made by mk on first use:
// per-connection state a subsystem handler shares between the sessions of
// one connection (SFTP's handle count and file-operation slots).
func (conn *Conn) Value(key any, mk func() any) any {
	conn.vmu.Lock()
	defer conn.vmu.Unlock()
	for _, kv := range conn.vals {
		if kv.key == key {
			return kv.val
		}
	}
	v := mk()
	conn.vals = append(conn.vals, connValue{key, v})
	return v
}

type connValue struct{ key, val any }

// RemoteAddr is the client's address.
func (conn *Conn) RemoteAddr() net.Addr { return conn.c.RemoteAddr() }

// envAllowed reports whether an SSH env request may set name.
func (s *Server) envAllowed(name string) bool {
	if name == "" {
		return false
	}
	if s.cfg.envAllow[name] {
		return true
	}
	for _, p := range s.cfg.envPrefix {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// startLogin counts a connection from addr that has not logged in yet,
// refusing it when addr has maxUnauth of them already: every connection
// counts against MaxConns for the login grace time, so without this bound
// one address that never logs in could hold them all (OpenSSH bounds the
// same with MaxStartups). endLogin gives the place back once the handshake
// has ended, whichever way.
func (s *Server) startLogin(addr netip.Addr) error {
	if s.maxUnauth <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unauth[addr] >= s.maxUnauth {
		return unauthLimitError{s.maxUnauth}
	}
	s.unauth[addr]++
	return nil
}

func (s *Server) endLogin(addr netip.Addr) {
	if s.maxUnauth <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.unauth[addr] - 1; n > 0 {
		s.unauth[addr] = n
	} else {
		delete(s.unauth, addr)
	}
}

// track registers a live connection, refusing it over the cap or while
// shutting down.
func (s *Server) track(c net.Conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return ErrShuttingDown
	}
	if len(s.conns) >= s.cfg.MaxConns {
		return connLimitError{s.cfg.MaxConns}
	}
	s.conns[c] = nil
	s.wg.Add(1)
	return nil
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// goTracked runs f as part of the server's work (Shutdown waits for it),
// unless the server is shutting down.
func (s *Server) goTracked(f func()) bool {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return false
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// Shutdown closes every listener and connection (with ErrShuttingDown as
// the cause), which kills their processes, refuses new ones, and waits
// until all of it is done or ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	conns := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	for l := range s.listeners {
		_ = l.Close()
	}
	s.mu.Unlock()

	var closers sync.WaitGroup
	for _, c := range conns {
		closers.Add(1)
		go func() {
			defer closers.Done()
			closeFor(c, ErrShuttingDown)
		}()
	}
	done := make(chan struct{})
	go func() {
		closers.Wait()
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close shuts down as Shutdown does, waiting as long as it takes. It is
// idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.Shutdown(context.Background())
	})
	return s.closeErr
}

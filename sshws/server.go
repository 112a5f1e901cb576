package sshws

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/internal/wsnet"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/sftpd"
)

// Defaults for the zero values of Options.
const (
	DefaultMaxConns          = 1024
	DefaultKeepaliveInterval = 30 * time.Second
	// keepaliveMisses is how many keepalive intervals without a word from the
	// peer make it dead: the clients' own default (keepaliveCountMax 3).
	keepaliveMisses = 3
)

// Options configure a Server.
type Options struct {
	// Workspace is what SFTP serves and where commands run: the daemon's root,
	// or the static --scopePath scope.
	Workspace fsops.Workspace
	// Executor runs exec and shell requests. Nil (a memory workspace) refuses
	// them with a message on stderr and exit status 126.
	Executor sandbox.Executor
	// AuthToken gates the WebSocket; "" means no auth.
	AuthToken string
	// AllowedOrigins are the browser origins allowed besides loopback ones
	// ("*" for any); see Guard.
	AllowedOrigins []string
	// Guard applies the Origin and Host rules of every work endpoint
	// (internal/httpguard) before the upgrade; nil builds one from
	// AuthToken and AllowedOrigins. The daemon passes the one its mux uses.
	Guard *httpguard.Guard
	// HostKeyPath is the SSH host key file (DefaultHostKeyPath if empty); an
	// ed25519 key is generated there once if the file is missing.
	HostKeyPath string
	// MaxConns caps concurrent WebSockets; 0 means DefaultMaxConns. Beyond it
	// the upgrade completes and closes with 1013 "Try Again Later".
	MaxConns int
	// KeepaliveInterval is how often the server pings an idle peer; 0 means
	// DefaultKeepaliveInterval. After 3 intervals without anything from the
	// peer the connection is dropped and its processes are killed.
	KeepaliveInterval time.Duration
	// EnvAllowlist names the variables SSH "env" requests may set (OpenSSH's
	// SendEnv/SetEnv). A name ending in "*" admits every name with that
	// prefix ("LC_*"), as in sshd's AcceptEnv. Others are refused.
	EnvAllowlist []string
	// Logger receives connection-level events; nil discards them.
	Logger *slog.Logger
}

// Server is the /ssh endpoint: it upgrades to a WebSocket, checks the token,
// and runs an SSH server connection over it. It is safe for concurrent use.
type Server struct {
	ws        fsops.Workspace
	exec      sandbox.Executor
	token     httpguard.Token
	maxConns  int
	keepalive time.Duration
	envAllow  map[string]bool // exact names
	envPrefix []string        // from entries ending in "*"
	// loginTimeout is loginTimeout; a field so tests can shorten it.
	loginTimeout time.Duration
	log          *slog.Logger
	// afterStart, set only by tests, runs on a session's request loop right
	// after an exec or shell request has started its command (or its
	// refusal), before the loop reads the next request.
	afterStart func(*session)
	// The limits of limits.go; fields so tests can lower them.
	maxChannels int         // session channels per connection
	maxHandles  int         // SFTP handles per connection
	connOps     int         // SFTP requests in the file system per connection
	fileOps     sftpd.Slots // the server's slots for SFTP requests in the file system

	sshConf  *gossh.ServerConfig
	upgrader websocket.Upgrader
	guard    *httpguard.Guard

	mu      sync.Mutex
	conns   map[*wsnet.Conn]struct{}
	closing bool
	// wg counts connection handlers and sessions. Add is only called under
	// mu while !closing, so Shutdown's Wait never races an Add from zero.
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// New validates opts and loads (or creates) the host key. The Server is ready
// to be mounted at /ssh.
func New(opts Options) (*Server, error) {
	if opts.Workspace == nil {
		return nil, errors.New("sshws: Options.Workspace is required")
	}
	signer, err := LoadOrCreateHostKey(opts.HostKeyPath)
	if err != nil {
		return nil, err
	}
	s := &Server{
		ws:        opts.Workspace,
		exec:      opts.Executor,
		token:     httpguard.NewToken(opts.AuthToken),
		maxConns:  opts.MaxConns,
		keepalive: opts.KeepaliveInterval,
		envAllow:  make(map[string]bool, len(opts.EnvAllowlist)),
		log:       opts.Logger,
		conns:     make(map[*wsnet.Conn]struct{}),

		loginTimeout: loginTimeout,
		maxChannels:  maxChannelsPerConn,
		maxHandles:   maxHandlesPerConn,
		connOps:      maxFileOpsPerConn,
		fileOps:      sftpd.NewSlots(maxFileOps),
	}
	if s.maxConns <= 0 {
		s.maxConns = DefaultMaxConns
	}
	if s.keepalive <= 0 {
		s.keepalive = DefaultKeepaliveInterval
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.guard = opts.Guard
	if s.guard == nil {
		s.guard = httpguard.New(httpguard.Options{AuthToken: opts.AuthToken, AllowedOrigins: opts.AllowedOrigins, Logger: s.log})
	}
	for _, name := range opts.EnvAllowlist {
		if p, ok := strings.CutSuffix(name, "*"); ok {
			s.envPrefix = append(s.envPrefix, p)
		} else {
			s.envAllow[name] = true
		}
	}
	if s.exec != nil && !s.ws.CanExec() {
		s.exec = nil // a memory workspace has nowhere to run commands
	}

	s.upgrader = websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		// A small read buffer: it only has to hold frame headers (and
		// control frames, up to 125 bytes) plus a small message; larger
		// payloads are read straight into x/crypto's own 4 KiB buffer or
		// into the packet (bufio reads directly into a caller's buffer
		// larger than its own). Reusing the HTTP server's 4 KiB reader
		// (ReadBufferSize 0) would double-buffer every idle connection.
		ReadBufferSize: readBufferSize,
		// Writes borrow a buffer from the pool only while a message is
		// being sent, so an idle connection holds no write buffer at all.
		WriteBufferSize: 64 << 10,
		WriteBufferPool: &sync.Pool{},
		// The Origin (and Host) rules are checked by s.guard in ServeHTTP
		// before the upgrade, the same rules as every work endpoint;
		// gorilla's own check (Origin equal to Host) would both refuse
		// allowed origins and admit a DNS-rebinding page, whose Origin
		// and Host are both the attacker's name.
		CheckOrigin: func(*http.Request) bool { return true },
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			http.Error(w, "agentbe /ssh: "+reason.Error(), status)
		},
	}

	// One SSH configuration for every connection (x/crypto copies it per
	// connection). The WebSocket token is the gate (checked before any SSH
	// byte), so SSH authentication accepts everything: method "none" (what
	// the TypeScript client and OpenSSH try first), any password (the Python
	// client sends the token as one) and any public key (OpenSSH offers the
	// user's keys).
	s.sshConf = &gossh.ServerConfig{
		NoClientAuth: true,
		PasswordCallback: func(gossh.ConnMetadata, []byte) (*gossh.Permissions, error) {
			return nil, nil
		},
		PublicKeyCallback: func(gossh.ConnMetadata, gossh.PublicKey) (*gossh.Permissions, error) {
			return nil, nil
		},
		ServerVersion: "SSH-2.0-agentbe",
	}
	s.sshConf.AddHostKey(signer)
	return s, nil
}

// ServeHTTP upgrades the request to a WebSocket and runs the SSH handshake
// over it, then hands the connection to a goroutine of its own and returns.
// Returning lets net/http drop its per-connection state (the response
// writer's buffer, the request) and the deep handler stack, which an idle
// connection would otherwise hold for its whole life; the handshake's stack
// growth goes with it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if ref := s.guard.Check(r); ref != nil {
		ref.Write(w)
		return
	}
	ok := s.authorized(r)
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered with an HTTP error
	}
	c := wsnet.New(ws)
	remote := ws.RemoteAddr().String()

	// A bad token still gets a completed upgrade and then close code 4001:
	// the clients map 4001 to AUTH_FAILED and stop, while an HTTP 401 on the
	// upgrade looks like a network error to them and they retry forever.
	if !ok {
		s.log.Info("unauthorized", "remote", remote)
		c.CloseWith(CloseUnauthorized, "Unauthorized")
		return
	}

	if err := s.track(c); err != nil {
		s.log.Warn("connection refused", "remote", remote, "reason", err)
		code := CloseTryAgain
		if errors.Is(err, errShuttingDown) {
			code = CloseGoingAway
		}
		c.CloseWith(code, err.Error())
		return
	}
	// From here on the connection is tracked: Shutdown closes it and waits
	// for untrack.

	stopKeepalive := s.startKeepalive(c, remote)
	// Keepalive alone would keep a peer that answers pings but never logs in
	// forever, holding a slot under the cap. NewServerConn returns once the
	// client has authenticated, so the timer only has to outlive it.
	login := time.AfterFunc(s.loginTimeout, func() {
		s.log.Info("no SSH login in time, dropping connection", "remote", remote)
		c.CloseWith(ClosePolicy, "SSH login timeout")
	})
	sc, chans, reqs, err := gossh.NewServerConn(c, s.sshConf)
	login.Stop()
	if err != nil {
		s.log.Debug("ssh handshake failed", "remote", remote, "err", err)
		stopKeepalive()
		c.Close()
		s.untrack(c)
		return
	}
	s.log.Debug("connected", "remote", remote)
	go s.serveConn(c, sc, chans, reqs, stopKeepalive, remote)
}

// serveConn serves one logged-in SSH connection until it ends: one
// goroutine for both the channel opens and the global requests (x/crypto
// runs three more of its own: the transport's read and key-exchange loops
// and the multiplexer).
func (s *Server) serveConn(c *wsnet.Conn, sc *gossh.ServerConn, chans <-chan gossh.NewChannel,
	reqs <-chan *gossh.Request, stopKeepalive func(), remote string) {
	defer s.untrack(c)
	// ctx ends when the connection does: every command it started is
	// killed (see session.start).
	ctx, cancel := context.WithCancel(context.Background())
	lim := sftpd.NewConnLimits(s.maxHandles, s.connOps, s.fileOps)
	var open atomic.Int32 // session channels open on this connection
	for chans != nil || reqs != nil {
		select {
		case nc, ok := <-chans:
			if !ok {
				chans = nil
				continue
			}
			if nc.ChannelType() != "session" {
				// direct-tcpip and the rest: no port forwarding.
				_ = nc.Reject(gossh.UnknownChannelType, "unsupported channel type")
				continue
			}
			if open.Load() >= int32(s.maxChannels) {
				s.log.Info("channel refused", "remote", remote, "reason", "channel limit", "limit", s.maxChannels)
				_ = nc.Reject(gossh.ResourceShortage, fmt.Sprintf(
					"too many channels on this connection (limit %d); close some first", s.maxChannels))
				continue
			}
			open.Add(1)
			s.openSession(ctx, nc, remote, lim, func() { open.Add(-1) })
		case req, ok := <-reqs:
			if !ok {
				reqs = nil
				continue
			}
			// The clients send keepalive@openssh.com every 30 s with
			// want-reply and count a missing answer as a miss; anything
			// else (tcpip-forward, no-more-sessions@openssh.com, ...) is
			// refused: port forwarding would expose networks that are not
			// the workspace's.
			_ = req.Reply(req.Type == "keepalive@openssh.com", nil)
		}
	}
	cancel()
	stopKeepalive()
	_ = sc.Close()
	c.Close()
	s.log.Debug("disconnected", "remote", remote)
}

// readBufferSize is the WebSocket read buffer of a server connection.
const readBufferSize = 512

// WebSocket close codes the server sends. 4001 is the application code the
// agent-backend clients map to AUTH_FAILED (and then stop reconnecting); the
// others are RFC 6455's.
const (
	CloseNormal       = wsnet.CloseNormal       // 1000: the SSH connection ended
	CloseGoingAway    = wsnet.CloseGoingAway    // 1001: "Server shutting down"
	CloseInternal     = wsnet.CloseInternal     // 1011: keepalive timeout, SSH setup failure
	CloseTryAgain     = wsnet.CloseTryAgain     // 1013: connection cap reached
	ClosePolicy       = wsnet.ClosePolicy       // 1008: no SSH login in time
	CloseUnauthorized = wsnet.CloseUnauthorized // 4001: bad or missing token
)

// loginTimeout bounds the SSH handshake and authentication after the
// WebSocket is up (OpenSSH's LoginGraceTime is 120 s; our clients log in
// within one round trip of the handshake).
const loginTimeout = 30 * time.Second

// authorized applies the daemon's token rule (internal/httpguard, the one
// /mcp applies) with "?token=" allowed besides "Authorization: Bearer": the
// 0.11 clients and browsers' WebSocket API cannot set headers.
func (s *Server) authorized(r *http.Request) bool {
	return s.token.AllowsHeaderOrQuery(r)
}

// envAllowed reports whether an SSH env request may set name.
func (s *Server) envAllowed(name string) bool {
	if name == "" {
		return false
	}
	if s.envAllow[name] {
		return true
	}
	for _, p := range s.envPrefix {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

var errShuttingDown = errors.New("Server shutting down")

// track registers a live connection, refusing it over the cap or while
// shutting down.
func (s *Server) track(c *wsnet.Conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return errShuttingDown
	}
	if len(s.conns) >= s.maxConns {
		return fmt.Errorf("too many connections (limit %d); try again later", s.maxConns)
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return nil
}

func (s *Server) untrack(c *wsnet.Conn) {
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

// startKeepalive pings the peer every interval and drops it after
// keepaliveMisses intervals of silence. WebSocket pings are used rather than
// SSH keepalives because every client answers them in its WebSocket library
// (ws for Node, websockets for Python, gorilla in `agent-backend proxy`),
// whatever its SSH layer does, and they cost no SSH round trip. A timer, not
// a goroutine, so an idle connection costs no stack for it.
func (s *Server) startKeepalive(c *wsnet.Conn, remote string) (stop func()) {
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	tick := func() {
		if c.IdleFor(time.Now()) >= keepaliveMisses*s.keepalive {
			s.log.Info("peer silent, dropping connection", "remote", remote,
				"after", keepaliveMisses*s.keepalive)
			c.CloseWith(CloseInternal, "keepalive timeout")
			return
		}
		if err := c.Ping(); err != nil {
			c.Close()
			return
		}
		mu.Lock()
		if !stopped {
			t.Reset(s.keepalive)
		}
		mu.Unlock()
	}
	mu.Lock()
	t = time.AfterFunc(s.keepalive, tick)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}

// Shutdown closes every WebSocket with 1001 "Server shutting down", which
// ends their SSH connections and kills their processes, refuses new ones,
// and waits until all of it is done or ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	conns := make([]*wsnet.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()

	var closers sync.WaitGroup
	for _, c := range conns {
		closers.Add(1)
		go func() {
			defer closers.Done()
			c.CloseWith(CloseGoingAway, errShuttingDown.Error())
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

// Close shuts down as Shutdown does, waiting as long as it takes (bounded by
// the WebSocket close grace and process kill). It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.Shutdown(context.Background())
	})
	return s.closeErr
}

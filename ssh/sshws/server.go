package sshws

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/internal/wsnet"
	"github.com/agentbe/agentbe-daemon/ssh/sshd"
)

// Defaults for the zero values of Options.
const (
	DefaultKeepaliveInterval = wsnet.DefaultKeepalive
)

// Options configure a Server.
type Options struct {
	// SSH is the daemon's one SSH configuration (sshd.NewConfig), which its
	// SSH port serves too: the workspace (the daemon's root, or the static
	// --scope-path scope), the executor, the host key, the limits, the
	// sessions and subsystems, the hooks. Required. /ssh adds only its
	// transport: every SSH login admitted (the WebSocket token is the
	// gate) and WebSocket pings for keepalive.
	SSH *sshd.Config
	// Admit, when set, are the daemon's admission rules (internal/admit):
	// its guard, its token rule (the token a reload rotates, the token
	// file's set) and its holds, shared with every other face; the server
	// takes the token from the query too and reads no root or scope
	// header. AuthToken, Tokens, Holds and Guard are then not read; they
	// build the rules of a server that runs alone.
	Admit *admit.Rules
	// AuthToken gates the WebSocket; "" means no auth.
	AuthToken string
	// Tokens is the token file's set (--tokens), shared with the daemon;
	// nil without one. A connection with one of its tokens works in the
	// token's scope, read-only or without commands as the entry says.
	Tokens *atomic.Pointer[httpguard.TokenSet]
	// Holds, when set, are the daemon's admit.Holds: each connection is
	// held in them, and is closed (4001 when its token was removed, 1008
	// when its rights changed) when a reload revokes or changes its token
	// (admit.Rules.Rejudge).
	Holds *admit.Holds
	// AllowedOrigins are the browser origins allowed besides loopback ones
	// ("*" for any); see Guard.
	AllowedOrigins []string
	// Guard applies the Origin and Host rules of every work endpoint
	// (internal/httpguard) before the upgrade; nil builds one from
	// AuthToken and AllowedOrigins. The daemon passes the one its mux uses.
	Guard *httpguard.Guard
	// KeepaliveInterval is how often the server pings an idle peer; 0 means
	// DefaultKeepaliveInterval. After 3 intervals without anything from the
	// peer the connection is dropped and its processes are killed.
	KeepaliveInterval time.Duration
	// Logger receives connection-level events; nil means SSH.Logger.
	Logger *slog.Logger
}

// Server is the /ssh endpoint: it upgrades to a WebSocket, checks the token,
// and hands the connection to the SSH core (package sshd). It is safe for
// concurrent use.
type Server struct {
	core      *sshd.Server
	admit     admit.Rules // the Origin and Host rules and the token, header or query
	keepalive time.Duration
	log       *slog.Logger
	upgrader  websocket.Upgrader
	root      fsops.Workspace // Options.SSH.Workspace
}

// New returns the Server of opts.SSH for the WebSocket, ready to be mounted
// at /ssh.
func New(opts Options) (*Server, error) {
	if opts.SSH == nil {
		return nil, errors.New("sshws: Options.SSH is required")
	}
	s := &Server{
		root:      opts.SSH.Workspace,
		keepalive: opts.KeepaliveInterval,
		log:       opts.Logger,
	}
	if s.keepalive <= 0 {
		s.keepalive = DefaultKeepaliveInterval
	}
	if s.log == nil {
		s.log = opts.SSH.Logger
	}
	if opts.Admit != nil {
		s.admit = *opts.Admit
	} else {
		s.admit = admit.Rules{Guard: opts.Guard, Token: httpguard.NewTokens(opts.AuthToken, opts.Tokens), Holds: opts.Holds}
	}
	if s.admit.Guard == nil {
		s.admit.Guard = httpguard.New(httpguard.Options{AuthToken: opts.AuthToken, AllowedOrigins: opts.AllowedOrigins, Logger: s.log})
	}
	// The 0.11 clients and a browser's WebSocket API cannot set headers:
	// "?token=" counts besides "Authorization: Bearer". SSH clients name
	// their directories in their commands, so X-Root-Dir and X-Scope-Path
	// are not read, and no body is sent.
	s.admit.QueryToken, s.admit.IgnoreRootAndScope, s.admit.MaxBody, s.admit.Operator, s.admit.Scrape = true, true, 0, httpguard.Token{}, httpguard.Token{}
	var err error
	s.core, err = opts.SSH.Server(sshd.Transport{
		// The WebSocket token is the gate (checked before any SSH byte),
		// so SSH authentication accepts everything: method "none" (what
		// the TypeScript client and OpenSSH try first), any password (the
		// Python client sends the token as one) and any public key
		// (OpenSSH offers the user's keys).
		NoClientAuth: true,
		PasswordCallback: func(gossh.ConnMetadata, []byte) (*gossh.Permissions, error) {
			return nil, nil
		},
		PublicKeyCallback: func(gossh.ConnMetadata, gossh.PublicKey) (*gossh.Permissions, error) {
			return nil, nil
		},
		// Keepalive is the WebSocket's pings (startKeepalive), not SSH's.
		KeepaliveInterval: 0,
		// The token was checked before the first SSH byte, and the HTTP
		// server bounds each address's connections (--max-connections-per-ip):
		// no bound of the core's on connections still in their handshake,
		// which would refuse a client library's burst of parallel logins.
		MaxUnauthPerAddr: -1,
		Logger:           s.log,
	})
	if err != nil {
		return nil, err
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
		// The Origin (and Host) rules are checked by s.admit in ServeHTTP
		// before the upgrade, the same rules as every work endpoint;
		// gorilla's own check (Origin equal to Host) would both refuse
		// allowed origins and admit a DNS-rebinding page, whose Origin
		// and Host are both the attacker's name.
		CheckOrigin: func(*http.Request) bool { return true },
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			http.Error(w, "agentbe /ssh: "+reason.Error(), status)
		},
	}
	return s, nil
}

// wsConn is a WebSocket connection as the SSH core sees it: closing it
// stops its keepalive, and the core's reasons for closing it become close
// codes (CloseCause).
type wsConn struct {
	*wsnet.Conn
	stopKeepalive func()
}

// Close ends the keepalive and closes the WebSocket (1000, or the code set
// before).
func (c *wsConn) Close() error {
	c.stopKeepalive()
	return c.Conn.Close()
}

// CloseCause closes with the close code of the core's reason.
func (c *wsConn) CloseCause(cause error) error {
	code := wsnet.CloseInternal
	switch {
	case errors.Is(cause, sshd.ErrShuttingDown):
		code = wsnet.CloseGoingAway
	case errors.Is(cause, sshd.ErrTooManyConns):
		code = wsnet.CloseTryAgain
	case errors.Is(cause, sshd.ErrLoginTimeout):
		code = wsnet.ClosePolicy
	}
	var rv *admit.Revoked
	if errors.As(cause, &rv) {
		code = wsnet.ClosePolicy
		if rv.Unauthorized() {
			code = wsnet.CloseUnauthorized
		}
	}
	c.Conn.SetCloseCode(code, cause.Error())
	return c.Close()
}

// ServeHTTP upgrades the request to a WebSocket and runs the SSH handshake
// over it, then hands the connection to a goroutine of its own and returns.
// Returning lets net/http drop its per-connection state (the response
// writer's buffer, the request) and the deep handler stack, which an idle
// connection would otherwise hold for its whole life; the handshake's stack
// growth goes with it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	admission, ref := s.admit.Begin(r)
	if ref != nil {
		ref.Write(w)
		return
	}
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered with an HTTP error
	}
	wc := wsnet.New(ws)
	remote := ws.RemoteAddr().String()

	// A bad token still gets a completed upgrade and then close code 4001:
	// the clients map 4001 to AUTH_FAILED and stop, while an HTTP 401 on the
	// upgrade looks like a network error to them and they retry forever.
	// One lookup decides both admission and confinement (the caller): a
	// reload of the token file cannot leave a connection admitted but
	// unconfined.
	caller, ref := admission.Admit()
	if ref != nil {
		s.log.Info("unauthorized", "remote", remote)
		wc.CloseWith(wsnet.CloseUnauthorized, "Unauthorized")
		return
	}
	// Where the connection works: the caller's workspace, its token's
	// scope and read-only as on every face (admit.Caller.Workspace).
	cws, release, err := caller.Workspace(s.root)
	if err != nil {
		s.log.Info("refused: the token's scope", "remote", remote, "err", err)
		wc.CloseWith(wsnet.ClosePolicy, "Invalid scope: "+err.Error())
		return
	}

	// A reload that removes the token or changes its rights ends the
	// connection (admit.Rules.Hold): the core closes it with the cause,
	// and every process it started is killed.
	held, unhold := s.admit.Hold(context.Background(), caller)
	c := &wsConn{Conn: wc}
	c.stopKeepalive = s.startKeepalive(wc, remote)
	// The core refuses over the cap and while shutting down (without
	// closing), bounds the login, and closes the connection itself on any
	// other failure. From a successful Handshake on, the connection is the
	// core's: Shutdown closes it (CloseCause) and waits for it.
	conn, err := s.core.Handshake(held, c)
	if err != nil {
		unhold()
		release()
		if errors.Is(err, sshd.ErrTooManyConns) || errors.Is(err, sshd.ErrShuttingDown) {
			s.core.Refused(remote, err)
			c.CloseCause(err)
		}
		return
	}
	conn.Confine(cws, !caller.Exec, caller.Scope, caller.Name)
	go func() {
		conn.Serve()
		unhold()
		release()
	}()
}

// readBufferSize is the WebSocket read buffer of a server connection.
const readBufferSize = 512

// startKeepalive applies the daemon's one rule for a silent WebSocket
// peer (wsnet.Keepalive): a ping every interval, and the connection closed
// with 1011 "keepalive timeout" after 3 intervals without anything from
// the peer. WebSocket pings are used rather than SSH keepalives because
// every client answers them in its WebSocket library (ws for Node,
// websockets for Python, gorilla in `agent-backend proxy`), whatever its
// SSH layer does, and they cost no SSH round trip.
func (s *Server) startKeepalive(c *wsnet.Conn, remote string) (stop func()) {
	return wsnet.Keepalive(c, s.keepalive, func(code int, reason string) {
		s.log.Info("peer silent, dropping connection", "remote", remote,
			"after", wsnet.KeepaliveMisses*s.keepalive)
		c.CloseWith(code, reason)
	})
}

// Shutdown closes every WebSocket with 1001 "Server shutting down", which
// ends their SSH connections and kills their processes, refuses new ones,
// and waits until all of it is done or ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.core.Shutdown(ctx) }

// Close shuts down as Shutdown does, waiting as long as it takes (bounded by
// the WebSocket close grace and process kill). It is idempotent.
func (s *Server) Close() error { return s.core.Close() }

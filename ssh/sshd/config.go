package sshd

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/ssh/sftpd"
)

// Config is the daemon's one SSH configuration: what every listener serves
// (sessions through the executor, the sftp subsystem, the legacy scp
// protocol), within which limits, under which host key, and whom it tells
// about each session. NewConfig makes it ready once; each listener then
// gets its Server from it (Config.Server), giving only its Transport. So
// the SSH port and /ssh differ in how a client logs in and how a silent
// one is found out, and in nothing else: the same handlers, the same
// limits, one count of channels and one set of SFTP's server-wide slots
// for both.
//
// The zero value of every field but Workspace and HostKey is safe. Fields
// are read by NewConfig and Server: change none once NewConfig returned.
type Config struct {
	// Workspace is where commands run and what SFTP and scp serve.
	// Required.
	Workspace fsops.Workspace
	// Root is the daemon's root as the operator spelled it (--root); ""
	// means Workspace.Root(). A client library's command whose working
	// directory lies outside both (admit.CommandDir) is refused with one
	// line naming both roots (admit.RootMismatch): the client's rootDir is
	// not the daemon's root.
	Root string
	// Executor runs exec and shell requests. Nil (or a workspace that
	// cannot run commands) refuses them with a message on stderr and exit
	// status 126.
	Executor sandbox.Executor
	// HostKey is the server's host key (LoadOrCreateHostKey). Required.
	HostKey gossh.Signer

	// MaxConns caps the concurrent connections of each listener; 0 means
	// DefaultMaxConns. One over it is refused with an error matching
	// ErrTooManyConns.
	MaxConns int
	// LoginTimeout bounds the handshake and authentication; 0 means
	// DefaultLoginTimeout. A connection that has not logged in by then is
	// closed with ErrLoginTimeout as its cause.
	LoginTimeout time.Duration
	// MaxAuthTries cuts a connection after that many failed authentication
	// attempts (OpenSSH's MaxAuthTries); 0 is x/crypto's default (6). A
	// transport that admits every client never fails one.
	MaxAuthTries int
	// MaxChannels caps the open session and direct-tcpip channels of one
	// connection; 0 means DefaultMaxChannels.
	MaxChannels int
	// Channels counts the open channels of every connection of every
	// listener against a daemon-wide limit and a per-address share of it.
	// Nil makes a pool of DefaultMaxServerChannels.
	Channels *ChannelPool
	// SFTP are the SFTP subsystem's limits. Its ServerOps,
	// ServerHandles and ServerListed are what every connection of every
	// listener shares; nil makes sftpd's defaults of them, once.
	SFTP SFTPLimits
	// EnvAllowlist names the variables "env" requests may set (OpenSSH's
	// SendEnv/SetEnv). A name ending in "*" admits every name with that
	// prefix ("LC_*"), as in sshd's AcceptEnv. Others are refused.
	EnvAllowlist []string
	// Forward, when set, serves direct-tcpip channels (`ssh -L`): it opens
	// the connection the channel carries, or refuses it. Nil refuses every
	// one. A connection that may not run commands (Confine's noExec), or
	// whose key says no-port-forwarding, is refused before it is called.
	Forward ForwardFunc
	// SessionEnded, when set, is told about every exec, shell and
	// subsystem session when it ends (the daemon's audit log). It runs on
	// the session's goroutine: keep it short. Nil counts no bytes.
	SessionEnded func(SessionRecord)
	// Logger receives connection-level events of listeners whose
	// Transport names no logger of its own; nil discards them.
	Logger *slog.Logger

	// Made by NewConfig, shared by every Server.
	subsystems map[string]SubsystemHandler
	commands   []CommandHandler
	envAllow   map[string]bool // exact names
	envPrefix  []string        // from entries ending in "*"
	ready      bool
}

// Transport is what one listener adds to the Config: how its clients log
// in and how a silent one is found out. Everything else is the Config's.
type Transport struct {
	// Authentication, as in x/crypto/ssh's ServerConfig: NoClientAuth
	// accepts method "none"; the callbacks decide passwords and public
	// keys (nil refuses the method). None set refuses every login.
	NoClientAuth      bool
	PasswordCallback  func(gossh.ConnMetadata, []byte) (*gossh.Permissions, error)
	PublicKeyCallback func(gossh.ConnMetadata, gossh.PublicKey) (*gossh.Permissions, error)
	// VerifiedPublicKeyCallback, when set, is called once the client has
	// signed with a key PublicKeyCallback admitted (x/crypto calls
	// PublicKeyCallback for a mere query too): where a login by key is
	// known to have happened.
	VerifiedPublicKeyCallback func(gossh.ConnMetadata, gossh.PublicKey, *gossh.Permissions, string) (*gossh.Permissions, error)
	// Recheck, when set, judges a logged-in connection's login again (the
	// SSH port's sshauth.Auth.Recheck): before each new channel, and for
	// every open connection on Server.Rejudge. An error refuses the
	// channel and closes the connection, killing what it runs: a key
	// removed from authorized_keys opens nothing more on a connection it
	// opened.
	Recheck func(gossh.ConnMetadata, *gossh.Permissions) error
	// KeepaliveInterval is how often the server sends keepalive@openssh.com
	// to a logged-in client; after 3 intervals without an answer the
	// connection is dropped. 0 sends none (the WebSocket adapter pings at
	// its own layer instead).
	KeepaliveInterval time.Duration
	// MaxUnauthPerAddr bounds the connections from one address that are
	// still in their handshake (not logged in): one more is refused with
	// ErrTooManyConns and closed at once. Each counts against MaxConns for
	// up to the login grace time, so without it one address that never
	// logs in could lock everyone out. 0 means DefaultMaxUnauthPerAddr; a
	// negative value sets no bound, for a listener whose clients were
	// authenticated before their first SSH byte (the /ssh WebSocket's
	// token) and are bounded per address where they were.
	MaxUnauthPerAddr int
	// Logger receives this listener's connection-level events; nil means
	// Config.Logger.
	Logger *slog.Logger
}

// NewConfig checks c, fills its zero values with the defaults, makes what
// every listener shares (the channel pool and SFTP's server-wide slots
// when c has none, the subsystem and command handlers) and returns it,
// ready for Server.
func NewConfig(c Config) (*Config, error) {
	if c.Workspace == nil {
		return nil, errors.New("sshd: Config.Workspace is required")
	}
	if c.HostKey == nil {
		return nil, errors.New("sshd: Config.HostKey is required")
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.LoginTimeout <= 0 {
		c.LoginTimeout = DefaultLoginTimeout
	}
	if c.MaxChannels <= 0 {
		c.MaxChannels = DefaultMaxChannels
	}
	if c.Channels == nil {
		c.Channels = NewChannelPool(DefaultMaxServerChannels, DefaultMaxServerChannelsPerAddr)
	}
	if c.SFTP.MaxHandles <= 0 {
		c.SFTP.MaxHandles = sftpd.DefaultMaxHandles
	}
	if c.SFTP.ConnOps <= 0 {
		c.SFTP.ConnOps = sftpd.DefaultConnOps
	}
	if c.SFTP.ServerOps == nil {
		c.SFTP.ServerOps = sftpd.NewSlots(sftpd.DefaultServerOps)
	}
	if c.SFTP.ServerHandles == nil {
		c.SFTP.ServerHandles = sftpd.NewBudget(sftpd.DefaultServerHandles)
	}
	if c.SFTP.ServerListed == nil {
		c.SFTP.ServerListed = sftpd.NewBudget(sftpd.DefaultServerListed)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Executor != nil && !fsops.CanExec(c.Workspace) {
		c.Executor = nil // a memory workspace has nowhere to run commands
	}
	c.envAllow = make(map[string]bool, len(c.EnvAllowlist))
	c.envPrefix = nil
	for _, name := range c.EnvAllowlist {
		if p, ok := strings.CutSuffix(name, "*"); ok {
			c.envPrefix = append(c.envPrefix, p)
		} else {
			c.envAllow[name] = true
		}
	}
	// What every listener serves besides the executor's commands: the
	// subsystems by name, and the exec requests served in its place (the
	// first handler that takes a command serves it).
	c.subsystems = map[string]SubsystemHandler{"sftp": SFTP(c.SFTP)}
	c.commands = []CommandHandler{SCP()}
	c.ready = true
	return &c, nil
}

// serverCiphers are the ciphers every listener offers: x/crypto's
// supported ciphers (AES-GCM, then AES-CTR) without
// chacha20-poly1305@openssh.com. The client's preference decides (RFC 4253,
// 7.1: the first of the client's list the server also offers), and
// OpenSSH's clients list chacha20-poly1305 first, so offering it means
// every OpenSSH client uses it; x/crypto's ChaCha20 has no assembly on
// amd64, and it was 35% of the daemon's CPU in a 64 MiB SFTP upload, which
// made bulk SFTP slower than OpenSSH's sshd (docs/performance.md, "Beside
// OpenSSH sshd"). Without it OpenSSH's clients take their next choice,
// aes128-ctr (with hmac-sha2-256-etm@openssh.com), which Go runs with AES-NI
// and SHA-NI. A client configured to use ChaCha20 only is refused with
// "no common algorithm" (TestServerCiphers).
func serverCiphers() []string {
	return slices.DeleteFunc(gossh.SupportedAlgorithms().Ciphers,
		func(c string) bool { return c == gossh.CipherChaCha20Poly1305 })
}

// Server returns a listener's Server: the Config's sessions, limits, host
// key and hooks, logged in and kept alive as t says. Servers of one Config
// share its channel pool and SFTP slots; each has its own connections (and
// cap) and its own Shutdown.
func (c *Config) Server(t Transport) (*Server, error) {
	if c == nil || !c.ready {
		return nil, errors.New("sshd: Server needs a Config made by NewConfig")
	}
	s := &Server{
		cfg:       c,
		keepalive: max(t.KeepaliveInterval, 0),
		log:       t.Logger,
		conns:     make(map[net.Conn]*Conn),
		recheck:   t.Recheck,
		unauth:    make(map[netip.Addr]int),
	}
	switch {
	case t.MaxUnauthPerAddr == 0:
		s.maxUnauth = DefaultMaxUnauthPerAddr
	case t.MaxUnauthPerAddr > 0:
		s.maxUnauth = t.MaxUnauthPerAddr
	}
	if s.log == nil {
		s.log = c.Logger
	}
	// One x/crypto configuration for every connection of the listener
	// (x/crypto copies it per connection).
	s.sshConf = &gossh.ServerConfig{
		NoClientAuth:              t.NoClientAuth,
		PasswordCallback:          t.PasswordCallback,
		PublicKeyCallback:         t.PublicKeyCallback,
		VerifiedPublicKeyCallback: t.VerifiedPublicKeyCallback,
		MaxAuthTries:              c.MaxAuthTries,
		ServerVersion:             "SSH-2.0-agentbe",
		Config:                    gossh.Config{Ciphers: serverCiphers()},
	}
	s.sshConf.AddHostKey(c.HostKey)
	return s, nil
}

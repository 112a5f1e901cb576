package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"mime"
	"net"
	"net/http"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/opfile"
	"github.com/agentbe/agentbe-daemon/sandbox/policy"
	"github.com/agentbe/agentbe-daemon/ssh/wsclient"
)

// RemoteOptions configure a Remote backend ("Filesystem Backend (Remote)"):
// a workspace served by an agentbe daemon (this one, or the npm package's),
// reached over SSH-over-WebSocket (/ssh) for files and commands and over
// HTTP (/mcp) for MCP.
type RemoteOptions struct {
	// Host and Port are the daemon's (Port 0 means 3001). TLS uses wss://
	// and https://.
	Host string
	Port int
	TLS  bool
	// RootCAs verifies the daemon's certificate with TLS (nil: the system
	// roots).
	RootCAs *x509.CertPool
	// Root is the daemon's workspace, its --root (required, absolute):
	// paths are resolved against it here, and the daemon checks it.
	Root string
	// Token is the daemon's bearer token ("" when it has none).
	Token string
	// TokenFile, instead of Token, names a file that holds the token (the
	// daemon's --auth-token-file, or a copy kept in step with it; its
	// content without surrounding whitespace), so the backend follows a
	// rotation (SIGHUP, docs/configuration.md "Rotating a token"). It is
	// read at each connect (NewRemote and each reconnection: the daemon
	// closes /ssh with 4001 when it drops the old token, and the
	// reconnection brings the new one), and again, once, when the daemon
	// refuses the token it sent (close 4001 on /ssh, 401 on /mcp): when the
	// file then holds another token, that connect or request is tried once
	// more with it; a 401 is the daemon's answer before it reads the
	// request, so a retried MCP request never runs twice. When it holds the
	// refused token the error is AUTH_FAILED (on /mcp the 401) naming the
	// file.
	TokenFile string
	// Env applies to every command (per-scope and per-call Env merge over it).
	Env map[string]string
	// Log is the operations log.
	Log LogOptions
	// DialTimeout bounds one connection attempt (the WebSocket and the SSH
	// handshake); 0 means 10 s.
	DialTimeout time.Duration
	// KeepaliveInterval is how often the connection is probed (an SSH
	// keepalive request); after KeepaliveCountMax probes in a row without an
	// answer within the interval, the connection is dead and closed. 0 means
	// 30 s and 3; a negative interval turns keepalives off.
	KeepaliveInterval time.Duration
	KeepaliveCountMax int
	// Reconnect says what happens when the connection drops.
	Reconnect ReconnectOptions
	// MaxOutput caps what Exec collects of each of stdout and stderr; 0
	// means 10 MiB. More fails the command with TOO_LARGE.
	MaxOutput int64
	// Transport is "websocket" (the default: SSH over the daemon's /ssh,
	// authenticated by Token) or "ssh" (the conventional transport: SSH on
	// the daemon's SSH port, --ssh-listen, authenticated by SSH).
	Transport string
	// SSH is the conventional transport's settings.
	SSH SSHOptions
	// AllowDangerous turns the client's own command safety check off
	// ("Safety Validation": on by default, whatever the daemon checks; the
	// npm daemon checks nothing over SSH).
	AllowDangerous bool
}

// SSHOptions configure the conventional SSH transport.
type SSHOptions struct {
	// Port is the daemon's SSH port (0 means 22).
	Port int
	// User is the login name (the daemon takes any; "" means "agent").
	User string
	// Signers are the keys to offer (from ssh.ParsePrivateKey and the
	// like); Password is tried after them when set.
	Signers  []gossh.Signer
	Password string
	// HostKeyCallback checks the daemon's host key (knownhosts.New, or
	// ssh.FixedHostKey of the key the daemon logs at start). Required: an
	// unchecked host key lets anyone on the path read the session.
	HostKeyCallback gossh.HostKeyCallback
}

// ReconnectOptions ("Reconnection Behavior"): after a drop the backend is
// "disconnected", then "reconnecting" while it retries; attempt n (from 0)
// waits min(InitialDelay × Multiplier^n, MaxDelay) first. On success it is
// "connected" and the count starts over; after MaxAttempts failures, or
// when the daemon refuses the credentials (AUTH_FAILED, never retried), it
// stays "disconnected". Operations meanwhile fail at once with
// CONNECTION_CLOSED; they are never queued.
type ReconnectOptions struct {
	Disabled     bool
	MaxAttempts  int           // 0 means 5; negative means unlimited
	InitialDelay time.Duration // 0 means 1 s
	MaxDelay     time.Duration // 0 means 30 s
	Multiplier   float64       // 0 means 2
}

// Remote is a backend on a daemon reached over the network.
type Remote struct {
	*base
	drv *remoteDriver
}

// NewRemote connects (status connecting, then connected) and returns the
// backend, or the reason it could not connect: INVALID_CONFIGURATION for bad
// options, CONNECTION_CLOSED (wrapping the cause) for a daemon that cannot be
// reached or refuses the token.
func NewRemote(ctx context.Context, opts RemoteOptions) (*Remote, error) {
	if opts.Host == "" {
		return nil, &errcode.Error{Code: errcode.InvalidConfiguration, Op: "new remote backend", Msg: "RemoteOptions.Host is required"}
	}
	if opts.Root == "" || !path.IsAbs(opts.Root) {
		return nil, &errcode.Error{Code: errcode.InvalidConfiguration, Op: "new remote backend", Path: opts.Root,
			Msg: "RemoteOptions.Root must be the daemon's workspace, an absolute path"}
	}
	if opts.Port == 0 {
		opts.Port = 3001
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, &errcode.Error{Code: errcode.InvalidConfiguration, Op: "new remote backend", Msg: "RemoteOptions.Port " + strconv.Itoa(opts.Port) + " is not a port"}
	}
	if opts.Token != "" && opts.TokenFile != "" {
		return nil, &errcode.Error{Code: errcode.InvalidConfiguration, Op: "new remote backend",
			Msg: "RemoteOptions.Token and RemoteOptions.TokenFile go separately: the token, or the file that holds it"}
	}
	switch opts.Transport {
	case "", "websocket":
		opts.Transport = "websocket"
	case "ssh":
		if opts.SSH.Port == 0 {
			opts.SSH.Port = 22
		}
		if opts.SSH.User == "" {
			opts.SSH.User = "agent"
		}
		if opts.SSH.HostKeyCallback == nil {
			return nil, &errcode.Error{Code: errcode.InvalidConfiguration, Op: "new remote backend",
				Msg: "RemoteOptions.SSH.HostKeyCallback is required with the ssh transport (knownhosts.New, or ssh.FixedHostKey of the daemon's key)"}
		}
		if len(opts.SSH.Signers) == 0 && opts.SSH.Password == "" {
			return nil, &errcode.Error{Code: errcode.InvalidConfiguration, Op: "new remote backend",
				Msg: "RemoteOptions.SSH needs Signers or a Password with the ssh transport"}
		}
	default:
		return nil, &errcode.Error{Code: errcode.InvalidConfiguration, Op: "new remote backend",
			Msg: fmt.Sprintf("RemoteOptions.Transport %q: use \"websocket\" or \"ssh\"", opts.Transport)}
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 10 * time.Second
	}
	if opts.KeepaliveInterval == 0 {
		opts.KeepaliveInterval = 30 * time.Second
	}
	if opts.KeepaliveCountMax <= 0 {
		opts.KeepaliveCountMax = 3
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = 10 << 20
	}
	if opts.Reconnect.MaxAttempts == 0 {
		opts.Reconnect.MaxAttempts = 5
	}
	if opts.Reconnect.InitialDelay <= 0 {
		opts.Reconnect.InitialDelay = time.Second
	}
	if opts.Reconnect.MaxDelay <= 0 {
		opts.Reconnect.MaxDelay = 30 * time.Second
	}
	if opts.Reconnect.Multiplier <= 0 {
		opts.Reconnect.Multiplier = 2
	}
	conn := &remoteConn{opts: opts, stop: make(chan struct{})}
	if opts.TokenFile != "" {
		tok, err := readTokenFile(opts.TokenFile)
		if err != nil {
			return nil, &errcode.Error{Code: errcode.InvalidConfiguration, Op: "new remote backend", Path: opts.TokenFile, Msg: err.Error(), Err: err}
		}
		conn.tok = tok
	}
	if !opts.AllowDangerous {
		conn.policy, _ = policy.New()
	}
	d := &remoteDriver{conn: conn, dir: path.Clean(opts.Root)}
	rb := &Remote{base: newBase(d, StatusDisconnected, opts.Env, opts.Log), drv: d}
	conn.life = rb.life
	// NewRemote is the explicit connect: disconnected → connecting →
	// connected, or back to disconnected with the reason.
	rb.life.set(StatusConnecting, nil)
	if opts.Transport == "websocket" {
		// /health is on /ssh's port; the conventional transport's daemon
		// may serve no HTTP where the client can reach it.
		if err := conn.checkRoot(ctx); err != nil {
			rb.life.set(StatusDisconnected, err)
			return nil, err
		}
	}
	if err := conn.connect(ctx); err != nil {
		rb.life.set(StatusDisconnected, err)
		return nil, err
	}
	rb.life.set(StatusConnected, nil)
	go conn.supervise()
	return rb, nil
}

// remoteConn is the connection a Remote and its scopes share: one SSH
// client over one WebSocket, its SFTP session, and the supervisor that
// notices a drop and reconnects.
type remoteConn struct {
	opts   RemoteOptions
	life   *lifecycle
	policy *policy.Policy // nil with AllowDangerous

	mu    sync.Mutex
	ssh   *gossh.Client
	sftp  *sftp.Client
	state string // "" while connected; why not, otherwise
	tok   string // with TokenFile, what it held when last read

	// daemonRoot is the daemon's root as its /health names it, cleaned
	// (checkRoot); "" when it could not be read.
	daemonRoot string

	stop     chan struct{} // closed by close
	stopOnce sync.Once
}

func (c *remoteConn) baseURL(scheme string) string {
	if c.opts.TLS {
		scheme += "s"
	}
	return scheme + "://" + net.JoinHostPort(c.opts.Host, strconv.Itoa(c.opts.Port))
}

// connect opens the SSH connection on the configured transport and SFTP
// over it.
func (c *remoteConn) connect(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	if c.opts.Transport == "ssh" {
		return c.connectSSH(ctx)
	}
	return c.connectWebSocket(ctx)
}

// connectSSH dials the daemon's SSH port and authenticates with the keys
// and password of SSHOptions, checking the host key.
func (c *remoteConn) connectSSH(ctx context.Context) error {
	addr := net.JoinHostPort(c.opts.Host, strconv.Itoa(c.opts.SSH.Port))
	fail := func(msg string, err error) error {
		return &errcode.Error{Code: errcode.ConnectionClosed, Op: "connect", Path: "ssh://" + addr, Msg: msg, Err: errors.Join(ErrConnectionClosed, err)}
	}
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fail("cannot reach the daemon's SSH port", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	var auth []gossh.AuthMethod
	if len(c.opts.SSH.Signers) > 0 {
		auth = append(auth, gossh.PublicKeys(c.opts.SSH.Signers...))
	}
	if c.opts.SSH.Password != "" {
		auth = append(auth, gossh.Password(c.opts.SSH.Password))
	}
	sc, chans, reqs, err := gossh.NewClientConn(conn, addr, &gossh.ClientConfig{
		User: c.opts.SSH.User, Auth: auth, HostKeyCallback: c.opts.SSH.HostKeyCallback,
	})
	if err != nil {
		conn.Close()
		if strings.Contains(err.Error(), "unable to authenticate") {
			return &errcode.Error{Code: errcode.AuthFailed, Op: "connect", Path: "ssh://" + addr, Msg: "the daemon refused the SSH credentials", Err: err}
		}
		return fail("SSH login to the daemon failed", err)
	}
	conn.SetDeadline(time.Time{})
	return c.attach(gossh.NewClient(sc, chans, reqs), fail)
}

// token is the token to send now.
func (c *remoteConn) token() string {
	if c.opts.TokenFile == "" {
		return c.opts.Token
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tok
}

// readToken reads TokenFile (when set) and makes what it holds the token
// to send.
func (c *remoteConn) readToken() (string, error) {
	if c.opts.TokenFile == "" {
		return c.opts.Token, nil
	}
	tok, err := readTokenFile(c.opts.TokenFile)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.tok = tok
	c.mu.Unlock()
	return tok, nil
}

// retryToken is the token to try again after the daemon refused refused:
// the current one when another request has already moved on from refused,
// else what TokenFile holds now when that differs (the file read once). It
// returns "" and why when there is none (no TokenFile: "").
func (c *remoteConn) retryToken(refused string) (string, string) {
	if c.opts.TokenFile == "" {
		return "", ""
	}
	if cur := c.token(); cur != refused {
		return cur, ""
	}
	tok, err := c.readToken()
	switch {
	case err != nil:
		return "", "; " + err.Error()
	case tok == refused:
		return "", "; RemoteOptions.TokenFile " + c.opts.TokenFile + " still holds it"
	}
	return tok, ""
}

// readTokenFile is the token in name: its content without surrounding
// whitespace. An unreadable or empty file is an error that names it, and
// so is one that is not a regular file (a FIFO would hold the connect) or
// is over opfile.MaxTokenFile.
func readTokenFile(name string) (string, error) {
	data, err := opfile.ReadRegular(name, opfile.MaxTokenFile)
	if err != nil {
		return "", fmt.Errorf("RemoteOptions.TokenFile cannot be read: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("RemoteOptions.TokenFile %s is empty", name)
	}
	return tok, nil
}

// connectWebSocket reads the token (TokenFile at each connect) and
// connects with it; when the daemon refuses it (4001) and TokenFile now
// holds another token, it connects once more with that one. A refused
// WebSocket ran nothing: the daemon closes it before any SSH byte.
func (c *remoteConn) connectWebSocket(ctx context.Context) error {
	tok, err := c.readToken()
	if err != nil {
		return &errcode.Error{Code: errcode.ConnectionClosed, Op: "connect", Path: c.opts.TokenFile, Msg: err.Error(), Err: errors.Join(ErrConnectionClosed, err)}
	}
	err = c.dialWebSocket(ctx, tok)
	if !errcode.Is(err, errcode.AuthFailed) {
		return err
	}
	next, why := c.retryToken(tok)
	if next == "" {
		if why != "" {
			var e *errcode.Error
			if errors.As(err, &e) {
				e.Msg += why
			}
		}
		return err
	}
	err = c.dialWebSocket(ctx, next)
	var e *errcode.Error
	if errcode.Is(err, errcode.AuthFailed) && errors.As(err, &e) {
		e.Msg += "; it refused the token RemoteOptions.TokenFile " + c.opts.TokenFile + " held before too"
	}
	return err
}

// dialWebSocket dials /ssh with tok, runs the SSH handshake (the daemon's
// /ssh accepts any SSH credentials once the WebSocket's token passed) and
// opens SFTP.
func (c *remoteConn) dialWebSocket(ctx context.Context, tok string) error {
	fail := func(msg string, err error) error {
		return &errcode.Error{Code: errcode.ConnectionClosed, Op: "connect", Path: c.baseURL("ws") + "/ssh", Msg: msg, Err: errors.Join(ErrConnectionClosed, err)}
	}
	var tlsConf *tls.Config
	if c.opts.RootCAs != nil {
		tlsConf = &tls.Config{RootCAs: c.opts.RootCAs, MinVersion: tls.VersionTLS12}
	}
	dialer := wsclient.Dialer{TLSClientConfig: tlsConf}
	ws, err := dialer.Dial(ctx, c.baseURL("ws")+"/ssh", tok)
	if err != nil {
		return fail("cannot reach the daemon's /ssh", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		ws.SetDeadline(dl)
	}
	sc, chans, reqs, err := gossh.NewClientConn(ws, "workspace", &gossh.ClientConfig{
		User: "agent",
		Auth: []gossh.AuthMethod{gossh.Password(tok)},
		// The WebSocket's token authenticated the daemon's side; its SSH
		// host key is per daemon and not pinned by the client libraries.
		HostKeyCallback: gossh.InsecureIgnoreHostKey(), //nolint:gosec
	})
	if err != nil {
		ws.Close()
		if code, reason := ws.CloseReason(); code == 4001 {
			return &errcode.Error{Code: errcode.AuthFailed, Op: "connect", Path: c.baseURL("ws") + "/ssh", Msg: "the daemon refused the token (" + reason + ")", Err: err}
		}
		return fail("SSH handshake with the daemon failed", err)
	}
	ws.SetDeadline(time.Time{})
	return c.attach(gossh.NewClient(sc, chans, reqs), fail)
}

// attach opens SFTP on a logged-in client and makes both current.
func (c *remoteConn) attach(client *gossh.Client, fail func(string, error) error) error {
	sf, err := sftp.NewClient(client, sftp.UseConcurrentWrites(true))
	if err != nil {
		client.Close()
		return fail("the daemon's SFTP subsystem did not start", err)
	}
	c.mu.Lock()
	c.ssh, c.sftp, c.state = client, sf, ""
	c.mu.Unlock()
	return nil
}

// current returns the live clients, or CONNECTION_CLOSED naming op.
func (c *remoteConn) current(op, p string) (*gossh.Client, *sftp.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ssh == nil {
		why := c.state
		if why == "" {
			why = "not connected"
		}
		return nil, nil, &errcode.Error{Code: errcode.ConnectionClosed, Op: op, Path: p, Msg: why, Err: ErrConnectionClosed}
	}
	return c.ssh, c.sftp, nil
}

// supervise watches the connection: keepalives while it is up, and on a
// drop the reconnection policy. It ends with close.
func (c *remoteConn) supervise() {
	for {
		c.mu.Lock()
		client := c.ssh
		c.mu.Unlock()
		if client == nil {
			return // destroyed before the supervisor first looked
		}
		dropped := make(chan error, 1)
		go func() { dropped <- client.Wait() }()
		if !c.watch(client, dropped) {
			return
		}
		c.mu.Lock()
		dead := c.sftp
		c.ssh, c.sftp, c.state = nil, nil, "the connection to the daemon dropped"
		c.mu.Unlock()
		if dead != nil {
			dead.Close() // the cached SFTP session goes with the connection
		}
		cause := &errcode.Error{Code: errcode.ConnectionClosed, Op: "connection", Msg: "the connection to the daemon dropped", Err: ErrConnectionClosed}
		c.life.set(StatusDisconnected, cause)
		if c.opts.Reconnect.Disabled {
			return
		}
		if !c.redial(cause) {
			return
		}
	}
}

// watch probes client until it drops (true) or the backend is destroyed
// (false); KeepaliveCountMax unanswered probes in a row close it.
func (c *remoteConn) watch(client *gossh.Client, dropped <-chan error) bool {
	var tick <-chan time.Time
	if c.opts.KeepaliveInterval > 0 {
		t := time.NewTicker(c.opts.KeepaliveInterval)
		defer t.Stop()
		tick = t.C
	}
	missed := 0
	for {
		select {
		case <-c.stop:
			return false
		case <-dropped:
			return true
		case <-tick:
			answered := make(chan error, 1)
			go func() { _, _, err := client.SendRequest("keepalive@openssh.com", true, nil); answered <- err }()
			select {
			case err := <-answered:
				if err != nil {
					client.Close() // the connection is closed already
				}
				missed = 0
			case <-time.After(c.opts.KeepaliveInterval):
				if missed++; missed >= c.opts.KeepaliveCountMax {
					client.Close() // dead: no answer to the last probes
				}
			case <-c.stop:
				return false
			case <-dropped:
				return true
			}
		}
	}
}

// redial runs the reconnection policy; it reports whether the connection
// is back.
func (c *remoteConn) redial(cause error) bool {
	ro := c.opts.Reconnect
	c.life.set(StatusReconnecting, cause)
	last := cause
	for attempt := 0; ro.MaxAttempts < 0 || attempt < ro.MaxAttempts; attempt++ {
		c.mu.Lock()
		if ro.MaxAttempts < 0 {
			c.state = fmt.Sprintf("reconnecting to the daemon (attempt %d)", attempt+1)
		} else {
			c.state = fmt.Sprintf("reconnecting to the daemon (attempt %d of %d)", attempt+1, ro.MaxAttempts)
		}
		c.mu.Unlock()
		select {
		case <-c.stop:
			return false
		case <-time.After(backoff(ro, attempt)):
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-c.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		err := c.connect(ctx)
		cancel()
		if err == nil {
			select {
			case <-c.stop:
				c.closeClients()
				return false
			default:
			}
			c.life.set(StatusConnected, nil)
			return true
		}
		last = err
		if errcode.Is(err, errcode.AuthFailed) {
			break // the credentials will not get better by retrying
		}
	}
	c.mu.Lock()
	if errcode.Is(last, errcode.AuthFailed) {
		c.state = "disconnected: " + last.Error()
	} else {
		c.state = fmt.Sprintf("disconnected from the daemon after %d reconnection attempts", ro.MaxAttempts)
	}
	c.mu.Unlock()
	c.life.set(StatusDisconnected, last)
	return false
}

// backoff is the delay before reconnection attempt n (from 0):
// min(InitialDelay × Multiplier^n, MaxDelay).
func backoff(ro ReconnectOptions, n int) time.Duration {
	d := float64(ro.InitialDelay) * math.Pow(ro.Multiplier, float64(n))
	if d > float64(ro.MaxDelay) || math.IsInf(d, 0) || math.IsNaN(d) {
		return ro.MaxDelay
	}
	return time.Duration(d)
}

func (c *remoteConn) closeClients() {
	c.mu.Lock()
	s, f := c.ssh, c.sftp
	c.ssh, c.sftp, c.state = nil, nil, "destroyed"
	c.mu.Unlock()
	// The SSH connection first: closing it ends every channel, so the SFTP
	// client's Close cannot wait on a server that never closes its side.
	if s != nil {
		s.Close()
	}
	if f != nil {
		f.Close()
	}
}

// close stops the supervisor (and a pending reconnection) and closes the
// connection.
func (c *remoteConn) close() error {
	c.stopOnce.Do(func() { close(c.stop) })
	c.closeClients()
	return nil
}

// remoteDriver is the driver of a Remote (dir = the daemon's root) and of
// its scopes (dir below it), over one shared connection. Paths are resolved
// here with fsops.ResolvePath, the daemon's own rules, to the absolute path
// sent over SFTP; the daemon confines them again.
type remoteDriver struct {
	conn *remoteConn
	dir  string
}

func (d *remoteDriver) kind() string { return "remote" }
func (d *remoteDriver) root() string { return d.dir }

func (d *remoteDriver) resolve(op, p string) (string, error) {
	abs, err := fsops.ResolvePath(d.dir, p)
	if err != nil {
		var e *errcode.Error
		if errors.As(err, &e) {
			return "", e.WithOp(op)
		}
		return "", err
	}
	return abs, nil
}

// files resolves p and returns the SFTP client to use on it.
func (d *remoteDriver) files(op, p string) (string, *sftp.Client, error) {
	abs, err := d.resolve(op, p)
	if err != nil {
		return "", nil, err
	}
	_, sf, err := d.conn.current(op, p)
	return abs, sf, err
}

// sftpError turns an SFTP failure into the error of op on p, keeping the
// fs.ErrNotExist / fs.ErrPermission identity for errors.Is.
func sftpError(op, p string, err error) error {
	if err == nil {
		return nil
	}
	e := &errcode.Error{Op: op, Path: p, Err: err}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		e.Code, e.Msg = errcode.NotFound, "no such file or directory"
	case errors.Is(err, fs.ErrPermission):
		e.Code, e.Msg = errcode.PermissionDenied, "permission denied (the daemon refused it: outside the workspace, or not allowed)"
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, sftp.ErrSSHFxConnectionLost):
		e.Code, e.Msg = errcode.ConnectionClosed, "the connection to the daemon dropped"
		e.Err = errors.Join(ErrConnectionClosed, err)
	default:
		e.Code = errcode.Of(err)
		if e.Code == "" {
			e.Code = errcode.WriteFailed
			if op == "read" || op == "readdir" || op == "stat" || op == "exists" {
				e.Code = errcode.ReadFailed
			}
		}
		e.Msg = err.Error()
	}
	return e
}

func (d *remoteDriver) read(_ context.Context, p string) ([]byte, error) {
	abs, sf, err := d.files("read", p)
	if err != nil {
		return nil, err
	}
	f, err := sf.Open(abs)
	if err != nil {
		return nil, sftpError("read", p, err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return b, sftpError("read", p, err)
}

func (d *remoteDriver) write(_ context.Context, p string, data []byte) error {
	abs, sf, err := d.files("write", p)
	if err != nil {
		return err
	}
	if dir := path.Dir(abs); dir != d.dir && dir != "/" {
		if err := sf.MkdirAll(dir); err != nil {
			return sftpError("write", p, err)
		}
	}
	f, err := sf.OpenFile(abs, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return sftpError("write", p, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return sftpError("write", p, err)
	}
	return sftpError("write", p, f.Close())
}

func (d *remoteDriver) readdir(_ context.Context, p string) ([]string, error) {
	abs, sf, err := d.files("readdir", p)
	if err != nil {
		return nil, err
	}
	infos, err := sf.ReadDir(abs)
	if err != nil {
		return nil, sftpError("readdir", p, err)
	}
	names := make([]string, len(infos))
	for i, fi := range infos {
		// A name is one element of a path, as every backend lists it; a
		// daemon (or whatever answers in its place) that lists "../x" or
		// "a/b" would lead a caller that joins names out of a directory
		// (TestAttackHostileListing).
		n := fi.Name()
		if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\x00") {
			return nil, &errcode.Error{Code: errcode.ReadFailed, Op: "readdir", Path: p,
				Msg: fmt.Sprintf("the daemon listed %q, which is not a file name", n)}
		}
		names[i] = n
	}
	slices.Sort(names)
	return names, nil
}

func (d *remoteDriver) mkdir(_ context.Context, p string, opts MkdirOptions) error {
	abs, sf, err := d.files("mkdir", p)
	if err != nil {
		return err
	}
	if opts.Recursive {
		return sftpError("mkdir", p, sf.MkdirAll(abs))
	}
	return sftpError("mkdir", p, sf.Mkdir(abs))
}

func (d *remoteDriver) exists(ctx context.Context, p string) (bool, error) {
	_, err := d.stat(ctx, p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func (d *remoteDriver) stat(_ context.Context, p string) (FileInfo, error) {
	abs, sf, err := d.files("stat", p)
	if err != nil {
		return FileInfo{}, err
	}
	fi, err := sf.Stat(abs)
	if err != nil {
		return FileInfo{}, sftpError("stat", p, err)
	}
	return FileInfo{Name: fi.Name(), Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}, nil
}

func (d *remoteDriver) rm(_ context.Context, p string, opts RmOptions) error {
	abs, sf, err := d.files("rm", p)
	if err != nil {
		return err
	}
	if abs == d.conn.opts.Root {
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "rm", Path: p, Msg: "refusing to remove the workspace root"}
	}
	fi, err := sf.Lstat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist) && opts.Force:
		return nil
	case err != nil:
		return sftpError("rm", p, err)
	case fi.IsDir() && opts.Recursive:
		return sftpError("rm", p, sf.RemoveAll(abs))
	case fi.IsDir():
		return sftpError("rm", p, sf.RemoveDirectory(abs))
	}
	return sftpError("rm", p, sf.Remove(abs))
}

func (d *remoteDriver) rename(_ context.Context, from, to string) error {
	a, sf, err := d.files("rename", from)
	if err != nil {
		return err
	}
	b, err := d.resolve("rename", to)
	if err != nil {
		return err
	}
	if dir := path.Dir(b); dir != d.dir {
		if err := sf.MkdirAll(dir); err != nil {
			return sftpError("rename", to, err)
		}
	}
	err = sf.PosixRename(a, b)
	var se *sftp.StatusError
	if errors.As(err, &se) && se.FxCode() == sftp.ErrSSHFxOpUnsupported {
		// A server without posix-rename@openssh.com (the npm daemon's):
		// plain RENAME, which refuses an existing destination, so a file
		// there is removed first (not atomic, as on that server anyway).
		if fi, serr := sf.Lstat(b); serr == nil && !fi.IsDir() {
			if rerr := sf.Remove(b); rerr != nil {
				return sftpError("rename", to, rerr)
			}
		}
		err = sf.Rename(a, b)
	}
	return sftpError("rename", from, err)
}

func (d *remoteDriver) touch(_ context.Context, p string) error {
	abs, sf, err := d.files("touch", p)
	if err != nil {
		return err
	}
	if dir := path.Dir(abs); dir != d.dir && dir != "/" {
		if err := sf.MkdirAll(dir); err != nil {
			return sftpError("touch", p, err)
		}
	}
	f, err := sf.OpenFile(abs, os.O_WRONLY|os.O_CREATE)
	if err != nil {
		return sftpError("touch", p, err)
	}
	return sftpError("touch", p, f.Close())
}

// exec runs the command over an SSH session: in dir (or opts.Dir in it),
// with HOME there and the env exported first, in the daemon's shell, which
// is how the client libraries send a command and what the daemon's policy
// judges. A blocked command comes back as exit status 126 with the
// daemon's reason; it is DANGEROUS_OPERATION here too.
func (d *remoteDriver) exec(ctx context.Context, command string, opts ExecOptions) ([]byte, error) {
	if strings.TrimSpace(command) == "" {
		return nil, &errcode.Error{Code: errcode.EmptyCommand, Op: "exec", Msg: "empty command"}
	}
	dir := d.dir
	if opts.Dir != "" {
		var err error
		if dir, err = d.resolve("exec", opts.Dir); err != nil {
			return nil, err
		}
	}
	if pol := d.conn.policy; pol != nil {
		// The same parsed policy as the daemon's, before anything is sent.
		if err := pol.CheckEnv(command, opts.Env, dir, d.conn.opts.Root); err != nil {
			return nil, err
		}
	}
	client, _, err := d.conn.current("exec", command)
	if err != nil {
		return nil, err
	}
	// At the root without env: the TypeScript client's shape, which the
	// daemon's exec fast path runs without a shell when the command is one
	// simple command (the session starts in the root, HOME set to it, so
	// `a; b` after a cd that cannot fail is the same either way).
	if len(opts.Env) == 0 && dir == d.conn.opts.Root {
		return d.run(ctx, client, command, "HOME="+shellQuote(dir)+" cd "+shellQuote(dir)+" && "+command, opts.Stdin)
	}
	// Otherwise one shell on the daemon's side runs it all (no second shell
	// for the command): cd, export, then the command as written, grouped.
	var line strings.Builder
	line.WriteString("cd " + shellQuote(dir) + " && export HOME=" + shellQuote(dir))
	for _, k := range slices.Sorted(maps.Keys(opts.Env)) {
		if !validEnvName(k) {
			return nil, &errcode.Error{Code: errcode.InvalidArgument, Op: "exec", Command: command, Msg: fmt.Sprintf("environment variable name %q is not valid", k)}
		}
		line.WriteString(" " + k + "=" + shellQuote(opts.Env[k]))
	}
	// Braces keep the command one unit (`a; b` runs only once cd worked);
	// the newline ends a trailing comment or `&` before the brace.
	line.WriteString(" && {\n" + command + "\n}")
	return d.run(ctx, client, command, line.String(), opts.Stdin)
}

// run runs line in a new session and reads the outcome of command (the
// caller's, for messages) from it.
func (d *remoteDriver) run(ctx context.Context, client *gossh.Client, command, line string, stdin io.Reader) ([]byte, error) {
	s, err := client.NewSession()
	if err != nil {
		return nil, sftpError("exec", command, err)
	}
	defer s.Close()
	stdout := &cappedBuffer{max: d.conn.opts.MaxOutput}
	stderr := &cappedBuffer{max: d.conn.opts.MaxOutput}
	s.Stdout, s.Stderr = stdout, stderr
	if stdin != nil {
		s.Stdin = stdin
	}
	done := make(chan error, 1)
	if err := s.Start(line); err != nil {
		return nil, sftpError("exec", command, err)
	}
	go func() { done <- s.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// The daemon kills the command's whole tree when its session ends.
		_ = s.Signal(gossh.SIGKILL)
		s.Close()
		<-done
		return stdout.Bytes(), &errcode.Error{Code: errcode.Timeout, Op: "exec", Command: command, Msg: "command killed: " + ctx.Err().Error(), Err: ctx.Err()}
	}
	if stdout.over || stderr.over {
		return nil, &errcode.Error{Code: errcode.TooLarge, Op: "exec", Command: command, Msg: fmt.Sprintf("output over %d bytes (RemoteOptions.MaxOutput)", d.conn.opts.MaxOutput)}
	}
	var xe *gossh.ExitError
	switch {
	case err == nil:
		return stdout.Bytes(), nil
	case errors.As(err, &xe):
		if xe.ExitStatus() == 126 && strings.Contains(stderr.String(), "Dangerous operation blocked") {
			return nil, &errcode.Error{Code: errcode.DangerousOperation, Op: "exec", Command: command, Msg: strings.TrimSpace(stderr.String())}
		}
		code := xe.ExitStatus()
		if xe.Signal() != "" {
			code = -1
		}
		return stdout.Bytes(), execFailed(command, &ExitError{ExitCode: code, Stdout: stdout.Bytes(), Stderr: stderr.Bytes()})
	default:
		return nil, &errcode.Error{Code: errcode.ConnectionClosed, Op: "exec", Command: command, Msg: "the connection to the daemon dropped", Err: errors.Join(ErrConnectionClosed, err)}
	}
}

// scope is a driver on the same connection, rooted at rel.
func (d *remoteDriver) scope(rel string) (driver, error) {
	abs, err := d.resolve("scope", rel)
	if err != nil {
		return nil, err
	}
	return &remoteDriver{conn: d.conn, dir: abs}, nil
}

// mcpTransport is the daemon's /mcp over streamable HTTP, with the token,
// X-Root-Dir (the daemon checks it is its root) and X-Scope-Path for a
// scope.
func (d *remoteDriver) mcpTransport(_ context.Context, opts MCPOptions) (mcp.Transport, error) {
	dir := d.dir
	if opts.ScopePath != "" {
		var err error
		if dir, err = d.resolve("mcp", opts.ScopePath); err != nil {
			return nil, err
		}
	}
	// X-Root-Dir is the daemon's root when /health named it, so a Root
	// inside it (checkRoot admits one) reaches MCP as a scope of it.
	root := d.conn.daemonRoot
	if root == "" {
		root = path.Clean(d.conn.opts.Root)
	}
	hdr := http.Header{"X-Root-Dir": {root}}
	if rel := strings.TrimPrefix(strings.TrimPrefix(dir, root), "/"); rel != "" {
		hdr.Set("X-Scope-Path", rel)
	}
	hc := d.conn.httpClient()
	hc.Transport = headerTransport{hdr: hdr, base: hc.Transport, conn: d.conn}
	return &mcp.StreamableClientTransport{Endpoint: d.conn.baseURL("http") + "/mcp",
		HTTPClient: hc, DisableStandaloneSSE: true}, nil
}

func (d *remoteDriver) close() error { return d.conn.close() }

// headerTransport adds fixed headers and conn's token to every request it
// sends on base. When the daemon refuses the token (401) and
// RemoteOptions.TokenFile now holds another one, the request is sent once
// more with it: the daemon answers 401 at admission, before it reads the
// body, so the refused request ran nothing and cannot run twice.
type headerTransport struct {
	hdr  http.Header
	base http.RoundTripper
	conn *remoteConn
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	tok := h.conn.token()
	resp, err := h.send(r, tok)
	if err != nil {
		return resp, err
	}
	why := ""
	if resp.StatusCode == http.StatusUnauthorized && (r.Body == nil || r.GetBody != nil) {
		var next string
		if next, why = h.conn.retryToken(tok); next != "" {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if r.GetBody != nil {
				body, err := r.GetBody()
				if err != nil {
					return nil, err
				}
				r = r.Clone(r.Context())
				r.Body = body
			}
			if resp, err = h.send(r, next); err != nil {
				return resp, err
			}
			why = "; it refused the token RemoteOptions.TokenFile " + h.conn.opts.TokenFile + " held before too"
		}
	}
	return h.answer(resp, why)
}

// send sends r with the fixed headers and tok.
func (h headerTransport) send(r *http.Request, tok string) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.hdr {
		r.Header[k] = v
	}
	if tok != "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	return h.base.RoundTrip(r)
}

// answer bounds resp's body and turns a refusal into the daemon's reason;
// why is added to a 401's (what RemoteOptions.TokenFile held).
func (h headerTransport) answer(resp *http.Response, why string) (*http.Response, error) {
	// The MCP SDK reads a JSON answer whole; an event stream it bounds per
	// event (mcp.DefaultMaxEventSize). A JSON answer gets the same bound
	// here, so a daemon (or whatever answers in its place) cannot make the
	// client hold more (TestAttackHugeMCPAnswer).
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "text/event-stream" {
		resp.Body = &boundedBody{ReadCloser: resp.Body, left: maxMCPAnswer}
	}
	if resp.StatusCode < 400 {
		return resp, nil
	}
	// The MCP SDK reports a refusal by its status alone ("Forbidden");
	// the daemon's {"error","message"} says why (a wrong token, a root
	// that is not the daemon's), so that is the error.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var refusal struct{ Error, Message string }
	if json.Unmarshal(body, &refusal) != nil || refusal.Error == "" {
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return resp, nil
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		why = ""
	}
	return nil, fmt.Errorf("HTTP %d %s: %s%s", resp.StatusCode, refusal.Error, refusal.Message, why)
}

// maxMCPAnswer bounds one JSON answer of /mcp, as the SDK bounds one
// event of a stream.
const maxMCPAnswer = mcp.DefaultMaxEventSize

// errMCPAnswerTooLarge ends the reading of a JSON answer over maxMCPAnswer.
var errMCPAnswerTooLarge = fmt.Errorf("the daemon's answer is longer than %d bytes (the client's limit)", maxMCPAnswer)

// boundedBody is a response body that fails once more than left bytes
// were read.
type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errMCPAnswerTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left < 0 {
		return 0, errMCPAnswerTooLarge
	}
	return n, err
}

// cappedBuffer collects output up to max bytes and notes more.
type cappedBuffer struct {
	buf  []byte
	max  int64
	over bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := c.max - int64(len(c.buf)); int64(len(p)) > room {
		c.over = true
		c.buf = append(c.buf, p[:max(room, 0)]...)
		return len(p), nil
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

func (c *cappedBuffer) Bytes() []byte  { return c.buf }
func (c *cappedBuffer) String() string { return string(c.buf) }

// shellQuote single-quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func validEnvName(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for _, c := range k {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

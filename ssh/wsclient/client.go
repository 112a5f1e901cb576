package wsclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentbe/agentbe-daemon/internal/wsnet"
)

// WebSocket close codes the daemon sends on /ssh; CloseReason reports them.
const (
	CloseNormal       = wsnet.CloseNormal       // 1000: the SSH connection ended
	CloseGoingAway    = wsnet.CloseGoingAway    // 1001: "Server shutting down"
	CloseInternal     = wsnet.CloseInternal     // 1011: keepalive timeout, SSH setup failure
	CloseTryAgain     = wsnet.CloseTryAgain     // 1013: connection cap reached
	ClosePolicy       = wsnet.ClosePolicy       // 1008: no SSH login in time
	CloseUnauthorized = wsnet.CloseUnauthorized // 4001: bad or missing token
)

// Defaults for the zero values of Dialer.
const (
	// DefaultReadBufferSize is the WebSocket read buffer. SSH packets larger
	// than it are read straight into the caller's buffer, so a small one
	// costs nothing.
	DefaultReadBufferSize = 16 << 10
	// DefaultWriteBufferSize is the WebSocket write buffer. A message is
	// framed in write-buffer-sized pieces, so it is large; it is pooled and
	// held only while a message is being sent.
	DefaultWriteBufferSize = 64 << 10
	// DefaultHandshakeTimeout bounds the HTTP upgrade (gorilla's default).
	DefaultHandshakeTimeout = 45 * time.Second
)

// A Dialer opens a daemon's /ssh WebSocket. Its zero value uses the
// defaults above and the proxy named by the environment (HTTPS_PROXY, ...).
type Dialer struct {
	// ReadBufferSize is the WebSocket read buffer; 0 means
	// DefaultReadBufferSize.
	ReadBufferSize int
	// WriteBufferSize is the pooled WebSocket write buffer; 0 means
	// DefaultWriteBufferSize.
	WriteBufferSize int
	// HandshakeTimeout bounds the HTTP upgrade; 0 means
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// TLSClientConfig is used for wss:// (nil: the system roots).
	TLSClientConfig *tls.Config
}

// writeBuffers is the write buffer pool of every Dialer with the same
// WriteBufferSize; gorilla requires one pool per size.
var writeBuffers sync.Map // int → *sync.Pool

func writePool(size int) *sync.Pool {
	if p, ok := writeBuffers.Load(size); ok {
		return p.(*sync.Pool)
	}
	p, _ := writeBuffers.LoadOrStore(size, &sync.Pool{})
	return p.(*sync.Pool)
}

// Dial is (&Dialer{}).Dial: the defaults.
func Dial(ctx context.Context, rawURL, token string) (*Conn, error) {
	var d Dialer
	return d.Dial(ctx, rawURL, token)
}

// Dial opens a daemon's /ssh WebSocket (ws://, wss://, or http(s):// which
// is taken to mean the same; a URL without a path gets /ssh) and returns it
// as a net.Conn carrying the SSH byte stream, ready for x/crypto/ssh's
// NewClientConn or for Proxy. The token is sent as "Authorization: Bearer";
// "" sends none.
//
// A daemon that rejects the token completes the upgrade and then closes with
// 4001: Dial succeeds, and the first Read ends; CloseReason on the returned
// conn tells why.
func (d *Dialer) Dial(ctx context.Context, rawURL, token string) (*Conn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("proxy: bad URL %q: %w", rawURL, err)
	}
	switch u.Scheme {
	case "ws", "wss":
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return nil, fmt.Errorf("proxy: URL %q: scheme must be ws, wss, http or https", rawURL)
	}
	if u.Path == "" {
		u.Path = "/ssh"
	}
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	rbuf, wbuf, hto := d.ReadBufferSize, d.WriteBufferSize, d.HandshakeTimeout
	if rbuf <= 0 {
		rbuf = DefaultReadBufferSize
	}
	if wbuf <= 0 {
		wbuf = DefaultWriteBufferSize
	}
	if hto <= 0 {
		hto = DefaultHandshakeTimeout
	}
	wd := websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: hto,
		ReadBufferSize:   rbuf,
		WriteBufferSize:  wbuf,
		WriteBufferPool:  writePool(wbuf),
		TLSClientConfig:  d.TLSClientConfig,
	}
	ws, resp, err := wd.DialContext(ctx, u.String(), h)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("proxy: %s: HTTP %s (is this the daemon's /ssh endpoint?)", u.Redacted(), resp.Status)
		}
		return nil, fmt.Errorf("proxy: %s: %w", u.Redacted(), err)
	}
	return &Conn{c: wsnet.New(ws)}, nil
}

// Conn is the client side of an SSH-over-WebSocket connection (see Dial):
// a net.Conn whose byte stream is the SSH connection's. It is safe for one
// reader and any number of writers at once, as x/crypto/ssh uses it.
type Conn struct {
	c *wsnet.Conn
}

var _ net.Conn = (*Conn)(nil)

// Read reads the SSH byte stream; it returns io.EOF once the daemon closed
// the WebSocket (CloseReason tells why).
func (c *Conn) Read(p []byte) (int, error) { return c.c.Read(p) }

// Write queues p to be sent; see the net.Conn contract.
func (c *Conn) Write(p []byte) (int, error) { return c.c.Write(p) }

// Close sends what is queued, performs the WebSocket closing handshake
// (1000) and closes the TCP connection. It is safe to call more than once.
func (c *Conn) Close() error { return c.c.Close() }

// LocalAddr is this side of the TCP connection.
func (c *Conn) LocalAddr() net.Addr { return c.c.LocalAddr() }

// RemoteAddr is the daemon's side of the TCP connection.
func (c *Conn) RemoteAddr() net.Addr { return c.c.RemoteAddr() }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error { return c.c.SetDeadline(t) }

// SetReadDeadline sets the read deadline; a read that times out ends the
// connection.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.c.SetReadDeadline(t) }

// SetWriteDeadline sets the deadline for sending queued data.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.c.SetWriteDeadline(t) }

// CloseReason returns the close code and reason the daemon sent, if it
// closed the WebSocket (0 otherwise): 4001 bad token, 1001 shutting down,
// 1013 too many connections, 1011 keepalive timeout.
func (c *Conn) CloseReason() (int, string) {
	return c.c.CloseReason()
}

// ErrUnauthorized is returned by Proxy when the daemon rejects the token
// (wrapped with the daemon's reason when it closed a connection it had
// admitted, after a rotation of its token).
var ErrUnauthorized = errors.New("the daemon rejected the token (WebSocket closed 4001 Unauthorized); check --token or --token-file")

// Proxy bridges in/out (an SSH client's side, e.g. OpenSSH's ProxyCommand
// stdin/stdout) to the daemon's /ssh until either side ends. It returns nil
// when the SSH session ended normally, ErrUnauthorized on a bad token, and
// an error naming the close code when the daemon refused or dropped the
// connection. A read blocked on in when the WebSocket ends is abandoned: the
// caller is expected to exit (the CLI does), or to close in.
func Proxy(ctx context.Context, rawURL, token string, in io.Reader, out io.Writer) error {
	var d Dialer
	return d.Proxy(ctx, rawURL, token, in, out)
}

// Proxy is the package's Proxy dialing with d (a TLSClientConfig that
// trusts a private CA: `agent-backend proxy --ca`).
func (d *Dialer) Proxy(ctx context.Context, rawURL, token string, in io.Reader, out io.Writer) error {
	c, err := d.Dial(ctx, rawURL, token)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()

	var (
		once   sync.Once
		result error
		done   = make(chan struct{})
	)
	finish := func(err error) {
		once.Do(func() { result = err; close(done) })
	}
	go func() {
		// SSH client → daemon. EOF on stdin means the client is done:
		// close the WebSocket normally.
		_, err := io.Copy(c, in)
		finish(err)
	}()
	go func() {
		// Daemon → SSH client. Ends when the daemon closes the WebSocket.
		_, err := io.Copy(out, c)
		finish(err)
	}()
	<-done
	c.Close()

	if code, reason := c.CloseReason(); code != 0 && code != CloseNormal && code != websocket.CloseNoStatusReceived {
		if code == CloseUnauthorized {
			// The daemon's reason says more than "Unauthorized" when it
			// closed a connection it had admitted: its token was rotated
			// or removed (it names the file).
			if r := strings.TrimSpace(reason); r != "" && r != "Unauthorized" {
				return fmt.Errorf("%w: the daemon said %q", ErrUnauthorized, r)
			}
			return ErrUnauthorized
		}
		return fmt.Errorf("proxy: the daemon closed the connection: %d %s", code, strings.TrimSpace(reason))
	}
	if result != nil && !errors.Is(result, net.ErrClosed) && ctx.Err() == nil {
		return fmt.Errorf("proxy: %w", result)
	}
	return nil
}

// NewConn wraps an already dialed WebSocket (for a caller that dials with
// its own gorilla Dialer) as a Conn.
func NewConn(ws *websocket.Conn) *Conn { return &Conn{c: wsnet.New(ws)} }

package sshws

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/gorilla/websocket"
)

// Dial opens a daemon's /ssh WebSocket (ws://, wss://, or http(s):// which
// is taken to mean the same) and returns it as a net.Conn carrying the SSH
// byte stream, ready for x/crypto/ssh's NewClientConn or for Proxy. The token
// is sent as "Authorization: Bearer"; "" sends none.
//
// A daemon that rejects the token completes the upgrade and then closes with
// 4001: Dial succeeds, and the first Read ends; CloseReason on the returned
// conn (a *Conn) tells why.
func Dial(ctx context.Context, rawURL, token string) (*Conn, error) {
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
	d := websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: websocket.DefaultDialer.HandshakeTimeout,
		// Large SSH packets are read straight into the caller's buffer,
		// so a small read buffer costs nothing. The client write path
		// frames a message in write-buffer-sized pieces, so that one is
		// large, and pooled: held only while a message is being sent.
		ReadBufferSize:  16 << 10,
		WriteBufferSize: 64 << 10,
		WriteBufferPool: dialWriteBuffers,
	}
	ws, resp, err := d.DialContext(ctx, u.String(), h)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("proxy: %s: HTTP %s (is this the daemon's /ssh endpoint?)", u.Redacted(), resp.Status)
		}
		return nil, fmt.Errorf("proxy: %s: %w", u.Redacted(), err)
	}
	return &Conn{wsConn: newWSConn(ws)}, nil
}

var dialWriteBuffers = &sync.Pool{}

// Conn is the client side of an SSH-over-WebSocket connection (see Dial).
type Conn struct {
	*wsConn
}

// CloseReason returns the close code and reason the daemon sent, if it
// closed the WebSocket (0 otherwise): 4001 bad token, 1001 shutting down,
// 1013 too many connections, 1011 keepalive timeout.
func (c *Conn) CloseReason() (int, string) {
	return c.peerCode()
}

// ErrUnauthorized is returned by Proxy when the daemon rejects the token.
var ErrUnauthorized = errors.New("the daemon rejected the token (WebSocket closed 4001 Unauthorized); check --token or --token-file")

// Proxy bridges in/out (an SSH client's side, e.g. OpenSSH's ProxyCommand
// stdin/stdout) to the daemon's /ssh until either side ends. It returns nil
// when the SSH session ended normally, ErrUnauthorized on a bad token, and
// an error naming the close code when the daemon refused or dropped the
// connection. A read blocked on in when the WebSocket ends is abandoned: the
// caller is expected to exit (the CLI does), or to close in.
func Proxy(ctx context.Context, rawURL, token string, in io.Reader, out io.Writer) error {
	c, err := Dial(ctx, rawURL, token)
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
			return ErrUnauthorized
		}
		return fmt.Errorf("proxy: the daemon closed the connection: %d %s", code, strings.TrimSpace(reason))
	}
	if result != nil && !errors.Is(result, net.ErrClosed) && ctx.Err() == nil {
		return fmt.Errorf("proxy: %w", result)
	}
	return nil
}

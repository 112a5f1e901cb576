package browser

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/procnet"
	"github.com/agentbe/agentbe-daemon/netguard"
)

// guardProxy is the session's HTTP proxy on loopback, and Chromium's only
// way out: --proxy-server points at it and --proxy-bypass-list=<-loopback>
// sends even loopback addresses through it. It dials with netguard.Dial,
// which resolves the host itself, checks every address and connects to the
// one it checked. So it holds what request interception cannot: WebSockets
// (which the DevTools Fetch domain does not pause) and a DNS answer that
// changes between interception's check and the connection (Chromium does
// not resolve proxied hosts itself).
//
// It listens on 127.0.0.1 and serves only connections whose socket belongs
// to Chromium's user (procnet.SocketUID): another user's process
// cannot borrow it. A process of that same user could; it admits nothing
// the rules do not, so it gives such a process no address it could not
// reach itself, unless the operator admitted private ones.
type guardProxy struct {
	ln      net.Listener
	srv     *http.Server
	tr      *http.Transport
	dial    func(ctx context.Context, network, addr string) (net.Conn, error) // the door's Dial (Provider.localDial)
	refused func(target string, err error)

	mu      sync.Mutex
	tunnels map[net.Conn]struct{} // hijacked connections, closed at close
	closed  bool
	wg      sync.WaitGroup
}

// maxProxyConns bounds the connections one session's proxy holds at once,
// tunnels included (each tunnel costs two descriptors). Chromium keeps to
// a few hundred sockets per proxy (TestConnectionFloodIsBounded); the bound
// is for another process of Chromium's user (the daemon's own, when it is
// not root), which could otherwise hold connections and tunnels without
// end and run the daemon out of descriptors. A variable for tests.
var maxProxyConns = proxyConns

const (
	// proxyConns is maxProxyConns outside tests.
	proxyConns = 1024
	// proxyIdleConns bounds the idle connections the proxy keeps to the
	// sites it reached over plain http, all hosts together: they are held
	// past the request that made them, four per host, and without this
	// bound a page that reaches many hosts could keep more of them than
	// maxProxyConns.
	proxyIdleConns = 64
)

// DescriptorsPerSession bounds the descriptors one browser session holds
// in the daemon: each of its proxy's connections with the connection it
// makes onward (a tunnel's two ends), the proxy's idle connections and its
// listener, and the pipes to Chromium (DevTools, its output) with room to
// spare. The daemon's start-up check of RLIMIT_NOFILE counts it once for
// each of --browser-max-sessions (daemon/nofile.go).
const DescriptorsPerSession = 2*proxyConns + proxyIdleConns + 8

// proxyIdleTimeout closes a kept-alive connection that sends no next
// request.
const proxyIdleTimeout = 2 * time.Minute

// startProxy listens on a loopback port and serves until close, to
// connections of uid only (any when uid < 0), connecting through dial. Without allowHTTP it carries
// no plain http: no proxied http:// request, and no tunnel to port 80
// (where a ws:// WebSocket would go); allowLocal carries plain http to a
// host written as this machine (netguard.LoopbackHost) all the same.
func startProxy(dial func(ctx context.Context, network, addr string) (net.Conn, error), allowHTTP, allowLocal bool, uid int, refused func(string, error)) (*guardProxy, error) {
	httpOK := func(host string) bool { return allowHTTP || (allowLocal && netguard.LoopbackHost(host)) }
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var ln net.Listener = l
	if uid >= 0 {
		ln = &uidListener{Listener: l, uid: uid, refused: refused}
	}
	ln = &capListener{Listener: ln, max: int64(maxProxyConns), refused: refused}
	g := &guardProxy{ln: ln, dial: dial, refused: refused, tunnels: map[net.Conn]struct{}{}}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dial,
		MaxIdleConnsPerHost:   4,
		MaxIdleConns:          proxyIdleConns,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: time.Minute,
		// Chromium refuses a header past 256 KiB: the proxy reads no more
		// than the door's bound on its behalf.
		MaxResponseHeaderBytes: netguard.MaxResponseHeaderBytes,
	}
	g.tr = tr
	rp := &httputil.ReverseProxy{
		// The request already names its absolute URL (a proxy request);
		// nothing is rewritten and no X-Forwarded-For is added.
		Rewrite:   func(*httputil.ProxyRequest) {},
		Transport: tr,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var be *netguard.BlockedError
			if errors.As(err, &be) {
				g.refused(r.URL.Host, err)
				http.Error(w, "refused by the daemon's network rules", http.StatusForbidden)
				return
			}
			http.Error(w, "proxy: "+err.Error(), http.StatusBadGateway)
		},
	}
	g.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodConnect {
				// The port as a number: the dialler reads "0080" as 80.
				if host, port, _ := net.SplitHostPort(r.Host); !httpOK(host) && portNumber(port) == 80 {
					g.refused(r.Host, errors.New("plain http (port 80) is not allowed"))
					http.Error(w, "refused by the daemon's network rules", http.StatusForbidden)
					return
				}
				g.tunnel(w, r)
				return
			}
			if !httpOK(r.URL.Hostname()) {
				g.refused(r.Host, errors.New("plain http is not allowed"))
				http.Error(w, "refused by the daemon's network rules", http.StatusForbidden)
				return
			}
			if !r.URL.IsAbs() || (r.URL.Scheme != "http" && r.URL.Scheme != "ws") {
				http.Error(w, "not a proxy request", http.StatusBadRequest)
				return
			}
			if r.URL.Scheme == "ws" {
				r.URL.Scheme = "http"
			}
			rp.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       proxyIdleTimeout,
	}
	g.wg.Go(func() { _ = g.srv.Serve(ln) })
	return g, nil
}

// portNumber is port's number as netguard.Dial reads it (base 10, leading
// zeros allowed), or -1.
func portNumber(port string) int {
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return -1
	}
	return int(n)
}

// addr is the proxy's host:port.
func (g *guardProxy) addr() string { return g.ln.Addr().String() }

// tunnel serves CONNECT (https, wss): it dials the target under the rules
// and copies bytes both ways until either side closes.
func (g *guardProxy) tunnel(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	up, err := g.dial(ctx, "tcp", r.Host)
	cancel()
	if err != nil {
		var be *netguard.BlockedError
		if errors.As(err, &be) {
			g.refused(r.Host, err)
			http.Error(w, "refused by the daemon's network rules", http.StatusForbidden)
			return
		}
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !g.track(down, up) {
		return
	}
	_, _ = down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
	g.wg.Go(func() {
		defer g.untrack(down, up)
		done := make(chan struct{}, 2)
		go func() {
			// Bytes the client sent after its CONNECT are in buf.
			_, _ = io.Copy(up, buf)
			closeWrite(up)
			done <- struct{}{}
		}()
		_, _ = io.Copy(down, up)
		closeWrite(down)
		<-done
	})
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// track records a tunnel's two connections; false (and both closed) once
// the proxy is closing.
func (g *guardProxy) track(conns ...net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		g.tunnels[c] = struct{}{}
	}
	return true
}

func (g *guardProxy) untrack(conns ...net.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(g.tunnels, c)
	}
}

// close stops the proxy and cuts every connection, tunnels included, and
// waits for its goroutines.
func (g *guardProxy) close() {
	g.mu.Lock()
	g.closed = true
	for c := range g.tunnels {
		c.Close()
	}
	g.mu.Unlock()
	_ = g.srv.Close()
	g.wg.Wait()
	g.tr.CloseIdleConnections()
}

// capListener holds at most max connections at once: one past it is
// closed unanswered, and reported. A connection counts until it is closed,
// hijacked for a tunnel or not.
type capListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused func(string, error)
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			l.refused(c.RemoteAddr().String(), fmt.Errorf("the proxy holds %d connections already", l.max))
			c.Close()
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

// countedConn gives its place back once, at its first Close.
type countedConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

// CloseWrite half-closes a tunnel's client side (closeWrite).
func (c *countedConn) CloseWrite() error {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		return tc.CloseWrite()
	}
	return c.Close()
}

// uidListener accepts only connections from sockets of one user.
type uidListener struct {
	net.Listener
	uid     int
	refused func(string, error)
}

func (l *uidListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		peer, _ := c.RemoteAddr().(*net.TCPAddr)
		local, _ := c.LocalAddr().(*net.TCPAddr)
		uid, found, err := socketUID(peer, local)
		if err == nil && found && uid == l.uid {
			return c, nil
		}
		why := fmt.Errorf("a connection to the proxy from a process that is not the browser's (uid %d)", l.uid)
		if err != nil {
			why = fmt.Errorf("a connection to the proxy whose owner cannot be read, so it may not be the browser's (uid %d): %w", l.uid, err)
		}
		l.refused(c.RemoteAddr().String(), why)
		c.Close()
	}
}

// socketUID is the owner of the TCP socket from peer to local, as the
// kernel's table of the daemon's network namespace shows it
// (procnet.SocketUID): false when no socket has both addresses, or the
// table could not be read (err says why).
func socketUID(peer, local *net.TCPAddr) (uid int, found bool, err error) {
	if peer == nil || local == nil {
		return 0, false, errors.New("not a TCP connection")
	}
	return procnet.SocketUID(peer.AddrPort(), local.AddrPort())
}

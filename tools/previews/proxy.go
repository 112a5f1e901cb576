//go:build linux

package previews

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/agentbe/agentbe-daemon/internal/admit"
)

// Proxy is the HTTP face: it serves prefix + "{port}/rest" (prefix ends in
// "/", e.g. "/preview/") by forwarding the request, as "/rest" with its
// query, to the workspace's server on port, WebSocket upgrades included.
// admit runs first and either refuses the request (it wrote the answer,
// ok false) or says who the caller is (its Caller.Within decides which
// ports it reaches). The Authorization header, which carries the daemon's
// token, is not forwarded; the server sees Host "localhost:{port}", and
// X-Forwarded-Host, -Proto, -For and -Prefix ("/preview/{port}") say how
// the client reached it.
//
// The prefix itself (GET /preview/) lists the ports the caller reaches:
// {"ports":[{"port":8000,"address":"127.0.0.1"}]}, lowest first.
//
// Answers of its own, as {"error","message"} JSON: 400 for a path that
// names no port, 404 for a port no workspace process listens on, 503 over
// the connection cap, 502 when the server cannot be reached.
func (p *Previews) Proxy(prefix string, admit func(http.ResponseWriter, *http.Request) (Caller, bool)) http.Handler {
	h := p.newProxy(prefix, admit)
	p.mu.Lock()
	p.dropIdle = h.closeIdle
	p.mu.Unlock()
	return h
}

// proxy is Proxy's handler. Requests without a body that ask for no
// upgrade (nearly every page and asset) take the lean path (lean.go); the
// rest, WebSockets and request bodies, go through httputil.ReverseProxy.
// Each keeps its own pool of connections, with the same bounds: the lean
// path's client (client.go) and ReverseProxy's Transport.
type proxy struct {
	p      *Previews
	prefix string
	admit  func(http.ResponseWriter, *http.Request) (Caller, bool)
	tr     *http.Transport
	rp     *httputil.ReverseProxy
	pool   *leanPool
	noLean bool         // every request through rp (the tests' reference)
	leaned atomic.Int64 // requests the lean path served (for the tests)
}

func (p *Previews) newProxy(prefix string, admit func(http.ResponseWriter, *http.Request) (Caller, bool)) *proxy {
	tr := &http.Transport{
		DialContext: p.proxyDial,
		// A workspace's server is on loopback: a few idle connections per
		// (scope, port) keep small requests at one hop, and go soon. The
		// lean path's pool has the same bounds (client.go).
		MaxIdleConnsPerHost: leanMaxIdle,
		IdleConnTimeout:     leanIdleTimeout,
		DisableCompression:  true, // pass bodies through as the server sent them
		ForceAttemptHTTP2:   false,
	}
	rp := &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := pr.In.Context().Value(targetKey{}).(target)
			pr.Out.URL.Scheme = "http"
			// The pool's key: a pooled connection is reused only for the
			// same scope and port (proxyDial checks the pair).
			pr.Out.URL.Host = t.key + ":" + strconv.Itoa(t.port)
			pr.Out.URL.Path, pr.Out.URL.RawPath = t.path, t.rawPath
			pr.Out.Host = "localhost:" + strconv.Itoa(t.port)
			pr.Out.Header.Del("Authorization")
			// Where the client reached it, for links an app builds: the
			// daemon's host and scheme, and the path prefix it strips.
			pr.SetXForwarded()
			pr.Out.Header.Set("X-Forwarded-Prefix", t.prefix)
		},
		ModifyResponse: func(res *http.Response) error {
			if err := checkStatus(res); err != nil {
				return err
			}
			holdRPStream(res)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, err)
		},
		BufferPool: &copyBufs,
	}
	return &proxy{p: p, prefix: prefix, admit: admit, tr: tr, rp: rp, pool: newLeanPool(p)}
}

// closeIdle closes the idle connections of both paths' pools.
func (h *proxy) closeIdle() {
	h.tr.CloseIdleConnections()
	h.pool.closeIdle()
}

func (h *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	prefix := h.prefix
	esc := r.URL.EscapedPath()
	rest, ok := strings.CutPrefix(esc, prefix)
	if !ok {
		writeError(w, ErrBadTarget)
		return
	}
	// Admission first: a request without the token learns nothing,
	// not even whether its port was well formed.
	caller, ok := h.admit(w, r)
	if !ok {
		return
	}
	if rest == "" {
		h.p.serveList(w, r, caller)
		return
	}
	seg, tail, slash := strings.Cut(rest, "/")
	port, err := ParsePort(seg)
	if err != nil {
		writeError(w, err)
		return
	}
	if !slash {
		// A page's relative links resolve against its directory: send
		// the browser to /preview/{port}/ first, as a file server does.
		u := *r.URL
		u.Path, u.RawPath = prefix+seg+"/", ""
		http.Redirect(w, r, u.RequestURI(), http.StatusMovedPermanently)
		return
	}
	t := target{port: port, within: caller.Within, caller: caller, rawPath: "/" + tail, prefix: prefix + seg}
	if t.path, err = url.PathUnescape(t.rawPath); err != nil {
		writeError(w, ErrBadTarget)
		return
	}
	if t.path == t.rawPath {
		t.rawPath = ""
	}
	if !h.noLean && r.ContentLength == 0 && upgradeType(r.Header) == "" {
		h.forward(w, r, &t)
		return
	}
	t.key = poolKey(caller.Within)
	ctx := r.Context()
	if upgradeType(r.Header) == "" {
		// The body goes on to the server while its answer comes back: a
		// server may answer (a stream) before it has read the body.
		// Otherwise net/http/1 reads what is left of the request body
		// itself before it writes the answer's header, then closes it:
		// a client that sends more only once it has seen the answer
		// gets none (until the body deadline), and the Transport's copy
		// of a body sent whole fails, and it closes the connection under
		// the answer (TestProxyFullDuplex).
		_ = http.NewResponseController(w).EnableFullDuplex()
	}
	if caller.Hold != nil && upgradeType(r.Header) != "" {
		// A WebSocket lasts: ReverseProxy closes it when ctx ends, here
		// when a reload revokes the caller's token.
		held, release := caller.Hold(ctx)
		defer release()
		ctx = held
	} else if caller.Hold != nil {
		// A streamed answer is held once it turns out to be one
		// (holdRPStream, in ModifyResponse).
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		t.cancel = cancel
	}
	h.rp.ServeHTTP(w, r.WithContext(context.WithValue(ctx, targetKey{}, t)))
}

type targetKey struct{}

// target is what one proxied request reaches, carried to proxyDial in the
// request's context.
type target struct {
	port          int
	within, key   string
	caller        Caller
	path, rawPath string
	prefix        string // "/preview/{port}"
	// cancel ends the request's context on ReverseProxy's path, for a
	// streamed answer whose caller's token a reload revokes; nil without
	// holds and for an upgrade, which is held whole.
	cancel context.CancelCauseFunc
}

// poolKey names a scope in the transport's pool, so that a connection
// opened for one scope is never reused for another. A hash, because a
// scope is a path; SHA-256, because a caller picks its narrower scope.
func poolKey(within string) string {
	h := sha256.Sum256([]byte(within))
	return "w" + hex.EncodeToString(h[:16])
}

// proxyDial is the transport's dialer: the context is the request's.
func (p *Previews) proxyDial(ctx context.Context, _, addr string) (net.Conn, error) {
	t, ok := ctx.Value(targetKey{}).(target)
	host, port, err := net.SplitHostPort(addr)
	if !ok || err != nil || host != t.key || port != strconv.Itoa(t.port) {
		return nil, errors.New("previews: a dial without its request")
	}
	return p.Dial(ctx, t.caller, t.port)
}

// holdStream holds a streamed answer (no length, or server-sent events:
// a dev server's event stream can last as long as the page) for the
// caller's token, as an upgrade is held: when a reload removes the token
// or changes its rights, abort closes the connection to the server, and
// the copy to the client is aborted. An answer with a length is not held:
// it ends by itself, and holding every request would cost a registration
// each on the hot path (nothing is allocated for a request until its
// answer turns out to be streamed). The returned func ends the hold; call
// it once the answer is copied. Without Caller.Hold it holds nothing.
func holdStream(parent context.Context, c Caller, abort func()) (release func()) {
	if c.Hold == nil || abort == nil {
		return func() {}
	}
	held, end := c.Hold(parent)
	stop := context.AfterFunc(held, abort)
	return func() {
		stop()
		end()
	}
}

// holdRPStream is holdStream on ReverseProxy's path, from ModifyResponse:
// the hold ends when the answer's body is closed (ReverseProxy closes it
// once copied, or on an error).
func holdRPStream(res *http.Response) {
	if res.ContentLength != -1 && !eventStream(res.Header.Get("Content-Type")) {
		return
	}
	ctx := res.Request.Context()
	t, ok := ctx.Value(targetKey{}).(target)
	if !ok || t.cancel == nil {
		return
	}
	abort := func() { t.cancel(errors.New("previews: the caller's token was revoked or changed")) }
	res.Body = &heldBody{ReadCloser: res.Body, release: holdStream(ctx, t.caller, abort)}
}

// heldBody ends its hold when closed.
type heldBody struct {
	io.ReadCloser
	release func()
	once    sync.Once
}

func (b *heldBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// checkStatus refuses an answer whose status is under 100: its three
// digits pass http.ReadResponse ("099", "000"), but net/http's WriteHeader
// panics on such a code, which would put a stack trace in the daemon's log
// for each request a server answers so (TestAttackLeanClientStatusUnder100).
// Both paths call it before writing the answer's header.
func checkStatus(res *http.Response) error {
	if res.StatusCode < 100 {
		return fmt.Errorf("backend answered status %03d, which is no HTTP status (100-999)", res.StatusCode)
	}
	return nil
}

// writeError answers a refusal or a failure with the daemon's JSON error
// shape.
func writeError(w http.ResponseWriter, err error) {
	status, title := http.StatusBadGateway, "Bad Gateway"
	switch {
	case errors.Is(err, ErrBadTarget):
		status, title = http.StatusBadRequest, "Bad Request"
	case errors.Is(err, ErrNotWorkspacePort):
		status, title = http.StatusNotFound, "Not Found"
	case errors.Is(err, ErrBusy), errors.Is(err, ErrClosed):
		status, title = http.StatusServiceUnavailable, "Service Unavailable"
	case errors.Is(err, context.Canceled):
		return // the client went away; nobody reads an answer
	}
	admit.WriteJSONError(w, status, title, "preview: "+err.Error())
}

// serveList answers GET prefix with the ports c reaches.
func (p *Previews) serveList(w http.ResponseWriter, r *http.Request, c Caller) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		admit.WriteJSONError(w, http.StatusMethodNotAllowed, "Method Not Allowed", "the list of ports is read with GET")
		return
	}
	type port struct {
		Port    int    `json:"port"`
		Address string `json:"address"`
	}
	list := struct {
		Ports []port `json:"ports"`
	}{Ports: []port{}}
	for _, pt := range p.Ports(c.Within) {
		list.Ports = append(list.Ports, port{pt.Port, pt.Addr.String()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(list)
}

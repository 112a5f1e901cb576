package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/ratelog"
)

// Connection bounds. Every accepted TCP connection counts against
// --max-connections and --max-connections-per-ip from Accept until it is
// closed, whatever it turns into: a keep-alive HTTP connection, or a
// WebSocket that net/http handed over (hijacked) to /ssh.
const (
	// reserveConns are connection slots kept beyond the caps for /health
	// and /metrics: a connection accepted while a cap is reached (the
	// total, or its address's) gets one of them, may ask only those two
	// paths (anything else is answered 503), and is closed after its
	// answer. A probe therefore still gets its answer when the caps are
	// full, even from the address that fills them.
	reserveConns = 8
	// reserveLifetime is how long a reserve connection lives in all, from
	// accept to close, whatever it sends or does not send: long enough for
	// a probe's request and answer, and short enough that connections that
	// send a header and then nothing cannot hold the reserve.
	reserveLifetime = 5 * time.Second
	// shedPercent is how full the cap must be before idle connections are
	// closed to make room.
	shedPercent = 80
	// newConnGrace spares a connection that has not sent its first request
	// yet from shedding for this long after it was accepted: its client is
	// probably about to. After that, a silent connection is as idle as a
	// keep-alive one.
	newConnGrace = time.Second
	// idleTimeout closes a keep-alive connection that sent nothing for
	// this long.
	idleTimeout = 30 * time.Second
	// fdReserve are descriptors kept for the daemon's own (files, the log,
	// the listeners, the host key): the connection cap is lowered if the
	// descriptor limit cannot hold both. What the other parts may hold
	// (commands, SFTP, previews, the browser's proxies) is counted at
	// start by checkDescriptors (nofile.go), which warns past the limit.
	fdReserve = 256
)

// connLimiter is a net.Listener that enforces the connection caps. Its
// ConnState method must be the http.Server's ConnState hook: it tracks which
// connections are idle, so they can be closed under pressure. Idleness is
// kept on each connection (limitedConn.idle, an atomic), not in a shared
// map: the hook runs twice per request of every client (active, then idle
// again), and a map under l.mu made every request of every client take
// one lock twice (docs/performance.md, "Contention under load").
type connLimiter struct {
	net.Listener
	max, perIP int
	log        *slog.Logger
	refused    func(reason string) // counts a refusal in the metrics

	mu       sync.Mutex
	total    int                // admitted connections (reserve ones excluded)
	reserved int                // reserve connections open
	byIP     map[netip.Addr]int // admitted connections per client address
	// conns are the admitted connections (reserve ones excluded), written
	// once at accept and once at release; shedding reads their idle state.
	conns map[*limitedConn]struct{}

	warns ratelog.Every // the warnings about refused connections, rate-limited

	// opened and closed, when set, are told of each admitted connection
	// (not reserve ones) and of its end (memoryReturner).
	opened, closed func()
}

func newConnLimiter(ln net.Listener, max, perIP int, log *slog.Logger, refused func(string)) *connLimiter {
	return &connLimiter{Listener: ln, max: max, perIP: perIP, log: log, refused: refused,
		byIP: map[netip.Addr]int{}, conns: map[*limitedConn]struct{}{}}
}

// limitedConn releases its slot once, on the first Close.
type limitedConn struct {
	net.Conn
	l       *connLimiter
	ip      netip.Addr
	reserve bool
	closed  atomic.Bool
	// expire closes a reserve connection when its reserveLifetime is over,
	// whatever it is doing.
	expire *time.Timer
	// idle is when the HTTP server last reported the connection new or
	// idle, in Unix nanoseconds: positive once it has answered a request,
	// negated while it has not had one yet (StateNew), 0 while a request
	// runs, once hijacked or closed, and once shedding has claimed it.
	idle atomic.Int64
}

// idleSince reports whether c is idle, since when, and whether it has not
// had a request yet.
func idleSince(v int64) (since time.Time, fresh, idle bool) {
	switch {
	case v > 0:
		return time.Unix(0, v), false, true
	case v < 0:
		return time.Unix(0, -v), true, true
	}
	return time.Time{}, false, false
}

func (c *limitedConn) Close() error {
	if c.expire != nil {
		c.expire.Stop()
	}
	return c.close()
}

// close releases the slot and closes the connection; the expire timer calls
// it directly (it must not read c.expire, which Accept sets after starting
// the timer).
func (c *limitedConn) close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.release(c)
	}
	return c.Conn.Close()
}

// Accept returns the next connection within the caps, or on a reserve slot.
// A connection over the caps with every reserve slot taken is closed at
// once (the client sees a reset or EOF before any HTTP byte) and counted;
// Accept goes on to the next one.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := admit.ClientAddr(c.RemoteAddr())
		shed := l.shedIfPressed(ip)
		for _, s := range shed {
			_ = s.Close()
		}
		l.mu.Lock()
		switch {
		case l.total < l.max && l.byIP[ip] < l.perIP:
			l.total++
			l.byIP[ip]++
			lc := &limitedConn{Conn: c, l: l, ip: ip}
			l.conns[lc] = struct{}{}
			l.mu.Unlock()
			if l.opened != nil {
				l.opened()
			}
			return lc, nil
		case l.reserved < reserveConns:
			l.reserved++
			l.mu.Unlock()
			lc := &limitedConn{Conn: c, l: l, ip: ip, reserve: true}
			lc.expire = time.AfterFunc(reserveLifetime, func() { _ = lc.close() })
			return lc, nil
		}
		reason := "max-connections-per-ip"
		if l.total >= l.max {
			reason = "max-connections"
		}
		l.noteRefusal(reason, ip)
		l.mu.Unlock()
		l.refused(reason)
		_ = c.Close()
	}
}

// shedIfPressed picks the idle connections to close before admitting a
// connection from ip, oldest idle first: enough to bring the daemon back
// under shedPercent of --max-connections, and one of ip's own when ip is at
// its per-address cap. Connections in their first newConnGrace without a
// request are spared.
func (l *connLimiter) shedIfPressed(ip netip.Addr) []net.Conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	excess := l.total - (l.max*shedPercent/100 - 1) // to close for the global bound
	local := l.byIP[ip] >= l.perIP
	if excess <= 0 && !local {
		return nil
	}
	now := time.Now()
	type cand struct {
		raw   *limitedConn
		state int64 // raw.idle when it was read
		since time.Time
		mine  bool
	}
	var cands []cand
	for c := range l.conns {
		v := c.idle.Load()
		since, fresh, idle := idleSince(v)
		if !idle || fresh && now.Sub(since) < newConnGrace {
			continue
		}
		cands = append(cands, cand{c, v, since, c.ip == ip})
	}
	slices.SortFunc(cands, func(a, b cand) int { return a.since.Compare(b.since) })
	// The TCP connections are closed, not what the HTTP server holds: a
	// TLS connection's Close would first write an alert, which can block.
	var shed []net.Conn
	for _, cd := range cands {
		if excess <= 0 && !(local && cd.mine) {
			continue
		}
		// Claim it: a connection whose request began since it was read
		// (the hook stored 0 or a later time) is no longer a candidate.
		if !cd.raw.idle.CompareAndSwap(cd.state, 0) {
			continue
		}
		excess--
		if cd.mine {
			local = false
		}
		shed = append(shed, cd.raw)
		if excess <= 0 && !local {
			break
		}
	}
	if len(shed) > 0 {
		l.log.Debug("closing idle connections to make room", "closed", len(shed), "open", l.total, "max", l.max)
	}
	return shed
}

// noteRefusal logs a refused connection at warn, rate-limited (ratelog:
// at most one line every 10 s, with how many were refused since). l.mu is
// held.
func (l *connLimiter) noteRefusal(reason string, ip netip.Addr) {
	l.warns.Warn(l.log, "connections", "connection refused: too many connections", "limit", "--"+reason, "remote", ip.String(),
		"open", l.total, "max", l.max, "max_per_ip", l.perIP)
}

func (l *connLimiter) release(c *limitedConn) {
	l.mu.Lock()
	if c.reserve {
		l.reserved--
		l.mu.Unlock()
		return
	}
	l.total--
	delete(l.conns, c)
	if n := l.byIP[c.ip] - 1; n > 0 {
		l.byIP[c.ip] = n
	} else {
		delete(l.byIP, c.ip)
	}
	l.mu.Unlock()
	if l.closed != nil {
		l.closed()
	}
}

// ConnState is the http.Server's hook: it keeps the connection's idle state
// current, without a lock (limitedConn.idle).
func (l *connLimiter) ConnState(c net.Conn, st http.ConnState) {
	lc := asLimited(c)
	if lc == nil || lc.reserve {
		return // reserve connections are never shed; their lifetime runs on
	}
	switch st {
	case http.StateNew:
		lc.idle.Store(-time.Now().UnixNano())
	case http.StateIdle:
		lc.idle.Store(time.Now().UnixNano())
	default: // active, hijacked, closed
		lc.idle.Store(0)
	}
}

// asLimited finds the limitedConn under c (c itself, or under TLS).
func asLimited(c net.Conn) *limitedConn {
	for c != nil {
		if lc, ok := c.(*limitedConn); ok {
			return lc
		}
		nc, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = nc.NetConn()
	}
	return nil
}

// idleCountLocked reports how many admitted connections are idle (tests).
// l.mu is held.
func (l *connLimiter) idleCountLocked() int {
	n := 0
	for c := range l.conns {
		if _, _, idle := idleSince(c.idle.Load()); idle {
			n++
		}
	}
	return n
}

// counts reports the admitted and reserve connections (tests, metrics).
func (l *connLimiter) counts() (total, reserved int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.reserved
}

type reserveKey struct{}

// connContext marks requests that arrived on a reserve connection.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if lc := asLimited(c); lc != nil && lc.reserve {
		return context.WithValue(ctx, reserveKey{}, true)
	}
	return ctx
}

// bodyTimeout is the body deadline of the daemon's requests
// (admit.BodyDeadline), read when the daemon starts; tests shorten it.
var bodyTimeout = admit.BodyTimeout

// replyStallTimeout is how long a piece of a reply may wait for the client
// to take it (admit.ReplyDeadline), read when the daemon starts; tests
// shorten it.
var replyStallTimeout = admit.ReplyStallTimeout

// reserveGate lets a request on a reserve connection reach only /health and
// /metrics, without a body, and closes the connection after the answer
// either way.
func reserveGate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(reserveKey{}) == nil {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		if r.URL.Path == routeHealth || r.URL.Path == routeMetrics {
			if r.ContentLength != 0 {
				// A probe sends no body; one that declares a body could
				// hold the slot while net/http waits for it.
				admit.WriteJSONError(w, http.StatusBadRequest, "Request body not allowed",
					"a connection over the caps may only ask /health or /metrics, without a body")
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Retry-After", "1")
		admit.WriteJSONError(w, http.StatusServiceUnavailable, "Too many connections",
			"the daemon holds --max-connections connections, or --max-connections-per-ip from this address; only /health and /metrics answer until some close")
	})
}

// raiseNoFile raises the soft RLIMIT_NOFILE to the hard limit (Go's runtime
// normally has done so already; then this only reads it) and returns the
// soft limit now in force.
func raiseNoFile() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("getrlimit(RLIMIT_NOFILE): %w", err)
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			return lim.Cur, fmt.Errorf("setrlimit(RLIMIT_NOFILE, %d): %w", raised.Cur, err)
		}
		lim = raised
	}
	return lim.Cur, nil
}

// connCaps fits the configured caps into the descriptor limit nofile: each
// connection holds a descriptor, and fdReserve (plus the reserve slots)
// stay free for everything else. It says why when it lowered them.
func connCaps(maxConns, perIP int, nofile uint64) (int, int, string) {
	if nofile == 0 || nofile >= uint64(maxConns)+fdReserve+reserveConns {
		return maxConns, perIP, "" // unknown (0), or enough (RLIM_INFINITY too)
	}
	lowered := max(int(nofile)-fdReserve-reserveConns, 16)
	why := fmt.Sprintf("RLIMIT_NOFILE is %d: --max-connections %d lowered to %d, keeping %d descriptors for the daemon's own and the reserve slots; raise the limit (LimitNOFILE=, ulimit -n) to allow more", nofile, maxConns, lowered, fdReserve+reserveConns)
	return lowered, min(perIP, lowered), why
}

package netguard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// Defaults of Options.
const (
	DefaultMaxRedirects = 3
	DefaultMaxBodyBytes = 10 << 20
	DefaultTimeout      = 30 * time.Second
	// MaxResponseHeaderBytes bounds a response's header, 1xx responses
	// included (net/http's own default, 10 MB, let one response of many
	// short header lines cost the daemon 70 MB of heap as a header map).
	MaxResponseHeaderBytes = 1 << 20
)

// Options configure a Client. The zero value is the strict default.
type Options struct {
	// AllowHosts are host names (exact, or "*.example.com" for its
	// subdomains) exempt from the host and address rules, but for
	// link-local and cloud metadata addresses, which stay refused.
	AllowHosts []string
	// AllowPrivate lets loopback, private (RFC 1918, ULA) and CGNAT
	// addresses through; link-local addresses (cloud metadata) stay
	// refused.
	AllowPrivate bool
	// AllowPorts replaces the allowed ports (80 and 443).
	AllowPorts []uint16
	// AllowPrefixes admits addresses in these prefixes whatever the rules
	// but the cloud metadata addresses (tests admit their own loopback
	// server).
	AllowPrefixes []netip.Prefix
	// AllowLoopback admits a host written as this machine, localhost
	// (or a name under .localhost), an address of 127.0.0.0/8 or ::1, at
	// any port: a page the user serves locally. Only loopback addresses
	// are dialled for it; another name that resolves to loopback stays
	// refused, so a DNS answer cannot turn a remote name into this machine.
	AllowLoopback bool
	// MaxRedirects is how many redirects are followed (DefaultMaxRedirects
	// when 0; negative: none).
	MaxRedirects int
	// MaxBodyBytes caps a response body (DefaultMaxBodyBytes when 0).
	MaxBodyBytes int64
	// Timeout bounds a request, redirects and body included
	// (DefaultTimeout when 0).
	Timeout time.Duration
	// Proxy, when set, is the only proxy used (none from the environment).
	// The proxy resolves names itself, so only the rules that need no
	// resolution hold for a name; an address written in the URL is still
	// checked before the request goes to the proxy.
	Proxy *url.URL
	// UserAgent is sent when a request sets none.
	UserAgent string
	// Resolve looks names up (net.DefaultResolver when nil); tests stub it.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
}

// BlockedError is a request the rules refuse (a 403 for a caller; not a
// network failure).
type BlockedError struct {
	URL    string
	Reason string
}

func (e *BlockedError) Error() string { return fmt.Sprintf("refused %s: %s", e.URL, e.Reason) }

// Result is a response read whole, up to the cap.
type Result struct {
	Status    int
	Header    http.Header
	Body      []byte
	Truncated bool   // the body was longer than the cap
	URL       string // the final URL, after redirects
}

// Client makes guarded requests. It is safe for concurrent use.
type Client struct {
	opts    Options
	guard   *ssrf.Guardian
	private *ssrf.Guardian // with AllowPrivate
	ports   []uint16
	http    *http.Client
	judged  *http.Client // for requests under a loopback judge: no keep-alive
	resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	dialer  *net.Dialer
}

// privateRanges are what AllowPrivate admits.
var privateRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("100.64.0.0/10"),
}
var privateRanges6 = []netip.Prefix{netip.MustParsePrefix("fc00::/7"), netip.MustParsePrefix("::1/128")}

// metadataAddrs are the cloud platforms' instance metadata and credential
// endpoints. They are refused whatever the options: AllowPrivate admits
// fc00::/7 and 100.64.0.0/10, where AWS's IPv6 and Alibaba's endpoints
// live; a name in AllowHosts (metadata.google.internal under *.internal)
// may resolve to one; an AllowPrefixes prefix may cover one (100.64.0.0/10
// for a VPN); and Azure's lies in public address space.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack and most others
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task credentials
	netip.MustParseAddr("169.254.170.23"),  // AWS EKS Pod Identity
	netip.MustParseAddr("fd00:ec2::254"),   // AWS, over IPv6
	netip.MustParseAddr("fd00:ec2::23"),    // AWS EKS Pod Identity, over IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("168.63.129.16"),   // Azure WireServer
	netip.MustParseAddr("192.0.0.192"),     // Oracle Cloud
}

// metadataAddr reports whether a (unmapped) is a cloud metadata endpoint
// or, for a host AllowHosts exempts, any link-local address, where such
// endpoints live.
func metadataAddr(a netip.Addr, exempt bool) bool {
	a = a.WithZone("")
	return slices.Contains(metadataAddrs, a) || (exempt && a.IsLinkLocalUnicast())
}

// New returns a Client.
func New(opts Options) *Client {
	if opts.MaxRedirects == 0 {
		opts.MaxRedirects = DefaultMaxRedirects
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	ports := opts.AllowPorts
	if len(ports) == 0 {
		ports = []uint16{80, 443}
	}
	var v4, v6 []netip.Prefix
	for _, p := range opts.AllowPrefixes {
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	base := []ssrf.Option{ssrf.WithPorts(ports...), ssrf.WithAllowedV4Prefixes(v4...), ssrf.WithAllowedV6Prefixes(v6...)}
	c := &Client{opts: opts, ports: ports, resolve: opts.Resolve}
	c.guard = ssrf.New(base...)
	c.private = ssrf.New(append(base, ssrf.WithAllowedV4Prefixes(append(v4, privateRanges...)...), ssrf.WithAllowedV6Prefixes(append(v6, privateRanges6...)...))...)
	if c.resolve == nil {
		c.resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	c.dialer = &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            c.dial,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    8,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  opts.Timeout,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}
	if opts.Proxy != nil {
		tr.Proxy = http.ProxyURL(opts.Proxy)
	}
	c.http = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// A request under a loopback judge never shares a connection: the
	// pool is kept by address, not by caller, so a connection the judge
	// admitted for one caller must not serve another's request unjudged.
	jtr := tr.Clone()
	jtr.DisableKeepAlives = true
	c.judged = &http.Client{Transport: jtr, CheckRedirect: c.http.CheckRedirect}
	return c
}

// CloseIdleConnections releases pooled connections.
func (c *Client) CloseIdleConnections() {
	c.http.CloseIdleConnections()
	c.judged.CloseIdleConnections()
}

// guardFor is the address rule set for host.
func (c *Client) guardFor(host string) *ssrf.Guardian {
	if c.opts.AllowPrivate {
		return c.private
	}
	return c.guard
}

func (c *Client) hostAllowed(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, a := range c.opts.AllowHosts {
		a = strings.ToLower(a)
		if suffix, ok := strings.CutPrefix(a, "*."); ok {
			if strings.HasSuffix(h, "."+suffix) {
				return true
			}
		} else if h == a {
			return true
		}
	}
	return false
}

// dial resolves the host itself, checks every address, and connects to a
// checked one: no second resolution can hand it another address.
func (c *Client) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if c.opts.Proxy != nil {
		return c.dialer.DialContext(ctx, network, addr) // the operator's proxy
	}
	return c.dialChecked(ctx, network, addr)
}

// loopbackJudgeKey carries WithLoopbackJudge's judge in a context.
type loopbackJudgeKey struct{}

// WithLoopbackJudge returns ctx carrying judge, which every connection the
// door then makes under ctx to this machine (a loopback address, the
// unspecified one, or an address of one of its interfaces: each reaches a
// listener on 0.0.0.0) passes before it is made: a non-nil error refuses it as a *BlockedError. The door itself
// decides whether loopback may be reached at all (AllowLoopback,
// AllowPrivate, AllowPrefixes, AllowHosts); the judge narrows that for
// one caller, by port (the daemon: a workspace command's port is reached
// only as /preview/ reaches it, previews.Reachable).
func WithLoopbackJudge(ctx context.Context, judge func(port int) error) context.Context {
	return context.WithValue(ctx, loopbackJudgeKey{}, judge)
}

// judgeLoopback applies ctx's loopback judge to the addresses about to be
// dialled for port.
func judgeLoopback(ctx context.Context, addr string, checked []netip.Addr, port uint16) error {
	judge, _ := ctx.Value(loopbackJudgeKey{}).(func(int) error)
	if judge == nil {
		return nil
	}
	var own []netip.Addr
	if ifs, err := net.InterfaceAddrs(); err == nil {
		for _, ia := range ifs {
			if p, err := netip.ParsePrefix(ia.String()); err == nil { // "192.0.2.2/24"
				own = append(own, p.Addr().Unmap())
			}
		}
	}
	for _, a := range checked {
		if a = a.Unmap(); a.IsLoopback() || a.IsUnspecified() || slices.Contains(own, a.WithZone("")) {
			if err := judge(int(port)); err != nil {
				return &BlockedError{URL: addr, Reason: err.Error()}
			}
			return nil
		}
	}
	return nil
}

// dialChecked resolves and checks addr's host and connects to a checked
// address.
func (c *Client) dialChecked(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, err
	}
	checked, exempt, err := c.addrs(ctx, host, uint16(p))
	if err != nil {
		return nil, err
	}
	if err := judgeLoopback(ctx, addr, checked, uint16(p)); err != nil {
		return nil, err
	}
	d := *c.dialer
	if !exempt {
		d.Control = func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			if !slices.Contains(checked, ap.Addr().Unmap()) {
				return &BlockedError{URL: addr, Reason: "connected to an address that was not checked: " + address}
			}
			return nil
		}
	}
	var last error
	for _, a := range checked {
		conn, err := d.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(p)).String())
		if err == nil {
			return conn, nil
		}
		last = err
	}
	return nil, last
}

// addrs resolves host (an address stands for itself) and returns the
// addresses the rules admit for port, and whether the host is exempt
// (AllowHosts). No admitted address is a *BlockedError naming the last
// refused one.
func (c *Client) addrs(ctx context.Context, host string, port uint16) (checked []netip.Addr, exempt bool, err error) {
	exempt = c.hostAllowed(host)
	if c.opts.AllowLoopback && LoopbackHost(host) {
		return c.loopbackAddrs(ctx, host)
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else if addrs, err = c.resolve(ctx, host); err != nil {
		return nil, exempt, err
	}
	g := c.guardFor(host)
	var refusal error
	for _, a := range addrs {
		a = a.Unmap()
		if !exempt {
			if err := g.SafeAddrPort(netip.AddrPortFrom(a, port)); err != nil {
				refusal = &BlockedError{URL: net.JoinHostPort(host, strconv.Itoa(int(port))), Reason: fmt.Sprintf("%s resolves to %s: %v", host, a, err)}
				continue
			}
			if c.opts.AllowPrivate && a.IsLinkLocalUnicast() {
				refusal = &BlockedError{URL: net.JoinHostPort(host, strconv.Itoa(int(port))), Reason: fmt.Sprintf("%s resolves to %s, a link-local address (cloud metadata)", host, a)}
				continue
			}
		}
		// An address of the well-known NAT64 prefix, which only an
		// operator's prefix admits (an IPv6-only host reaching the IPv4
		// internet), stands for the IPv4 address it carries: that one
		// must pass the rules too, or 64:ff9b::a9fe:a9fe would be the
		// metadata address and 64:ff9b::7f00:1 the gateway's loopback.
		if v4, ok := nat64Embedded(a); ok && !exempt {
			err := g.SafeAddrPort(netip.AddrPortFrom(v4, port))
			if err == nil && metadataAddr(v4, false) {
				err = errors.New("a cloud metadata address")
			}
			if err != nil {
				refusal = &BlockedError{URL: net.JoinHostPort(host, strconv.Itoa(int(port))), Reason: fmt.Sprintf("%s resolves to %s, NAT64 for %s: %v", host, a, v4, err)}
				continue
			}
		}
		// After the rules, so that their refusal names the rule; what an
		// option let through is checked here.
		if metadataAddr(a, exempt) {
			refusal = &BlockedError{URL: net.JoinHostPort(host, strconv.Itoa(int(port))), Reason: fmt.Sprintf("%s resolves to %s, a cloud metadata or link-local address, which no option admits", host, a)}
			continue
		}
		checked = append(checked, a)
	}
	if len(checked) == 0 {
		if refusal == nil {
			refusal = fmt.Errorf("%s: no address", host)
		}
		return nil, exempt, refusal
	}
	return checked, exempt, nil
}

// nat64Prefix is the well-known NAT64 prefix (RFC 6052), whose addresses
// carry an IPv4 address in their last 32 bits.
var nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")

// nat64Embedded is the IPv4 address a NAT64 address stands for.
func nat64Embedded(a netip.Addr) (netip.Addr, bool) {
	if !nat64Prefix.Contains(a) {
		return netip.Addr{}, false
	}
	b := a.As16()
	return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
}

// LoopbackHost reports whether host is written as this machine:
// localhost, a name under .localhost, or a loopback address (brackets
// allowed). A name is judged as written, never by what it resolves to.
func LoopbackHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
	return err == nil && a.Unmap().IsLoopback()
}

// loopbackAddrs are the addresses of a loopback host (LoopbackHost) under
// AllowLoopback: the address itself, or what the name resolves to, of
// which only loopback addresses are kept.
func (c *Client) loopbackAddrs(ctx context.Context, host string) ([]netip.Addr, bool, error) {
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
		addrs = []netip.Addr{ip}
	} else if addrs, err = c.resolve(ctx, host); err != nil {
		return nil, false, err
	}
	var checked []netip.Addr
	for _, a := range addrs {
		if a = a.Unmap(); a.IsLoopback() {
			checked = append(checked, a)
		}
	}
	if len(checked) == 0 {
		return nil, false, &BlockedError{URL: host, Reason: host + " resolves to no loopback address"}
	}
	return checked, false, nil
}

// Vet applies every rule to a URL that something other than this Client
// will fetch (the browser provider's Chromium): the URL rules of CheckURL,
// then the address rules on the host's addresses, resolved now. It returns
// the addresses that passed. The caller's fetcher resolves the name again,
// so a DNS answer that changes in between (rebinding) is not covered the
// way Fetch covers it; callers say so in their documentation.
func (c *Client) Vet(ctx context.Context, u *url.URL) ([]netip.Addr, error) {
	if err := c.CheckURL(u); err != nil {
		return nil, err
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, &BlockedError{URL: redact(u), Reason: "bad port " + port}
	}
	addrs, _, err := c.addrs(ctx, u.Hostname(), uint16(p))
	if err != nil {
		var be *BlockedError
		if errors.As(err, &be) {
			be.URL = redact(u)
		}
		return nil, err
	}
	return addrs, nil
}

// CheckURL applies the rules that need no resolution.
func (c *Client) CheckURL(u *url.URL) error {
	refuse := func(format string, args ...any) error {
		return &BlockedError{URL: redact(u), Reason: fmt.Sprintf(format, args...)}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return refuse("only http and https URLs are allowed, not %q", u.Scheme)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if reason := c.checkHostPort(u.Hostname(), port); reason != "" {
		return refuse("%s", reason)
	}
	return nil
}

// checkHostPort is the rule on a host name and port that needs no
// resolution, shared by CheckURL and Dial: why they are refused, or "".
func (c *Client) checkHostPort(host, port string) string {
	if host == "" {
		return "no host"
	}
	if c.opts.AllowLoopback && LoopbackHost(host) {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return "bad port " + port
		}
		return ""
	}
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil || !slices.Contains(c.ports, uint16(pn)) {
		return fmt.Sprintf("port %s is not allowed (allowed: %v)", port, c.ports)
	}
	return c.hostRule(host)
}

// hostRule is the rule on a host name that needs no resolution: why it is
// refused, or "" when it is not.
func (c *Client) hostRule(host string) string {
	if c.hostAllowed(host) {
		return ""
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	switch {
	case h == "localhost" || strings.HasSuffix(h, ".localhost"):
		return host + " is this machine"
	case strings.HasSuffix(h, ".local") || strings.HasSuffix(h, ".internal") || h == "metadata":
		return host + " is a local or internal name"
	}
	if _, err := netip.ParseAddr(h); err != nil && looksNumeric(h) {
		return host + " is an IPv4 address in a non-canonical form; write it as a.b.c.d"
	}
	return ""
}

// Dial connects to addr (host:port) for a connection that is not an HTTP
// request of the Client's (a database client, a proxy's CONNECT tunnel),
// under the rules a URL's host and port get: the port, the host name, then
// every resolved address; it connects to an address it checked, so a
// second DNS answer is never used. With an operator's Proxy it is refused:
// an HTTP proxy carries no raw TCP, and going around it would leave the
// route the operator chose. A refusal is a *BlockedError.
func (c *Client) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if network != "tcp" && network != "tcp4" && network != "tcp6" {
		return nil, &BlockedError{URL: addr, Reason: "only TCP connections are made, not " + network}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, &BlockedError{URL: addr, Reason: err.Error()}
	}
	if c.opts.Proxy != nil {
		return nil, &BlockedError{URL: addr, Reason: "the network is reached through the operator's proxy, which carries no raw TCP connection"}
	}
	if reason := c.checkHostPort(host, port); reason != "" {
		return nil, &BlockedError{URL: addr, Reason: reason}
	}
	return c.dialChecked(ctx, network, addr)
}

// looksNumeric reports whether every label of h is a number in decimal,
// octal (0...) or hex (0x...), which inet_aton reads as an IPv4 address.
func looksNumeric(h string) bool {
	labels := strings.Split(h, ".")
	if len(labels) > 4 {
		return false
	}
	for _, l := range labels {
		if l == "" {
			return false
		}
		digits := l
		base := 10
		if x, ok := strings.CutPrefix(strings.ToLower(l), "0x"); ok {
			digits, base = x, 16
		}
		if digits == "" {
			continue // "0x" alone is 0 to inet_aton
		}
		if _, err := strconv.ParseUint(digits, base, 64); err != nil {
			return false
		}
	}
	return true
}

// redact is a URL as messages show it: without its credentials, query and
// fragment, which may hold secrets an operator's code put there (an API
// key in a query parameter) and which a message hands to the agent. A
// query left out shows as "?…".
func redact(u *url.URL) string {
	v := *u
	v.User = nil
	q := v.RawQuery != "" || v.ForceQuery
	v.RawQuery, v.ForceQuery, v.Fragment, v.RawFragment = "", false, "", ""
	if q {
		return v.String() + "?…"
	}
	return v.String()
}

// Fetch makes the request, following redirects by hand, and reads the body
// up to the cap. req.GetBody must be set for a body that a 307/308 redirect
// would send again (http.NewRequest sets it for the usual readers).
func (c *Client) Fetch(ctx context.Context, req *http.Request) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	if req.Header.Get("User-Agent") == "" && c.opts.UserAgent != "" {
		req.Header.Set("User-Agent", c.opts.UserAgent)
	}
	seen := map[string]bool{}
	cur := req.WithContext(ctx)
	for hop := 0; ; hop++ {
		if err := c.CheckURL(cur.URL); err != nil {
			return nil, err
		}
		if err := c.checkLiteral(ctx, cur.URL); err != nil {
			return nil, err
		}
		seen[cur.URL.String()] = true
		hc := c.http
		if ctx.Value(loopbackJudgeKey{}) != nil {
			hc = c.judged
		}
		resp, err := hc.Do(cur)
		if err != nil {
			var be *BlockedError
			if errors.As(err, &be) {
				return nil, be
			}
			// net/http names the whole URL; the message shows it redacted.
			var ue *url.Error
			if errors.As(err, &ue) {
				ue.URL = redact(cur.URL)
			}
			return nil, err
		}
		loc := resp.Header.Get("Location")
		if !isRedirect(resp.StatusCode) || loc == "" {
			return c.read(resp)
		}
		resp.Body.Close()
		if c.opts.MaxRedirects < 0 || hop >= c.opts.MaxRedirects {
			return nil, fmt.Errorf("too many redirects (more than %d)", max(c.opts.MaxRedirects, 0))
		}
		next, err := cur.URL.Parse(loc)
		if err != nil {
			return nil, fmt.Errorf("bad redirect location %q: %w", loc, err)
		}
		if seen[next.String()] {
			return nil, fmt.Errorf("redirect loop at %s", redact(next))
		}
		nreq, err := redirected(ctx, cur, next, resp.StatusCode)
		if err != nil {
			return nil, err
		}
		cur = nreq
	}
}

// checkLiteral applies the address rules to a URL whose host is an
// address, when the request goes to the operator's proxy: the dial, which
// checks addresses otherwise, then reaches only the proxy.
func (c *Client) checkLiteral(ctx context.Context, u *url.URL) error {
	if c.opts.Proxy == nil {
		return nil
	}
	if _, err := netip.ParseAddr(u.Hostname()); err != nil {
		return nil // a name: the proxy resolves it
	}
	_, err := c.Vet(ctx, u)
	return err
}

func isRedirect(code int) bool {
	switch code {
	case 301, 302, 303, 307, 308:
		return true
	}
	return false
}

// redirected is the next hop's request: the method and body per the status,
// and, when the origin changes, no credentials and no header but
// crossOriginHeaders.
func redirected(ctx context.Context, prev *http.Request, next *url.URL, code int) (*http.Request, error) {
	method, keepBody := prev.Method, code == 307 || code == 308
	if code == 303 || ((code == 301 || code == 302) && prev.Method == http.MethodPost) {
		method = http.MethodGet
	}
	var body io.Reader
	if keepBody && prev.GetBody != nil {
		rc, err := prev.GetBody()
		if err != nil {
			return nil, err
		}
		body = rc
	} else if keepBody && prev.Body != nil && prev.Body != http.NoBody {
		return nil, errors.New("a redirect asks to send the body again, and it cannot be replayed")
	}
	req, err := http.NewRequestWithContext(ctx, method, next.String(), body)
	if err != nil {
		return nil, err
	}
	req.Header = prev.Header.Clone()
	if !keepBody {
		req.Header.Del("Content-Type")
		req.Header.Del("Content-Length")
	}
	if origin(prev.URL) != origin(next) {
		// Another origin gets none of the request's headers but those
		// that carry no credential: an API key travels in a header of any
		// name (X-Api-Key), and the redirect's target may be the agent's.
		kept := http.Header{}
		for _, h := range crossOriginHeaders {
			if v, ok := req.Header[h]; ok {
				kept[h] = v
			}
		}
		if !keepBody {
			kept.Del("Content-Type")
		}
		req.Header = kept
		req.URL.User = nil
	}
	return req, nil
}

// crossOriginHeaders are the headers a redirect to another origin keeps
// (canonical names): those that describe what the client accepts and the
// body it sends again.
var crossOriginHeaders = []string{"Accept", "Accept-Language", "Accept-Encoding", "User-Agent", "Content-Type", "Content-Language"}

func origin(u *url.URL) string {
	return u.Scheme + "://" + strings.ToLower(u.Host)
}

func (c *Client) read(resp *http.Response) (*Result, error) {
	defer resp.Body.Close()
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(resp.Body, c.opts.MaxBodyBytes+1))
	if err != nil {
		return nil, err
	}
	res := &Result{Status: resp.StatusCode, Header: resp.Header, URL: resp.Request.URL.String()}
	res.Body = buf.Bytes()
	if n > c.opts.MaxBodyBytes {
		res.Body, res.Truncated = res.Body[:c.opts.MaxBodyBytes], true
	}
	return res, nil
}

//go:build linux

package previews

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"mime"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// forward is the lean path of the proxy, for a request without a body
// that asks for no upgrade: what httputil.ReverseProxy does for it, with
// the same outcome (TestLeanMatchesReverseProxy holds the two to the same
// requests and answers, header for header), at less cost per request.
// ReverseProxy clones the request (every header value copied), deletes the
// hop-by-hop and forwarding headers from the clone one by one, allocates
// its rewrite's ProxyRequest, parses the Content-Type of every answer and
// allocates a 32 KiB copy buffer per request; here the outgoing header is
// built in one pass that shares the incoming values (the client only
// reads them), the answer's headers are filtered as they are copied, and
// the copy buffer is pooled. The request is sent by the lean path's own
// client (client.go), on this goroutine, over a pooled connection that
// Previews.Dial opened (so judged as ReverseProxy's are).
func (h *proxy) forward(w http.ResponseWriter, r *http.Request, t *target) {
	h.leaned.Add(1)
	out := &http.Request{
		Method:     r.Method,
		URL:        &url.URL{Scheme: "http", Path: t.path, RawPath: t.rawPath, RawQuery: cleanQueryParams(r.URL.RawQuery), ForceQuery: r.URL.ForceQuery},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     outHeader(r, t),
		Host:       "localhost:" + strconv.Itoa(t.port),
	}
	// 1xx answers (103 Early Hints) are passed on as ReverseProxy does,
	// until the final answer has come (the client calls on1xx only before
	// it returns, on this goroutine).
	on1xx := func(code int, header http.Header) {
		dst := w.Header()
		copyHeader(dst, header)
		w.WriteHeader(code)
		clear(dst)
	}
	res, err := h.pool.roundTrip(r.Context(), t.caller, leanKey{t.within, t.port}, out, on1xx)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := checkStatus(res); err != nil {
		res.Body.Close()
		writeError(w, err)
		return
	}
	if res.StatusCode == http.StatusSwitchingProtocols {
		// Nothing asked for it (an upgrade takes ReverseProxy's path):
		// refused with ReverseProxy's words for each case.
		res.Body.Close()
		switch up := upgradeType(res.Header); {
		case !printable(up):
			writeError(w, fmt.Errorf("backend tried to switch to invalid protocol %q", up))
		case up != "":
			writeError(w, fmt.Errorf("backend tried to switch protocol %q when %q was requested", up, ""))
		default:
			writeError(w, errors.New("internal error: 101 switching protocols response with non-writable body"))
		}
		return
	}
	dst := w.Header()
	conn := connectionTokens(res.Header["Connection"])
	// ReverseProxy decides on streaming after dropping what Connection
	// names: a Content-Type it names is no answer's type.
	ct := ""
	if !listed(conn, "Content-Type") {
		ct = res.Header.Get("Content-Type")
	}
	for k, vv := range res.Header {
		if hopByHop(k) || listed(conn, k) {
			continue
		}
		if have, ok := dst[k]; ok {
			dst[k] = append(have, vv...)
		} else {
			dst[k] = vv // res is ours alone: its values are not copied
		}
	}
	announced := len(res.Trailer)
	if announced > 0 {
		keys := make([]string, 0, len(res.Trailer))
		for k := range res.Trailer {
			keys = append(keys, k)
		}
		dst.Add("Trailer", strings.Join(keys, ", "))
	}
	w.WriteHeader(res.StatusCode)

	// A streamed answer (no length, or server-sent events) is flushed as
	// it comes, its header at once: a page waiting on it sees each piece.
	var flush func() error
	if res.ContentLength == -1 || eventStream(ct) {
		flush = http.NewResponseController(w).Flush
		_ = flush()
		if b, ok := res.Body.(*leanBody); ok {
			defer holdStream(r.Context(), t.caller, b.aborter())()
		}
	}
	if err := copyBody(w, res.Body, flush); err != nil {
		res.Body.Close()
		// The answer is under way: all that is left is to abort it, as
		// ReverseProxy does (the server drops the client's connection).
		if r.Context().Value(http.ServerContextKey) != nil {
			panic(http.ErrAbortHandler)
		}
		return
	}
	res.Body.Close() // now, not deferred: it fills res.Trailer
	if len(res.Trailer) > 0 {
		// Chunked, so that net/http does not compute a length for a
		// short body and leave no room for the trailer.
		_ = http.NewResponseController(w).Flush()
	}
	if len(res.Trailer) == announced {
		copyHeader(dst, res.Trailer)
		return
	}
	for k, vv := range res.Trailer {
		k = http.TrailerPrefix + k
		for _, v := range vv {
			dst.Add(k, v)
		}
	}
}

// outHeader is the header the workspace's server gets: the client's, less
// the hop-by-hop headers (and those its Connection header names), the
// daemon's token and what the client said about forwarding, plus the
// X-Forwarded-* headers the proxy sets; "TE: trailers" is kept, and no
// User-Agent is added where the client sent none. The values are the
// incoming request's own slices.
func outHeader(r *http.Request, t *target) http.Header {
	in := r.Header
	conn := connectionTokens(in["Connection"])
	h := make(http.Header, len(in)+5)
	for k, vv := range in {
		switch {
		case hopByHop(k), listed(conn, k):
		case k == "Authorization", k == "Forwarded", k == "X-Forwarded-For", k == "X-Forwarded-Host", k == "X-Forwarded-Proto":
		default:
			h[k] = vv
		}
	}
	if hasToken(in["Te"], "trailers") {
		h["Te"] = []string{"trailers"}
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		h["X-Forwarded-For"] = []string{ip}
	}
	h["X-Forwarded-Host"] = []string{r.Host}
	if r.TLS == nil {
		h["X-Forwarded-Proto"] = []string{"http"}
	} else {
		h["X-Forwarded-Proto"] = []string{"https"}
	}
	h["X-Forwarded-Prefix"] = []string{t.prefix}
	if _, ok := in["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // not Go's own
	}
	return h
}

// hopByHop: the headers of one connection (RFC 9110, 7.6.1), which a
// proxy does not pass on; the list ReverseProxy removes.
func hopByHop(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// connectionTokens are the header names a Connection header lists, in
// canonical form; nil (no allocation) when it lists none.
func connectionTokens(values []string) []string {
	var names []string
	for _, v := range values {
		for tok := range strings.SplitSeq(v, ",") {
			if tok = textproto.TrimString(tok); tok != "" {
				names = append(names, textproto.CanonicalMIMEHeaderKey(tok))
			}
		}
	}
	return names
}

func listed(names []string, k string) bool {
	for _, n := range names {
		if n == k {
			return true
		}
	}
	return false
}

// upgradeType is the protocol a header asks to switch to, "" for none.
func upgradeType(h http.Header) string {
	if !hasToken(h["Connection"], "upgrade") {
		return ""
	}
	return h.Get("Upgrade")
}

// hasToken says whether a comma-separated header lists token, compared
// without regard to ASCII case (as golang.org/x/net/http/httpguts does).
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for tok := range strings.SplitSeq(v, ",") {
			if asciiEqualFold(strings.Trim(tok, " \t"), token) {
				return true
			}
		}
	}
	return false
}

// printable says whether s is printable ASCII only, as ReverseProxy
// requires of a protocol a server switches to.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// eventStream says whether a Content-Type is text/event-stream (server-
// sent events), as ReverseProxy decides it (mime.ParseMediaType), but
// parsed only when it could be: a type whose base lowers to
// text/event-stream holds "event-stream" in ASCII letters of either case
// (no other character lowers to one of them), and most answers' types do
// not.
func eventStream(ct string) bool {
	if !containsFold(ct, "event-stream") {
		return false
	}
	base, _, _ := mime.ParseMediaType(ct)
	return base == "text/event-stream"
}

// containsFold says whether s holds sub (lower-case ASCII) in any ASCII
// case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if asciiEqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// copyHeader adds every value of src to dst.
func copyHeader(dst, src http.Header) {
	for k, vv := range src {
		for _, v := range vv {
			dst.Add(k, v)
		}
	}
}

// cleanQueryParams drops the query's unparsable parameters, as
// ReverseProxy does (a ';' or a bad escape makes it re-encode the query
// from what url.ParseQuery keeps), so that the server and the proxy agree
// on what the query says.
func cleanQueryParams(s string) string {
	reencode := func(s string) string {
		v, _ := url.ParseQuery(s)
		return v.Encode()
	}
	for i := 0; i < len(s); {
		switch s[i] {
		case ';':
			return reencode(s)
		case '%':
			if i+2 >= len(s) || !ishex(s[i+1]) || !ishex(s[i+2]) {
				return reencode(s)
			}
			i += 3
		default:
			i++
		}
	}
	return s
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// copyBody copies an answer's body to the client in pooled buffers,
// flushing after each piece when flush is set. It returns the first read
// error other than io.EOF, or write error.
func copyBody(w io.Writer, body io.Reader, flush func() error) error {
	buf := copyBufs.Get()
	defer copyBufs.Put(buf)
	for {
		n, rerr := body.Read(buf)
		if rerr != nil && rerr != io.EOF && rerr != context.Canceled {
			log.Printf("previews: read error during body copy: %v", rerr)
		}
		if n > 0 {
			m, werr := w.Write(buf[:n])
			if werr == nil && m != n {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				return werr
			}
			if flush != nil {
				_ = flush() // as ReverseProxy: a failed flush shows at the next write
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// copyBufs are the 32 KiB buffers both paths copy bodies with
// (ReverseProxy's BufferPool, and copyBody).
var copyBufs = bufPool{sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}

type bufPool struct{ p sync.Pool }

func (b *bufPool) Get() []byte { return *b.p.Get().(*[]byte) }

func (b *bufPool) Put(buf []byte) {
	if cap(buf) == 32<<10 {
		buf = buf[:cap(buf)]
		b.p.Put(&buf)
	}
}

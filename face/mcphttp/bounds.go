package mcphttp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/agentbe/agentbe-daemon/internal/mcpjson"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds on what one client can make the HTTP endpoint hold: messages per
// batch, bytes per reply, requests in flight per client address.
const (
	// DefaultMaxBatch is Options.MaxBatch's zero value.
	DefaultMaxBatch = 64
	// DefaultMaxReplyBytes is Options.MaxReplyBytes's zero value.
	DefaultMaxReplyBytes = 32 << 20
	// DefaultMaxInflightPerIP is Options.MaxInflightPerIP's zero value.
	DefaultMaxInflightPerIP = 32

	// codeReplyTooLarge is the JSON-RPC error of a request whose result
	// would make the reply larger than MaxReplyBytes (the range -32000 to
	// -32099 is for implementation-defined server errors).
	codeReplyTooLarge = -32000
)

// batchLen counts the messages of a JSON-RPC batch (body starts with '['),
// stopping once it has seen more than limit; ok is false when the body is
// not a well-formed array at the top level (the SDK then reports it). It
// does not decode anything: it only tracks strings and nesting.
func batchLen(body []byte, limit int) (n int, ok bool) {
	depth, inStr, esc, expect := 0, false, false, false
	for _, c := range body {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			continue
		}
		if depth == 1 && expect && c != ']' {
			n++
			expect = false
			if n > limit {
				return n, true
			}
		}
		switch c {
		case '"':
			inStr = true
		case '[', '{':
			depth++
			if depth == 1 {
				expect = true
			}
		case ']', '}':
			depth--
			if depth == 0 {
				return n, true
			}
			if depth < 0 {
				return 0, false
			}
		case ',':
			if depth == 1 {
				expect = true
			}
		}
	}
	return 0, false
}

// writeRPCError answers a JSON-RPC error with a null id (the request as a
// whole is refused) and the given HTTP status.
func writeRPCError(w http.ResponseWriter, status int, code int64, msg string) {
	b, _ := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      any    `json:"id"`
		Error   struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", Error: struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// replyBudget is what is left of MaxReplyBytes for one HTTP request; the
// messages of a batch share it.
type replyBudget struct {
	limit int64
	left  atomic.Int64
}

type budgetKey struct{}

func newReplyBudget(limit int64) *replyBudget {
	b := &replyBudget{limit: limit}
	b.left.Store(limit)
	return b
}

// take reserves n bytes and reports whether they fitted.
func (b *replyBudget) take(n int64) bool {
	for {
		left := b.left.Load()
		if n > left {
			return false
		}
		if b.left.CompareAndSwap(left, left-n) {
			return true
		}
	}
}

// tooLarge is the error that replaces a result the budget cannot hold.
func (b *replyBudget) tooLarge(n int64) string {
	return fmt.Sprintf("the reply to this request would be %d bytes, more than the %d bytes left of the daemon's reply limit of %d bytes (--max-reply-bytes); ask for less: read large files in parts (offset and limit), or send fewer requests per batch",
		n, b.left.Load(), b.limit)
}

// limitReplies is a receiving middleware of the SDK server: on HTTP
// requests (which carry a replyBudget in their context) every result is
// measured and charged to the budget, and one that does not fit is
// replaced by a JSON-RPC error. The fast path checks its own replies in
// writeFast.
func limitReplies(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		b, _ := ctx.Value(budgetKey{}).(*replyBudget)
		if b == nil || err != nil || res == nil {
			return res, err
		}
		// The JSON-RPC envelope around the result: `{"jsonrpc":"2.0",
		// "id":...,"result":}` and a batch's comma.
		n := resultSize(res) + 64
		if !b.take(n) {
			return nil, &jsonrpc.Error{Code: codeReplyTooLarge, Message: b.tooLarge(n)}
		}
		return res, nil
	}
}

// resultSize is the size of res encoded as JSON: counted without encoding
// for a tool result of plain text blocks (the common case, and the large
// one), else by encoding it.
func resultSize(res mcp.Result) int64 {
	if tr, ok := res.(*mcp.CallToolResult); ok && mcpjson.PlainText(tr) {
		n := len(`{"content":[]}`) + len(`,"isError":true`)
		for _, c := range tr.Content {
			n += len(`{"type":"text","text":},`) + jsonStringLen(c.(*mcp.TextContent).Text)
		}
		return int64(n)
	}
	data, err := json.Marshal(res)
	if err != nil {
		return 0 // the SDK reports it when it encodes
	}
	return int64(len(data))
}

// jsonStringLen is len(mcpjson.AppendString(nil, s)), without building it.
func jsonStringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&':
				n++
			case b == '"' || b == '\\' || b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t':
				n += 2
			default:
				n += 6
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// inflightWait is how long a request beyond MaxInflightPerIP waits for one
// of its client's requests to finish before it is answered 429.
const inflightWait = 2 * time.Second

// inflight bounds the /mcp requests being answered per client address: a
// counter per address, kept in a sync.Map whose lookups of a present key
// take no lock. A request takes a slot with a compare-and-swap on its
// address's counter and gives it back with an add; only a request that
// finds its address full takes the address's own mutex, to wait in line.
// Every request of every client took one mutex (and a shared channel)
// before, which the mutex profile under parallel load showed
// (docs/performance.md, "Contention under load").
//
// An address's entry outlives its last request, so that one client's
// requests one after another do not insert and delete it each time; the
// entries no request holds or waits for are dropped (sweep) whenever the
// map has grown to twice what the last sweep left, and at least
// inflightSweepMin: the map stays within a constant factor of the addresses
// with requests in flight.
type inflight struct {
	limit int
	wait  time.Duration
	addrs sync.Map // client address → *addrSlots

	entries atomic.Int64 // in addrs
	sweepAt atomic.Int64 // entries beyond which an insert sweeps
	sweepMu sync.Mutex   // one sweep at a time
}

// inflightSweepMin is the size below which the map is not swept.
const inflightSweepMin = 256

// addrSlots is one client address's requests in flight.
type addrSlots struct {
	// n is how many requests hold a slot; -1 once swept, after which the
	// entry is no longer in the map and a request looks it up again.
	n atomic.Int64
	// waiters counts the requests in queue; changed only under mu, so that
	// a sweep (under mu) never drops an entry someone waits on.
	waiters atomic.Int32
	mu      sync.Mutex
	queue   []chan struct{} // waiting requests, first come first served; each channel has room for one
}

// Outcomes of addrSlots.take.
const (
	slotTaken = iota
	slotsFull
	slotsGone // swept: look the address up again
)

func (a *addrSlots) take(limit int64) int {
	for {
		v := a.n.Load()
		switch {
		case v < 0:
			return slotsGone
		case v >= limit:
			return slotsFull
		case a.n.CompareAndSwap(v, v+1):
			return slotTaken
		}
	}
}

func newInflight(limit int) *inflight {
	f := &inflight{limit: limit, wait: inflightWait}
	f.sweepAt.Store(inflightSweepMin)
	return f
}

// slot is one request's place in its address's count, given back by
// release.
type slot struct{ a *addrSlots }

// acquire takes a slot for the client at remoteAddr, waiting up to f.wait
// (or until ctx ends) when it has f.limit requests in flight, and reports
// whether it got one; release gives it back.
func (f *inflight) acquire(ctx context.Context, remoteAddr string) (slot, bool) {
	key := remoteAddr
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		key = h
	}
	var t *time.Timer
	for {
		a := f.entry(key)
		switch a.take(int64(f.limit)) {
		case slotTaken:
			if t != nil {
				t.Stop()
			}
			return slot{a}, true
		case slotsGone:
			f.drop(key, a)
			continue
		}
		if t == nil {
			t = time.NewTimer(f.wait) // one wait in all, however many lookups
			defer t.Stop()
		}
		switch f.queue(ctx, a, t) {
		case slotTaken:
			return slot{a}, true
		case slotsGone:
			f.drop(key, a)
			continue
		}
		return slot{}, false
	}
}

// queue waits in a's line for a slot until t fires or ctx ends: slotTaken
// when a release handed it one, slotsFull when it gave up, slotsGone when a
// was swept before it could queue.
func (f *inflight) queue(ctx context.Context, a *addrSlots, t *time.Timer) int {
	a.mu.Lock()
	a.waiters.Add(1)
	// Again under mu, after counting itself as a waiter: a release that
	// came between the first try and here either shows here or sees the
	// waiter and hands its slot on (release).
	if got := a.take(int64(f.limit)); got != slotsFull {
		a.waiters.Add(-1)
		a.mu.Unlock()
		return got
	}
	ch := make(chan struct{}, 1)
	a.queue = append(a.queue, ch)
	a.mu.Unlock()
	select {
	case <-ch:
		return slotTaken
	case <-t.C:
	case <-ctx.Done():
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if i := slices.Index(a.queue, ch); i >= 0 {
		a.queue = slices.Delete(a.queue, i, i+1)
		a.waiters.Add(-1)
		return slotsFull
	}
	return slotTaken // a release handed it a slot as it gave up: keep it
}

func (f *inflight) release(s slot) {
	a := s.a
	a.n.Add(-1)
	if a.waiters.Load() == 0 {
		return
	}
	// Hand the freed slots to the requests in line, oldest first; a new
	// request may have taken one first, which is as fair as the line gets.
	a.mu.Lock()
	for len(a.queue) > 0 && a.take(int64(f.limit)) == slotTaken {
		ch := a.queue[0]
		a.queue = a.queue[1:]
		a.waiters.Add(-1)
		ch <- struct{}{}
	}
	a.mu.Unlock()
}

// entry returns key's counter, adding it (and sweeping if the map grew) if
// there is none.
func (f *inflight) entry(key string) *addrSlots {
	if v, ok := f.addrs.Load(key); ok {
		return v.(*addrSlots)
	}
	v, loaded := f.addrs.LoadOrStore(key, &addrSlots{})
	if !loaded && f.entries.Add(1) > f.sweepAt.Load() {
		f.sweep()
	}
	return v.(*addrSlots)
}

// drop removes a swept entry from the map, once.
func (f *inflight) drop(key string, a *addrSlots) {
	if f.addrs.CompareAndDelete(key, a) {
		f.entries.Add(-1)
	}
}

// sweep drops the entries no request holds or waits for, and sets the next
// sweep at twice what is left (at least inflightSweepMin).
func (f *inflight) sweep() {
	if !f.sweepMu.TryLock() {
		return // one is under way
	}
	defer f.sweepMu.Unlock()
	var live int64
	f.addrs.Range(func(k, v any) bool {
		a := v.(*addrSlots)
		a.mu.Lock()
		if a.waiters.Load() == 0 && a.n.CompareAndSwap(0, -1) {
			a.mu.Unlock()
			f.drop(k.(string), a)
			return true
		}
		a.mu.Unlock()
		live++
		return true
	})
	f.sweepAt.Store(max(inflightSweepMin, 2*live))
}

// refuseBusy answers 429: the client has had MaxInflightPerIP requests in
// flight for the whole wait.
func (f *inflight) refuseBusy(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	writeJSONError(w, http.StatusTooManyRequests, "Too many requests",
		"this client address has had "+strconv.Itoa(f.limit)+" MCP requests in flight for "+f.wait.String()+" (--max-inflight-per-ip); wait for one to finish, then retry")
}

// warnEvery rate-limits the warnings about refused requests, per kind: at
// most one every warnInterval, with how many were refused since.
type warnEvery struct {
	mu    sync.Mutex
	kinds map[string]*warnKind
}

type warnKind struct {
	last    time.Time
	skipped int
}

const warnInterval = 10 * time.Second

func (e *warnEvery) warn(log *slog.Logger, kind, msg string, args ...any) {
	e.mu.Lock()
	if e.kinds == nil {
		e.kinds = map[string]*warnKind{}
	}
	k := e.kinds[kind]
	if k == nil {
		k = &warnKind{}
		e.kinds[kind] = k
	}
	now := time.Now()
	if now.Sub(k.last) < warnInterval {
		k.skipped++
		e.mu.Unlock()
		return
	}
	skipped := k.skipped
	k.last, k.skipped = now, 0
	e.mu.Unlock()
	log.Warn(msg, append(args, "refused_since_last_warning", skipped)...)
}

package mcphttp

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"unicode/utf8"

	"github.com/agentbe/agentbe-daemon/internal/admit"
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
	return admit.ReplyTooLarge(n, b.left.Load(), b.limit)
}

// limitReplies is a receiving middleware of the SDK server: on HTTP
// requests every result is measured and charged to the budget of the HTTP
// request that carried it (serveSDK), and one that does not fit is replaced
// by a JSON-RPC error. With sessions too the budget is the request's, found
// by its headers: the context a session's handlers get is the one of the
// request that opened the session. Stdio's requests carry no headers and
// no budget. The fast path checks its own replies in writeFast.
func (s *Server) limitReplies(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		extra := req.GetExtra()
		if err != nil || res == nil || extra == nil || extra.Header == nil {
			return res, err
		}
		r, ok := s.sdkRequestOf(extra.Header)
		if !ok {
			// Answered already, or not handed over by serveSDK (the fast
			// path's own tools/list capture): one reply's limit still holds.
			r.budget = newReplyBudget(s.maxReply)
		}
		b := r.budget
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

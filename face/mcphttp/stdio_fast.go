package mcphttp

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/mcpjson"
)

// stdioFast is the fast path (fastpath.go) of a stdio session: a single
// tools/call line, once the session is initialized, is answered here and
// never reaches the SDK. Through the SDK a result is encoded three times
// (the result's MarshalJSON, the response's raw result, the message around
// it, each pass compacting the one before), about 30 ms per MiB of file
// read on a 2-core machine (BenchmarkStdioRead); here it is encoded once,
// with the bytes the SDK would write: TestStdioFastPathMatchesSDK compares
// both paths line for line.
//
// Everything else goes to the SDK unchanged: initialize and every other
// method, batches, notifications (a notifications/cancelled is also
// applied here, to the calls running on this path), calls with _meta (a
// progress token), unknown tools, ids the SDK would rewrite, and lines
// longer than stdioFastMaxLine. A call whose id is that of a call running
// here is dropped unanswered, as the SDK drops one whose id is in use.
type stdioFast struct {
	s   *Server
	out *countingWriter
	ss  atomic.Pointer[mcp.ServerSession] // set once Connect returns
	// connected is closed once ServeStdio's Connect has returned (ss set,
	// or Connect failed). The SDK reads the first lines on its own
	// goroutine before Connect returns, so a call read then waits for it
	// rather than go to the SDK for want of ss.
	connected chan struct{}

	ctx    context.Context // the session's; cancelled when it ends
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	inflight map[string]context.CancelFunc // by the id's JSON
}

// stdioFastMaxLine is the longest request line the fast path answers; a
// longer line (a large write) goes to the SDK once the in-flight cap has
// judged it (drainingReader.take).
const stdioFastMaxLine = 64 << 10

func newStdioFast(ctx context.Context, s *Server, out *countingWriter) *stdioFast {
	f := &stdioFast{s: s, out: out, inflight: map[string]context.CancelFunc{}, connected: make(chan struct{})}
	f.ctx, f.cancel = context.WithCancel(ctx)
	return f
}

// stop cancels the calls still running on the fast path and waits for them.
func (f *stdioFast) stop() {
	f.cancel()
	f.wg.Wait()
}

// answer runs line (one request line, without its newline) on the fast path
// if it is a fast-path call, and reports whether it did; the reply is
// written to the session's stdout when the call ends.
func (f *stdioFast) answer(line []byte) bool {
	if f.s.noFastPath {
		return false
	}
	trimmed := bytes.TrimLeft(line, " \t\r")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return false
	}
	if !bytes.Contains(line, []byte(`"tools/call"`)) {
		if bytes.Contains(line, []byte(`"notifications/cancelled"`)) {
			f.cancelled(line)
		}
		return false
	}
	select {
	case <-f.connected: // Connect reads on other goroutines: no wait on this one
	case <-f.ctx.Done():
		return false
	}
	ss := f.ss.Load()
	if ss == nil {
		return false
	}
	// The SDK refuses calls before initialize, and answers versions the
	// fast path does not know (fastProtocols) with their own semantics.
	if ip := ss.InitializeParams(); ip == nil || !fastProtocols[ip.ProtocolVersion] {
		return false
	}
	var req rpcRequest
	if err := json.Unmarshal(line, &req); err != nil || req.JSONRPC != "2.0" || req.Method != "tools/call" || len(req.Params.Meta) > 0 {
		return false
	}
	if !sdkReadsAlike(line) {
		return false
	}
	id, ok := sdkID(req.ID)
	if !ok {
		return false
	}
	if _, err := f.s.reg.Resolve(req.Params.Name); err != nil {
		return false // the SDK's to answer (auditUnknownTools)
	}
	key := string(id)
	f.mu.Lock()
	if f.ctx.Err() != nil {
		f.mu.Unlock()
		return false
	}
	if _, dup := f.inflight[key]; dup {
		// The SDK drops a request whose id is in use, unanswered; it
		// knows nothing of this path's calls, so it would run this one.
		f.mu.Unlock()
		return true
	}
	ctx, cancel := context.WithCancel(f.ctx)
	f.inflight[key] = cancel
	f.wg.Add(1)
	f.mu.Unlock()
	f.s.fastCalls.Add(1)
	go func() {
		defer f.wg.Done()
		res := f.s.callTool(ctx, req.Params.Name, req.Params.Arguments, "mcp-stdio", admit.Local, askerFor(ss), nil)
		bp := respBufs.Get().(*[]byte)
		out, err := appendResponse((*bp)[:0], id, res)
		if err != nil { // as the SDK answers a result it cannot encode
			out = append((*bp)[:0], `{"jsonrpc":"2.0","id":`...)
			out = append(out, id...)
			out = append(out, `,"error":{"code":-32603,"message":`...)
			out = mcpjson.AppendString(out, "encoding result: "+err.Error())
			out = append(out, "}}"...)
		}
		f.mu.Lock()
		delete(f.inflight, key)
		f.mu.Unlock()
		cancel()
		f.out.Write(append(out, '\n'))
		if cap(out) <= 1<<20 {
			*bp = out[:0]
			respBufs.Put(bp)
		}
	}()
	return true
}

// cancelled applies a notifications/cancelled to the call it names, if that
// call runs on the fast path (the SDK applies it to its own).
func (f *stdioFast) cancelled(line []byte) {
	var n struct {
		Method string `json:"method"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &n) != nil || n.Method != "notifications/cancelled" {
		return
	}
	id, ok := sdkID(n.Params.RequestID)
	if !ok {
		return
	}
	f.mu.Lock()
	cancel := f.inflight[string(id)]
	f.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// sdkID is a request id as the SDK writes it back in its response, and
// false for an id the fast path leaves to the SDK. The SDK decodes an id
// into a float64 or a string and encodes it again: an integer comes back
// as written only in its canonical form within float64's exact range, and
// a string is re-encoded without HTML escapes.
func sdkID(raw json.RawMessage) (json.RawMessage, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if enc.Encode(s) != nil {
			return nil, false
		}
		return bytes.TrimRight(b.Bytes(), "\n"), true
	case c == '-' || c >= '0' && c <= '9':
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n > 1<<53 || n < -(1<<53) || strconv.FormatInt(n, 10) != string(raw) || string(raw) == "-0" {
			return nil, false
		}
		return raw, true
	}
	return nil, false
}

// sdkReadsAlike reports whether the SDK reads line (a single object that
// json.Unmarshal decoded as a tools/call) as json.Unmarshal did: as
// sdkDecodesAlike, and the SDK's stdio reader ends the session on a byte
// other than a newline or a carriage return right after a message; such a
// line is the SDK's to answer
// (TestStdioFastPathLeavesToSDKWhatItReadsOtherwise).
func sdkReadsAlike(line []byte) bool {
	body := bytes.TrimRight(line, " \t\r")
	if rest := line[len(body):]; len(rest) > 0 && rest[0] != '\r' {
		return false
	}
	return sdkDecodesAlike(body)
}

package mcphttp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// The go-sdk refuses a request other than initialize and ping that arrives
// before initialize on a stdio session (or a stateful HTTP one,
// Options.Sessions) with a plain Go error, which its JSON-RPC layer writes as
// error code 0 (no code of the JSON-RPC range). A client that switches on the
// code (or a script that sends tools/list first, as it may over stateless
// HTTP, which needs no initialize) is left with a code that means nothing.
// The stdio writer (countingWriter) and uninitResponseWriter give that answer
// the code of an invalid request, -32600, and say what to send first. (-32002
// is not used: MCP gives it to "resource not found".)
//
// The SDK's wording is matched here; TestStdioBeforeInitialize,
// TestSessionsBeforeInitialize and cmd/agent-backend's
// TestStdioRequestBeforeInitialize fail if it changes.

// uninitSuffix ends the go-sdk's message for a request before initialize.
const uninitSuffix = " is invalid during session initialization"

// uninitHint is appended to the SDK's message.
const uninitHint = `: send "initialize" first (then the "notifications/initialized" notification); only "ping" is answered before it`

// codeInvalidRequest is JSON-RPC's "invalid request".
const codeInvalidRequest = -32600

// fixUninitialized returns p (one line the SDK writes: a message or a batch)
// with each refusal of a request before initialize carrying code -32600 and
// the hint. Lines without such a refusal are returned unchanged.
func fixUninitialized(p []byte) []byte {
	if !bytes.Contains(p, []byte(uninitSuffix)) {
		return p
	}
	body := bytes.TrimRight(p, "\r\n")
	end := p[len(body):]
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return p
	}
	var out []byte
	if trimmed[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(trimmed, &batch) != nil {
			return p
		}
		changed := false
		var b bytes.Buffer
		b.WriteByte('[')
		for i, m := range batch {
			if i > 0 {
				b.WriteByte(',')
			}
			fixed, ok := fixUninitializedOne(m)
			changed = changed || ok
			b.Write(fixed)
		}
		b.WriteByte(']')
		if !changed {
			return p
		}
		out = b.Bytes()
	} else {
		fixed, ok := fixUninitializedOne(trimmed)
		if !ok {
			return p
		}
		out = fixed
	}
	return append(out, end...)
}

// fixUninitializedOne rewrites one response if it is the SDK's refusal of a
// request before initialize; ok reports whether it was.
func fixUninitializedOne(m json.RawMessage) (json.RawMessage, bool) {
	var r struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Error   *struct {
			Code    int64           `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data,omitempty"`
		} `json:"error"`
	}
	if json.Unmarshal(m, &r) != nil || r.Method != "" || r.Error == nil || r.Error.Code != 0 ||
		!strings.HasSuffix(r.Error.Message, uninitSuffix) {
		return m, false
	}
	type wireError struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	}
	type response struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireError       `json:"error"`
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(response{JSONRPC: r.JSONRPC, ID: r.ID, Error: wireError{
		Code: codeInvalidRequest, Message: r.Error.Message + uninitHint, Data: r.Error.Data,
	}}) != nil {
		return m, false
	}
	return bytes.TrimRight(b.Bytes(), "\n"), true
}

// uninitResponseWriter gives the same code to the go-sdk's refusal of a
// request before initialize on stateful HTTP (Options.Sessions: a request
// without Mcp-Session-Id that is not initialize), where the SDK writes each
// SSE event, or a JSON reply, in one Write. A reply whose length is already
// declared (Content-Length) passes unchanged.
type uninitResponseWriter struct{ http.ResponseWriter }

func (w uninitResponseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w uninitResponseWriter) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte(uninitSuffix)) || w.Header().Get("Content-Length") != "" {
		return w.ResponseWriter.Write(p)
	}
	var out []byte
	if t := bytes.TrimSpace(p); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		out = fixUninitialized(p)
	} else { // SSE: event: message\ndata: {...}\n\n
		lines := bytes.Split(p, []byte("\n"))
		for i, l := range lines {
			if data, ok := bytes.CutPrefix(l, []byte("data: ")); ok {
				lines[i] = append([]byte("data: "), fixUninitialized(data)...)
			}
		}
		out = bytes.Join(lines, []byte("\n"))
	}
	n, err := w.ResponseWriter.Write(out)
	if n == len(out) {
		return len(p), err
	}
	return min(n, len(p)-1), err
}

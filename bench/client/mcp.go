// Package client holds the two clients the benchmarks drive a daemon with:
// raw JSON-RPC over HTTP for MCP (so the client's cost is the same whichever
// daemon answers, and small next to a call), and x/crypto/ssh over the
// daemon's /ssh WebSocket for SSH and SFTP.
package client

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// MCP calls tools on a daemon's stateless streamable-HTTP endpoint, one
// POST per call, without initialize (both daemons allow it). It is safe for
// concurrent use.
type MCP struct {
	URL string // http://host:port/mcp
	HC  *http.Client
}

// NewMCP returns a client for base (http://host:port) with a keep-alive
// connection pool big enough for conns concurrent callers.
func NewMCP(base string, conns int) *MCP {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		MaxConnsPerHost:     0,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &MCP{URL: strings.TrimRight(base, "/") + "/mcp", HC: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

// Close drops the pooled connections.
func (c *MCP) Close() { c.HC.CloseIdleConnections() }

// Call is one prepared tools/call: its body is encoded once, so repeated
// calls cost the client only the HTTP exchange and the reply's decoding.
type Call struct {
	Tool string
	body []byte
}

// Prepare encodes a tools/call of tool with args.
func Prepare(tool string, args map[string]any) Call {
	b, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args},
	})
	if err != nil {
		panic(err)
	}
	return Call{Tool: tool, body: b}
}

// Result is the part of a tools/call result the benchmarks check.
type Result struct {
	Text    string // the first text content
	IsError bool
}

type rpcReply struct {
	Result *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Do performs one call. A JSON-RPC error, an HTTP status other than 200 or
// a reply without a result is an error; a tool result with isError is not
// (the caller decides).
func (c *MCP) Do(call Call) (Result, error) {
	req, err := http.NewRequest(http.MethodPost, c.URL, bytes.NewReader(call.body))
	if err != nil {
		return Result{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.HC.Do(req)
	if err != nil {
		return Result{}, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return Result{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return Result{}, fmt.Errorf("%s: HTTP %d: %.200s", call.Tool, resp.StatusCode, body)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		if body, err = sseData(body); err != nil {
			return Result{}, fmt.Errorf("%s: %w", call.Tool, err)
		}
	}
	var r rpcReply
	if err := json.Unmarshal(body, &r); err != nil {
		return Result{}, fmt.Errorf("%s: bad reply: %w: %.200s", call.Tool, err, body)
	}
	if r.Error != nil {
		return Result{}, fmt.Errorf("%s: JSON-RPC error %d: %s", call.Tool, r.Error.Code, r.Error.Message)
	}
	if r.Result == nil {
		return Result{}, fmt.Errorf("%s: reply without result: %.200s", call.Tool, body)
	}
	out := Result{IsError: r.Result.IsError}
	for _, ct := range r.Result.Content {
		if ct.Type == "text" {
			out.Text = ct.Text
			break
		}
	}
	return out, nil
}

// MustOK performs a call and also treats an isError result as an error.
func (c *MCP) MustOK(call Call) (Result, error) {
	r, err := c.Do(call)
	if err == nil && r.IsError {
		err = fmt.Errorf("%s: tool error: %.200s", call.Tool, r.Text)
	}
	return r, err
}

// sseData returns the data of the first SSE event that carries one.
func sseData(b []byte) ([]byte, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
			continue
		}
		if len(line) == 0 && len(data) > 0 {
			return data, nil
		}
	}
	if len(data) > 0 {
		return data, nil
	}
	return nil, errors.New("SSE reply without data")
}

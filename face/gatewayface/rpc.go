package gatewayface

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"bytes"
	"encoding/json"
	"fmt"

	"github.com/agentbe/agentbe-daemon/internal/mcpjson"
)

// JSON-RPC 2.0 error codes. The server errors (-32000..-32099) are ours.
const (
	CodeParse          = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternal       = -32603

	CodeBusy          = -32000 // the registry's concurrency cap, or this connection's in-flight cap
	CodeUnknownTool   = -32001 // no tool of that name
	CodeRateLimited   = -32002 // this connection's rate limit
	CodeNoSuchRequest = -32003 // tools.approve of a request that is not waiting
	CodeNotOperator   = -32004 // tools.approve on a connection without the operator's token
	CodeAmbiguousTool = -32005 // a bare name several tools claim; data.tools names them
	CodeReplyTooLarge = -32006 // the answer would pass what is left of the message's MaxReply
)

// request is one JSON-RPC request or notification (no id).
type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// notification reports whether the request expects no answer.
func (r *request) notification() bool { return len(r.ID) == 0 }

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

// appendJSON writes the response. A tool result is written by
// internal/mcpjson, byte for byte what /mcp sends for it, without
// encoding/json's copies of the file text; anything else is marshalled.
func (r *response) appendJSON(buf []byte) ([]byte, error) {
	res, ok := r.Result.(*mcp.CallToolResult)
	if !ok || r.Error != nil {
		b, err := json.Marshal(r)
		return append(buf, b...), err
	}
	id := r.ID
	if len(id) == 0 {
		id = nullID
	}
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, id...)
	buf = append(buf, `,"result":`...)
	buf, err := mcpjson.AppendResult(buf, res)
	if err != nil {
		return nil, err
	}
	return append(buf, '}'), nil
}

func errResponse(id json.RawMessage, code int, format string, args ...any) *response {
	if len(id) == 0 {
		id = nullID
	}
	return &response{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// parsed is one message of the client: a single request or a batch. An
// element that is not a valid request is kept as its error answer.
type parsed struct {
	batch bool
	reqs  []*request
	errs  []*response // errs[i] != nil: reqs[i] is invalid and this is its answer
}

// parseMessage reads one WebSocket message. A message that cannot be
// answered request by request (bad JSON, an empty or oversized batch) is
// answered as a whole with the returned response.
func parseMessage(data []byte, maxBatch int) (*parsed, *response) {
	t := bytes.TrimLeft(data, " \t\r\n")
	if len(t) > 0 && t[0] == '[' {
		var elems []json.RawMessage
		if err := json.Unmarshal(t, &elems); err != nil {
			return nil, errResponse(nil, CodeParse, "parse error: %v", err)
		}
		if len(elems) == 0 {
			return nil, errResponse(nil, CodeInvalidRequest, "invalid request: empty batch")
		}
		if len(elems) > maxBatch {
			return nil, errResponse(nil, CodeInvalidRequest,
				"invalid request: the batch has %d messages; the limit is %d", len(elems), maxBatch)
		}
		p := &parsed{batch: true, reqs: make([]*request, len(elems)), errs: make([]*response, len(elems))}
		for i, e := range elems {
			p.reqs[i], p.errs[i] = parseRequest(e)
		}
		return p, nil
	}
	if !json.Valid(t) {
		return nil, errResponse(nil, CodeParse, "parse error: the message is not valid JSON")
	}
	req, eresp := parseRequest(t)
	return &parsed{reqs: []*request{req}, errs: []*response{eresp}}, nil
}

// parseRequest checks one request object.
func parseRequest(data json.RawMessage) (*request, *response) {
	var req request
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, errResponse(nil, CodeInvalidRequest, "invalid request: %v", err)
	}
	id := req.ID
	if len(id) > 0 {
		switch id[0] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'n':
		default:
			return nil, errResponse(nil, CodeInvalidRequest, "invalid request: id must be a string, a number or null")
		}
	}
	if req.JSONRPC != "2.0" {
		return nil, errResponse(id, CodeInvalidRequest, "invalid request: jsonrpc must be \"2.0\"")
	}
	if req.Method == "" {
		return nil, errResponse(id, CodeInvalidRequest, "invalid request: method is missing")
	}
	if len(req.Params) > 0 && req.Params[0] != '{' && req.Params[0] != '[' && string(req.Params) != "null" {
		return nil, errResponse(id, CodeInvalidRequest, "invalid request: params must be an object or an array")
	}
	return &req, nil
}

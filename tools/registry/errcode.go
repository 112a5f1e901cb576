package registry

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// MetaErrCode is the key of a failed result's _meta under which a handler
// names the errcode.Code of the failure. Faces that answer with a status
// (the REST face: 400 for INVALID_ARGUMENT and PATH_ESCAPE_ATTEMPT) read it
// with Code instead of parsing the text; MCP clients see it in _meta.
const MetaErrCode = "agentbe/errcode"

// WithCode marks a failed result with the code of the failure and returns it.
func WithCode(res *mcp.CallToolResult, code errcode.Code) *mcp.CallToolResult {
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[MetaErrCode] = string(code)
	return res
}

// Code is the errcode.Code a failed result carries ("" when it names none).
func Code(res *mcp.CallToolResult) errcode.Code {
	if res == nil || res.Meta == nil {
		return ""
	}
	s, _ := res.Meta[MetaErrCode].(string)
	return errcode.Code(s)
}

// WithoutCode is res without the mark of WithCode: res itself when it has
// none, else a copy (res may be shared). The MCP face sends results this
// way, so its clients get exactly what the tool would say without it.
func WithoutCode(res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil || res.Meta == nil {
		return res
	}
	if _, ok := res.Meta[MetaErrCode]; !ok {
		return res
	}
	c := *res
	c.Meta = nil
	for k, v := range res.Meta {
		if k != MetaErrCode {
			if c.Meta == nil {
				c.Meta = mcp.Meta{}
			}
			c.Meta[k] = v
		}
	}
	return &c
}

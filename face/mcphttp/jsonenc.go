package mcphttp

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/internal/mcpjson"
)

// appendResponse appends the JSON-RPC response carrying res, byte for byte
// what the SDK sends ({"jsonrpc":"2.0","id":…,"result":{"content":[…]}} with
// encoding/json's escaping); the result is internal/mcpjson's.
func appendResponse(buf []byte, id json.RawMessage, res *mcp.CallToolResult) ([]byte, error) {
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, id...)
	buf = append(buf, `,"result":`...)
	buf, err := mcpjson.AppendResult(buf, res)
	if err != nil {
		return nil, err
	}
	return append(buf, '}'), nil
}

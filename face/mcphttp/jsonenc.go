package mcphttp

import (
	"encoding/json"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/internal/mcpjson"
)

// appendResponse appends the JSON-RPC response carrying res, byte for byte
// what the SDK sends ({"jsonrpc":"2.0","id":…,"result":{"content":[…]}} with
// encoding/json's escaping); the result is internal/mcpjson's.
func appendResponse(buf []byte, id json.RawMessage, res *mcp.CallToolResult) ([]byte, error) {
	// Room for the text and a sixteenth more for its escapes (a newline
	// per line of 64 bytes is 1.6%), so that a large read is not copied
	// through every doubling of buf: growslice and its page faults were
	// half of a 1 MiB read's reply (BenchmarkStdioRead).
	n := 128 + len(id)
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			n += len(t.Text) + len(t.Text)/16
		}
	}
	buf = slices.Grow(buf, n)
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, id...)
	buf = append(buf, `,"result":`...)
	buf, err := mcpjson.AppendResult(buf, res)
	if err != nil {
		return nil, err
	}
	return append(buf, '}'), nil
}

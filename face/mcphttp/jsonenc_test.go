package mcphttp

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAppendResponse: the hand-written envelope equals encoding/json's for
// text results, error results, and results it leaves to encoding/json.
func TestAppendResponse(t *testing.T) {
	results := []*mcp.CallToolResult{
		&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello <world>\n"}}},
		toolError("Path escapes scope boundary: ../x"),
		{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.TextContent{Text: "b"}}},
		{Content: []mcp.Content{&mcp.ImageContent{Data: []byte{1, 2}, MIMEType: "image/png"}}},
		{Content: []mcp.Content{}},
	}
	for _, res := range results {
		type resp struct {
			JSONRPC string              `json:"jsonrpc"`
			ID      json.RawMessage     `json:"id"`
			Result  *mcp.CallToolResult `json:"result"`
		}
		want, err := json.Marshal(resp{"2.0", json.RawMessage(`"x-1"`), res})
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendResponse(nil, json.RawMessage(`"x-1"`), res)
		if err != nil || string(got) != string(want) {
			t.Errorf("got  %s (%v)\nwant %s", got, err, want)
		}
	}
}

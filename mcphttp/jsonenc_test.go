package mcphttp

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAppendJSONString holds appendJSONString to encoding/json on edge cases
// and on random strings (bytes from every class: ASCII, controls, HTML
// characters, multi-byte runes, U+2028, invalid UTF-8).
func TestAppendJSONString(t *testing.T) {
	cases := []string{"", "plain", `q"b\`, "\b\f\n\r\t\x00\x1f\x7f", "<a href='x'>&</a>", "é✓😀", "\u2028\u2029", "\xff\xfe", "a\xc3", "\xed\xa0\x80"}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", " ", "\"", "\\", "\n", "\x01", "<", "&", "é", "😀", "\u2028", "\xff", "\xe2\x80", "~", "\x7f"}
	for range 5000 {
		var s string
		for range rng.IntN(20) {
			s += alphabet[rng.IntN(len(alphabet))]
		}
		cases = append(cases, s)
	}
	for _, s := range cases {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("%q: got %s want %s", s, got, want)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	f.Add("a<b>\u2028\xff")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("%q: got %s want %s", s, got, want)
		}
	})
}

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

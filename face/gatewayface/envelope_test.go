package gatewayface

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// TestEnvelope: each kind of result in the gateway plan's ToolResult shape.
func TestEnvelope(t *testing.T) {
	text := func(s string) *mcp.TextContent { return &mcp.TextContent{Text: s} }
	for _, tt := range []struct {
		name string
		res  *mcp.CallToolResult
		want string
	}{
		{"structured", &mcp.CallToolResult{Content: []mcp.Content{text(`{"entries":[],"truncated":true}`)},
			StructuredContent: json.RawMessage(`{"entries":[],"truncated":true}`)},
			`{"ok":true,"data":{"entries":[],"truncated":true},"meta":{"durationMs":1.5,"truncated":true}}`},
		{"structured map", &mcp.CallToolResult{StructuredContent: map[string]any{"n": 1}},
			`{"ok":true,"data":{"n":1},"meta":{"durationMs":1.5}}`},
		{"text", &mcp.CallToolResult{Content: []mcp.Content{text("line 1"), text("line 2")}},
			`{"ok":true,"data":"line 1\nline 2","meta":{"durationMs":1.5}}`},
		{"image", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: []byte("png"), MIMEType: "image/png"}}},
			`{"ok":true,"data":[{"type":"image","mimeType":"image/png","data":"cG5n"}],"meta":{"durationMs":1.5}}`},
		{"empty", &mcp.CallToolResult{}, `{"ok":true,"meta":{"durationMs":1.5}}`},
		{"error with a code", registry.WithCode(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{text("a.txt: no such file")}}, errcode.NotFound),
			`{"ok":false,"error":{"code":"NOT_FOUND","message":"a.txt: no such file"},"meta":{"durationMs":1.5}}`},
		{"error without a code", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{text("server said no")}},
			`{"ok":false,"error":{"code":"TOOL_ERROR","message":"server said no"},"meta":{"durationMs":1.5}}`},
		{"error with details", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{text("exit 2")}, StructuredContent: json.RawMessage(`{"exitCode":2}`)},
			`{"ok":false,"error":{"code":"TOOL_ERROR","message":"exit 2","details":{"exitCode":2}},"meta":{"durationMs":1.5}}`},
	} {
		b, err := json.Marshal(envelope(tt.res, 1.5))
		if err != nil || string(b) != tt.want {
			t.Errorf("%s:\n got %s %v\nwant %s", tt.name, b, err, tt.want)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]string{"": FormatMCP, "mcp": FormatMCP, "MCP": FormatMCP, "toolResult": FormatToolResult, "toolresult": FormatToolResult} {
		if got, err := parseFormat(in, FormatMCP); err != nil || got != want {
			t.Errorf("parseFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if got, _ := parseFormat("", FormatToolResult); got != FormatToolResult {
		t.Errorf("the default is not kept: %q", got)
	}
	if _, err := parseFormat(strings.Repeat("x", 1000), FormatMCP); err == nil || len(err.Error()) > 300 {
		t.Errorf("a long bad value: %v", err)
	}
}

// TestParseFormatCutsOnARune: an unknown resultFormat is quoted in the
// error cut to 40 bytes, and a cut that falls inside a rune keeps the rune
// out rather than half of it (which %q would show as \xc3).
func TestParseFormatCutsOnARune(t *testing.T) {
	v := strings.Repeat("a", 39) + "é" + strings.Repeat("b", 10)
	_, err := parseFormat(v, FormatMCP)
	if err == nil {
		t.Fatal("an unknown resultFormat was accepted")
	}
	want := `resultFormat "` + strings.Repeat("a", 39) + `…"`
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q does not start with %q", err, want)
	}
}

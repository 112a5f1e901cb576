package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStdioRequestBeforeInitialize: the raw stdio exchange of a client that
// sends tools/list before initialize, through the real binary. The answer is
// JSON-RPC's -32600 naming the method and what to send first (the go-sdk
// alone answers code 0), and the same session then initializes and lists.
func TestStdioRequestBeforeInitialize(t *testing.T) {
	early := `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
	lines, stderr := mcpLines(t, []string{"daemon", "--local-only", "--root", t.TempDir(), "--isolation", "software"},
		early, initReq, initNote, listReq)
	if len(lines) != 3 {
		t.Fatalf("want 3 responses, got %d: %q\nstderr:\n%s", len(lines), lines, stderr)
	}
	var refused struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &refused); err != nil {
		t.Fatalf("%s: %v", lines[0], err)
	}
	if refused.ID != 7 || refused.Error.Code != -32600 {
		t.Errorf("tools/list before initialize: id %d code %d, want id 7 code -32600: %s", refused.ID, refused.Error.Code, lines[0])
	}
	if !strings.Contains(refused.Error.Message, `"tools/list"`) || !strings.Contains(refused.Error.Message, `send "initialize" first`) {
		t.Errorf("message names neither the method nor the remedy: %q", refused.Error.Message)
	}
	if !strings.Contains(lines[1], `"id":1,"result"`) || !strings.Contains(lines[2], `"name":"exec"`) {
		t.Errorf("initialize and tools/list after the refusal:\n%s\n%s", lines[1], lines[2])
	}
}

// TestStdioLineBoundFlag: --max-stdio-line-bytes reaches the stdio
// session of the real binary. A line one byte over it is answered with
// -32600 under its id, naming the flag and the bound, and the session
// goes on: the tools/list after it is answered.
func TestStdioLineBoundFlag(t *testing.T) {
	head := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"big.txt","content":"`
	tail := `"}}}`
	long := head + strings.Repeat("x", 64<<10+1-len(head)-len(tail)) + tail
	lines, stderr := mcpLines(t, []string{"daemon", "--local-only", "--root", t.TempDir(), "--isolation", "software", "--max-stdio-line-bytes", "64KiB"},
		initReq, initNote, long, listReq)
	if len(lines) != 3 {
		t.Fatalf("want 3 responses, got %d: %.600q\nstderr:\n%s", len(lines), lines, stderr)
	}
	if !strings.Contains(lines[1], `"id":9,"error":{"code":-32600`) || !strings.Contains(lines[1], "at most 65536 bytes (--max-stdio-line-bytes)") {
		t.Errorf("the over-long line: %s", lines[1])
	}
	if !strings.Contains(lines[2], `"id":2,"result"`) {
		t.Errorf("tools/list after the over-long line: %.300s", lines[2])
	}
}

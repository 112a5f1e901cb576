package echomcp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// Serve answers initialize, tools/list, tools/call and ping, one
// line each, skips notifications, and refuses other methods.
func TestServe(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"echo","arguments":{"text":"a \"quoted\" line"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"resources/list"}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	if err := Serve(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d answers, want 4:\n%s", len(lines), out.String())
	}
	type answer struct {
		ID     any             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	var answers []answer
	for _, l := range lines {
		var one answer
		if err := json.Unmarshal([]byte(l), &one); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		answers = append(answers, one)
	}
	if !strings.Contains(string(answers[0].Result), `"protocolVersion":"2025-06-18"`) {
		t.Errorf("initialize: %s", lines[0])
	}
	if !strings.Contains(string(answers[1].Result), `"name":"echo"`) {
		t.Errorf("tools/list: %s", lines[1])
	}
	if answers[2].ID != "three" || string(answers[2].Result) != `{"content":[{"type":"text","text":"a \"quoted\" line"}]}` {
		t.Errorf("tools/call: %s", lines[2])
	}
	if answers[3].Error == nil || answers[3].Error.Code != -32601 {
		t.Errorf("resources/list: %s", lines[3])
	}
}

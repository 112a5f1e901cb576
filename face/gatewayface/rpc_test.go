package gatewayface

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestParseMessage(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		whole     int   // code of a whole-message error, 0 none
		errs      []int // per request: 0 valid, else the code of its answer
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"tools.list"}`, 0, []int{0}},
		{"notification", `{"jsonrpc":"2.0","method":"tools.list"}`, 0, []int{0}},
		{"not json", `{"jsonrpc":`, CodeParse, nil},
		{"bad batch json", `[{"jsonrpc":"2.0"`, CodeParse, nil},
		{"empty batch", `[]`, CodeInvalidRequest, nil},
		{"batch too large", "[" + strings.Repeat(`1,`, 3) + "1]", CodeInvalidRequest, nil},
		{"batch of junk", `[1,{"jsonrpc":"2.0","id":"a","method":"m"}]`, 0, []int{CodeInvalidRequest, 0}},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"m"}`, 0, []int{CodeInvalidRequest}},
		{"no method", `{"jsonrpc":"2.0","id":1}`, 0, []int{CodeInvalidRequest}},
		{"bad id", `{"jsonrpc":"2.0","id":{},"method":"m"}`, 0, []int{CodeInvalidRequest}},
		{"scalar params", `{"jsonrpc":"2.0","id":1,"method":"m","params":3}`, 0, []int{CodeInvalidRequest}},
		{"scalar", `42`, 0, []int{CodeInvalidRequest}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, whole := parseMessage([]byte(tc.msg), 3)
			if tc.whole != 0 {
				if whole == nil || whole.Error.Code != tc.whole {
					t.Fatalf("whole = %+v, want code %d", whole, tc.whole)
				}
				return
			}
			if whole != nil || len(p.reqs) != len(tc.errs) {
				t.Fatalf("parsed %+v, whole %+v; want %d requests", p, whole, len(tc.errs))
			}
			for i, code := range tc.errs {
				got := 0
				if p.errs[i] != nil {
					got = p.errs[i].Error.Code
				}
				if got != code {
					t.Errorf("request %d: code %d, want %d", i, got, code)
				}
			}
		})
	}
}

// FuzzParseMessage: parseMessage never panics, answers either as a whole or
// request by request, and every answer it builds marshals.
func FuzzParseMessage(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"tools.list"}`, `[]`, `[1,2]`, `{"id":null}`, `"x"`, ` [ {"jsonrpc":"2.0","method":"a","params":[]} ]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, whole := parseMessage(data, 4)
		if (p == nil) == (whole == nil) {
			t.Fatalf("parseMessage(%q): parsed %v and whole %v", data, p, whole)
		}
		if whole != nil {
			if _, err := json.Marshal(whole); err != nil {
				t.Fatal(err)
			}
			return
		}
		if len(p.reqs) == 0 || len(p.reqs) > 4 || len(p.reqs) != len(p.errs) {
			t.Fatalf("parseMessage(%q): %d requests", data, len(p.reqs))
		}
		for i := range p.reqs {
			if (p.reqs[i] == nil) == (p.errs[i] == nil) {
				t.Fatalf("request %d: both or neither of request and error", i)
			}
			if p.errs[i] != nil {
				if _, err := json.Marshal(p.errs[i]); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

// TestResponseBytes: a tool result's response is written byte for byte as
// encoding/json writes it (what /mcp's fast path sends), for plain text,
// errors and results that are not plain text.
func TestResponseBytes(t *testing.T) {
	f := false
	for _, res := range []*mcp.CallToolResult{
		{Content: []mcp.Content{&mcp.TextContent{Text: "a <b> & \"c\"\n\u2028\xff"}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "x"}, &mcp.TextContent{Text: "y"}}, IsError: true},
		{Content: []mcp.Content{&mcp.TextContent{Text: "x", Annotations: &mcp.Annotations{Priority: 1}}}, StructuredContent: map[string]any{"k": f}},
		{Content: []mcp.Content{&mcp.ImageContent{Data: []byte{1, 2}, MIMEType: "image/png"}}},
	} {
		r := &response{JSONRPC: "2.0", ID: json.RawMessage(`7`), Result: res}
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.appendJSON(nil)
		if err != nil || string(got) != string(want) {
			t.Errorf("appendJSON:\n got %s\nwant %s", got, want)
		}
	}
}

package mcphttp

import (
	"strings"
	"testing"
)

// TestFastPathLeavesToSDKWhatItReadsOtherwise: a POST body whose keys
// json.Unmarshal would match without case ("ID", "Method", "Name", ...), or
// that nests past the SDK's 1000 levels, is answered as the SDK answers it
// (status, Content-Type and body), since the SDK's decoder matches keys
// exactly; the well-formed call beside them still takes the fast path.
func TestFastPathLeavesToSDKWhatItReadsOtherwise(t *testing.T) {
	fast, slow := newEnv(t), newEnv(t)
	slow.srv.noFastPath = true
	args := `{"path":"hello.txt"}`
	deep := strings.Repeat("[", 1001) + strings.Repeat("]", 1001)
	bodies := []string{
		`{"jsonrpc":"2.0","ID":7,"method":"tools/call","params":{"name":"read_text_file","arguments":` + args + `}}`,
		`{"jsonrpc":"2.0","id":7,"Method":"tools/call","params":{"name":"read_text_file","arguments":` + args + `}}`,
		`{"JSONRPC":"2.0","id":7,"method":"tools/call","params":{"name":"read_text_file","arguments":` + args + `}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","Params":{"name":"read_text_file","arguments":` + args + `}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"Name":"read_text_file","arguments":` + args + `}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_text_file","Arguments":` + args + `}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"hello.txt","x":` + deep + `}}}`,
		`{"jsonrpc":"2.0","ID":8,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_text_file","arguments":` + args + `}}`,
	}
	hdr := map[string]string{"Accept": "application/json", "MCP-Protocol-Version": "2025-06-18"}
	for _, e := range []*env{fast, slow} {
		rawPost(t, e.url(), "POST", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"hello.txt","content":"hi"}}}`, hdr)
	}
	before := fast.srv.fastCalls.Load()
	for _, body := range bodies {
		fr, fb := rawPost(t, fast.url(), "POST", body, hdr)
		sr, sb := rawPost(t, slow.url(), "POST", body, hdr)
		fb, sb = normalize(fb, fast.root), normalize(sb, slow.root)
		fb, sb = strings.TrimSuffix(fb, "\n"), strings.TrimSuffix(sb, "\n")
		if fr.StatusCode != sr.StatusCode || fr.Header.Get("Content-Type") != sr.Header.Get("Content-Type") || fb != sb {
			t.Errorf("%.90s:\nfast %d %s %s\nsdk  %d %s %s", body, fr.StatusCode, fr.Header.Get("Content-Type"), fb,
				sr.StatusCode, sr.Header.Get("Content-Type"), sb)
		}
	}
	if n := fast.srv.fastCalls.Load() - before; n != 1 {
		t.Errorf("the fast path answered %d of these, want 1 (the well-formed call)", n)
	}
}

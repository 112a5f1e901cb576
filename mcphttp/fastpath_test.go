package mcphttp

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

var escapedTimeRE = regexp.MustCompile(`\\"(created|accessed)\\": \\"[^\\]*\\"`)

// TestFastPathMatchesSDK sends every golden case as a raw JSON-RPC POST to
// two servers over identical workspaces, one answering tools/call on the
// fast path and one sending everything through the SDK, and requires the
// same status, Content-Type and body (after replacing the temp roots and
// the access times reads move).
func TestFastPathMatchesSDK(t *testing.T) {
	fast, slow := newEnv(t), newEnv(t)
	slow.srv.noFastPath = true
	known := 0
	for i, c := range goldenCases {
		if c.tool != "nonexistent_tool" {
			known++
		}
		args, _ := json.Marshal(c.args)
		body := `{"jsonrpc":"2.0","id":` + itoa(i+1) + `,"method":"tools/call","params":{"name":"` + c.tool + `","arguments":` + string(args) + `}}`
		accept := "application/json"
		if i%2 == 1 {
			accept = "text/event-stream" // every other case as SSE
		}
		hdr := map[string]string{"Accept": accept, "MCP-Protocol-Version": "2025-06-18"}
		fr, fb := rawPost(t, fast.url(), "POST", body, hdr)
		sr, sb := rawPost(t, slow.url(), "POST", body, hdr)
		fb, sb = normalize(fb, fast.root), normalize(sb, slow.root)
		// Inside the JSON-RPC body the times are in an escaped string.
		fb = escapedTimeRE.ReplaceAllString(fb, "$$TIME")
		sb = escapedTimeRE.ReplaceAllString(sb, "$$TIME")
		fb = strings.TrimSuffix(fb, "\n")
		sb = strings.TrimSuffix(sb, "\n")
		if fr.StatusCode != sr.StatusCode || fr.Header.Get("Content-Type") != sr.Header.Get("Content-Type") ||
			fr.Header.Get("Cache-Control") != sr.Header.Get("Cache-Control") || fb != sb {
			t.Errorf("case %d %s %s:\nfast %d %s %s\nsdk  %d %s %s", i, c.tool, args,
				fr.StatusCode, fr.Header.Get("Content-Type"), fb, sr.StatusCode, sr.Header.Get("Content-Type"), sb)
		}
	}
	if n := fast.srv.fastCalls.Load(); n != int64(known) {
		t.Errorf("fast path answered %d calls, want %d (the unknown tool goes to the SDK)", n, known)
	}
	if n := slow.srv.fastCalls.Load(); n != 0 {
		t.Errorf("SDK-only server used the fast path %d times", n)
	}
}

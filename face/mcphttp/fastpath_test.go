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

// TestFastPathConnect: what a connecting client sends besides initialize —
// notifications/initialized and tools/list — is answered on the fast path
// exactly as the SDK answers it, for each protocol version and reply format.
func TestFastPathConnect(t *testing.T) {
	fast, slow := newEnv(t), newEnv(t)
	slow.srv.noFastPath = true
	bodies := []string{
		`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/list","params":{}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"progressToken":1}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`,
	}
	n := 0
	for _, version := range []string{"", "2025-03-26", "2025-06-18", "2025-11-25"} {
		for _, accept := range []string{"application/json, text/event-stream", "text/event-stream"} {
			for _, body := range bodies {
				hdr := map[string]string{"Accept": accept, "MCP-Protocol-Version": version}
				fr, fb := rawPost(t, fast.url(), "POST", body, hdr)
				sr, sb := rawPost(t, slow.url(), "POST", body, hdr)
				n++
				if fr.StatusCode != sr.StatusCode || fr.Header.Get("Content-Type") != sr.Header.Get("Content-Type") ||
					strings.TrimSuffix(fb, "\n") != strings.TrimSuffix(sb, "\n") {
					t.Errorf("%s %q %s:\nfast %d %q %.200s\nsdk  %d %q %.200s", version, accept, body,
						fr.StatusCode, fr.Header.Get("Content-Type"), fb, sr.StatusCode, sr.Header.Get("Content-Type"), sb)
				}
			}
		}
	}
	if got := fast.srv.fastCalls.Load(); got != int64(n) {
		t.Errorf("fast path answered %d of %d requests", got, n)
	}
	// A paged tools/list goes to the SDK.
	before := fast.srv.fastCalls.Load()
	rawPost(t, fast.url(), "POST", `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"cursor":"abc"}}`, nil)
	if fast.srv.fastCalls.Load() != before {
		t.Error("a tools/list with a cursor was answered on the fast path")
	}
}

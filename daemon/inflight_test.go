package daemon

import (
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestInflightSharedByMCPAndREST: --max-inflight-per-ip is one count per
// client address across /mcp and /execute, so a client cannot have its
// limit in flight on each face. With a limit of 1 and a slow call running
// on either face, one more request from the same address on the other is
// refused with 429, Retry-After and the flag's name (after the short wait),
// while another address is served.
func TestInflightSharedByMCPAndREST(t *testing.T) {
	c := testConfig(t)
	c.MaxInflightPerIP = 1
	r := start(t, c, nil)
	one, two := clientFrom("127.0.0.1", false), clientFrom("127.0.0.2", false)
	slowMCP := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 3"}}}`
	slowREST := `{"tool_name":"exec","arguments":{"command":"sleep 3"}}`
	listREST := `{"tool_name":"list_allowed_directories","arguments":{}}`
	for _, tc := range []struct {
		name            string
		slowURL, slow   string
		otherURL, other string
	}{
		{"a call on /execute, then /mcp", "/execute", slowREST, "/mcp", mcpList},
		{"a call on /mcp, then /execute", "/mcp", slowMCP, "/execute", listREST},
	} {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, body := do(t, one, http.MethodPost, r.url+tc.slowURL, tc.slow); resp.StatusCode != http.StatusOK {
				t.Errorf("%s: the slow call: %d %.200s", tc.name, resp.StatusCode, body)
			}
		}()
		waitFor(t, "the slow call to hold its slot", func() bool { return r.d.w.inflight.Held("127.0.0.1") == 1 })
		resp, body := do(t, one, http.MethodPost, r.url+tc.otherURL, tc.other)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "--max-inflight-per-ip") {
			t.Errorf("%s: %d (Retry-After %q) %.300s; want 429 naming --max-inflight-per-ip", tc.name, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		if resp, body := do(t, two, http.MethodPost, r.url+tc.otherURL, tc.other); resp.StatusCode != http.StatusOK {
			t.Errorf("%s, from another address: %d %.300s", tc.name, resp.StatusCode, body)
		}
		wg.Wait()
		waitFor(t, "the slot to come back", func() bool { return r.d.w.inflight.Held("127.0.0.1") == 0 })
	}
}

package mcphttp

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// sessionTables are the sizes of what the Server and the SDK keep per
// session and per request handed to the SDK.
func sessionTables(s *Server) (sdk, owners, opening, held, callers int) {
	for range s.mcp.Sessions() {
		sdk++
	}
	s.sessMu.Lock()
	owners, opening, held = len(s.sessOwner), len(s.sessOpening), len(s.sessHeld)
	s.sessMu.Unlock()
	s.callersMu.Lock()
	callers = len(s.callers)
	s.callersMu.Unlock()
	return
}

// TestSessionsOverALongLife: 300 MCP sessions, each calling a tool name
// nobody serves (a new name each time); half ended with DELETE, half
// abandoned to the idle timeout, in rounds within --mcp-max-sessions.
// After each round the SDK's session table, the holds, the sessions being
// opened and the requests handed to the SDK are empty again; the owners of
// ended sessions stay at most --mcp-max-sessions, and the next initialize
// forgets them; the goroutines are back where they were.
func TestSessionsOverALongLife(t *testing.T) {
	// The idle timeout is long enough that no session ends between its
	// own requests on a loaded machine, short enough to wait for 6 times.
	const maxSess, rounds = 50, 6
	e := sessionsEnv(t, maxSess, time.Second)
	open := func(i int) string {
		resp, body := rawPost(t, e.url(), "POST", initBody, nil)
		id := resp.Header.Get("Mcp-Session-Id")
		if id == "" {
			t.Fatalf("session %d: initialize: %d %.200s", i, resp.StatusCode, body)
		}
		h := map[string]string{"Mcp-Session-Id": id, "MCP-Protocol-Version": "2025-06-18"}
		rawPost(t, e.url(), "POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
		call := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nobody_serves_%d","arguments":{}}}`, i)
		if resp, body := rawPost(t, e.url(), "POST", call, h); resp.StatusCode != http.StatusOK || !strings.Contains(body, "nobody_serves") {
			t.Fatalf("session %d: unknown tool: %d %.200s", i, resp.StatusCode, body)
		}
		return id
	}
	// The owners of ended sessions are forgotten at the next request
	// that may open one (sessionCount), so they are counted apart.
	drained := func() bool {
		sdk, _, opening, held, callers := sessionTables(e.srv)
		return sdk+opening+held+callers == 0
	}
	waitDrained := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !drained(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				sdk, owners, opening, held, callers := sessionTables(e.srv)
				t.Fatalf("%s: sessions %d, owners %d, opening %d, held %d, callers %d; want all but owners 0", what, sdk, owners, opening, held, callers)
			}
		}
	}
	// One round first, so that what the first sessions start once
	// (the SDK's and net/http's) is in the baseline.
	_ = open(-1)
	waitDrained("the first session")
	g0 := runtime.NumGoroutine()
	n := 0
	for r := range rounds {
		for i := range maxSess {
			id := open(n)
			n++
			if i%2 == 0 {
				req, _ := http.NewRequest("DELETE", e.url(), nil)
				req.Header.Set("Mcp-Session-Id", id)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
		}
		waitDrained(fmt.Sprintf("round %d", r))
	}
	if _, owners, _, _, _ := sessionTables(e.srv); owners > maxSess {
		t.Errorf("%d session owners kept after %d sessions; want at most %d", owners, n, maxSess)
	}
	last := open(n)
	if _, owners, _, _, _ := sessionTables(e.srv); owners != 1 {
		t.Errorf("%d session owners with one session open; want 1", owners)
	}
	req, _ := http.NewRequest("DELETE", e.url(), nil)
	req.Header.Set("Mcp-Session-Id", last)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	waitDrained("the last session")
	http.DefaultClient.CloseIdleConnections()
	g := runtime.NumGoroutine()
	for deadline := time.Now().Add(10 * time.Second); g > g0+2 && time.Now().Before(deadline); g = runtime.NumGoroutine() {
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d sessions (half deleted, half abandoned): tables empty; goroutines %d → %d", n, g0, g)
	// A goroutine or two of the runtime's own may come and go.
	if g > g0+2 {
		t.Errorf("goroutines %d → %d after %d sessions", g0, g, n)
	}
}

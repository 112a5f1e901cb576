package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/tools/browser"
)

// browserSession connects a go-sdk MCP client to r and returns a function
// that calls a tool and gives its last text and whether it is an error.
func browserSession(t *testing.T, r *running) func(tool, args string) (string, bool) {
	t.Helper()
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "browser-local", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: r.url + "/mcp", DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return func(tool, args string) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res.Content[len(res.Content)-1].(*mcp.TextContent).Text, res.IsError
	}
}

// TestBrowseLocalPageOneFlag: --browser-allow-local is the one flag that
// lets the agent browse a page the user serves on this machine: with it
// alone (no --browser-tools, --browser-allow-http, --net-allow-private or
// --net-allow-ports) the daemon serves the browser tools and a real
// Chromium loads http://127.0.0.1:PORT/ and http://localhost:PORT/ of a
// loopback server on a port of its own. Plain http elsewhere stays
// refused.
func TestBrowseLocalPageOneFlag(t *testing.T) {
	testenv.Command(t, "chromium", "chromium")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Served locally</title><p>dev server</p>`)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	// Under /tmp, whatever TMPDIR is.
	tmp := testenv.SharedTempDir(t)
	if err := os.Chmod(tmp, 0o711); err != nil { // Chromium may run as nobody
		t.Fatal(err)
	}
	c := testConfig(t)
	c.BrowserAllowLocal = true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// Only where the sessions' directories go: the network rules are the
	// flag's.
	r := startWith(t, c, Options{browserTweak: func(o *browser.Options) { o.TempDir = tmp }})
	call := browserSession(t, r)

	text, isErr := call("browser.start", `{}`)
	if isErr {
		t.Fatalf("browser.start: %s", text)
	}
	var started struct{ SessionID string }
	if err := json.Unmarshal([]byte(text), &started); err != nil || started.SessionID == "" {
		t.Fatalf("browser.start: %s", text)
	}
	for _, u := range []string{"http://127.0.0.1:" + port + "/", "http://localhost:" + port + "/"} {
		text, isErr := call("browser.goto", `{"sessionId":"`+started.SessionID+`","url":"`+u+`"}`)
		var page struct{ Title string }
		if isErr || json.Unmarshal([]byte(text), &page) != nil || page.Title != "Served locally" {
			t.Errorf("goto %s with --browser-allow-local: error %v, %s", u, isErr, text)
		}
	}
	// http to another host is still --browser-allow-http's.
	if text, isErr := call("browser.goto", `{"sessionId":"`+started.SessionID+`","url":"http://10.255.255.1/"}`); !isErr || !strings.Contains(text, "--browser-allow-http") {
		t.Errorf("http to a non-loopback host with --browser-allow-local only: error %v, %s", isErr, text)
	}
	call("browser.close", `{"sessionId":"`+started.SessionID+`"}`)
}

// TestBrowseLocalPageRefusal: without --browser-allow-local, browsing a
// page of this machine is refused with one message that names the one
// flag and the command line, whatever rule the URL breaks first (plain
// http, a port other than 80 and 443, loopback itself), rather than the
// next flag of three. The refusal comes before any browser is started.
func TestBrowseLocalPageRefusal(t *testing.T) {
	c := testConfig(t)
	c.BrowserTools = true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	call := browserSession(t, r)
	for _, u := range []string{
		"http://127.0.0.1:5173/",        // http, a port, loopback
		"https://127.0.0.1/",            // loopback only
		"https://localhost:8443/app",    // a port and this machine's name
		"http://[::1]:3000/",            // IPv6 loopback
		"http://dev.localhost:8080/x?y", // a name under .localhost
	} {
		text, isErr := call("browser.goto", `{"sessionId":"none","url":"`+u+`"}`)
		if !isErr || !strings.Contains(text, "agent-backend daemon --browser-tools --browser-allow-local") {
			t.Errorf("goto %s without --browser-allow-local: error %v, %s; want the one flag and its command line", u, isErr, text)
		}
		for _, other := range []string{"--browser-allow-http", "--net-allow-private", "--net-allow-ports"} {
			if strings.Contains(text, other) {
				t.Errorf("goto %s: the refusal names %s, which is not needed: %s", u, other, text)
			}
		}
	}
	// Not this machine: the rule that applies, as before.
	if text, _ := call("browser.goto", `{"sessionId":"none","url":"http://example.com/"}`); !strings.Contains(text, "--browser-allow-http") || strings.Contains(text, "--browser-allow-local") {
		t.Errorf("goto http://example.com/: %s; want the http rule, not the local one", text)
	}
}
